/**
 * Every error a client can see, as tagged errors, and the two wire bodies of the spec
 * (StandardError and DetailedError). Services fail with these; the HTTP layer renders them in one
 * place (`@tollgate/http` `ErrorResponse`), so a status code is decided here and nowhere else.
 *
 * @since 0.1.0
 */
import { Data, Schema, SchemaIssue } from "effect"

/**
 * Nested validation messages: every field maps to an object with its own `_errors`, and nested
 * fields nest (`details.style_references["0"]._errors`).
 *
 * @category models
 */
export interface FieldErrors {
  readonly _errors: Array<string>
  readonly [field: string]: FieldErrors | Array<string>
}

/**
 * `{"error": "..."}`, the body of most errors. `code` is set for the API-key 402
 * (`INSUFFICIENT_BALANCE`) and `customMessage` for the RPC proxy's 429.
 *
 * @category schemas
 */
export const StandardError = Schema.Struct({
  error: Schema.String,
  code: Schema.optionalKey(Schema.String),
  customMessage: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "StandardError" })

/** @category schemas */
export const DetailedError = Schema.Struct({
  error: Schema.String,
  details: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
}).annotate({ identifier: "DetailedError" })

/**
 * Builds FieldErrors from `(path, message)` pairs.
 *
 * @category constructors
 */
export const fieldErrors = (
  issues: Iterable<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>
): FieldErrors => {
  const root: { _errors: Array<string>; [k: string]: unknown } = { _errors: [] }
  for (const { message, path } of issues) {
    let node = root
    for (const segment of path) {
      const key = String(segment)
      node = (node[key] ??= { _errors: [] }) as typeof root
    }
    node._errors.push(message)
  }
  return root as FieldErrors
}

/**
 * FieldErrors from a Schema issue (decode with `{ errors: "all" }` to get every field).
 *
 * @category constructors
 */
export const fieldErrorsFromIssue = (issue: SchemaIssue.Issue): FieldErrors =>
  fieldErrors(
    SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues.map(({ message, path }) => ({
      message,
      path: (path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment))
    }))
  )

/**
 * 400: the request is wrong. With `details` it renders as DetailedError.
 *
 * @category errors
 */
export class InvalidRequest extends Data.TaggedError("InvalidRequest")<{
  readonly message: string
  readonly details?: FieldErrors
}> {}

/**
 * The message of every 400 DetailedError that names bad fields.
 *
 * @category constants
 */
export const INVALID_PARAMETERS = "Invalid request parameters"

/**
 * 400 DetailedError naming every bad field of `problems`.
 *
 * @category constructors
 */
export const invalidParameters = (problems: Iterable<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>) =>
  new InvalidRequest({ message: INVALID_PARAMETERS, details: fieldErrors(problems) })

/**
 * 400 from a Schema decoding failure, with every field's messages.
 *
 * @category constructors
 */
export const invalidRequestFromIssue = (issue: SchemaIssue.Issue, message = INVALID_PARAMETERS) =>
  new InvalidRequest({ message, details: fieldErrorsFromIssue(issue) })

/**
 * 400 naming the one field that is wrong (`path`: the field, or the path to a nested one), as a
 * Schema failure of that field would.
 *
 * @category constructors
 */
export const invalidField = (path: string | ReadonlyArray<PropertyKey>, message: string) =>
  invalidParameters([{ path: typeof path === "string" ? [path] : path, message }])

/** 401 @category errors */
export class Unauthenticated extends Data.TaggedError("Unauthenticated")<{ readonly message: string }> {}

/** 402 for an API-key principal: StandardError with code INSUFFICIENT_BALANCE. @category errors */
export class InsufficientBalance extends Data.TaggedError("InsufficientBalance")<{ readonly message: string }> {}

/**
 * 402: the API key's spend cap (`KeyCaps`) leaves no room for the call's quote; StandardError with
 * code SPEND_CAP_REACHED. Another key of the account, or a raised cap, can still pay.
 *
 * @category errors
 */
export class SpendCapReached extends Data.TaggedError("SpendCapReached")<{ readonly message: string }> {}

/**
 * 402 whose body was built by the x402 module (the discovery form or the authenticated-wallet
 * form), with the headers that go with it (`PAYMENT-REQUIRED`).
 *
 * @category errors
 */
export class PaymentRequired extends Data.TaggedError("PaymentRequired")<{
  readonly body: unknown
  readonly headers?: Readonly<Record<string, string>>
}> {}

/** 403 @category errors */
export class Forbidden extends Data.TaggedError("Forbidden")<{ readonly message: string }> {}

/** 404 @category errors */
export class NotFound extends Data.TaggedError("NotFound")<{ readonly message: string }> {}

/** 405 @category errors */
export class MethodNotAllowed extends Data.TaggedError("MethodNotAllowed")<{
  readonly message: string
  readonly allow: ReadonlyArray<string>
}> {}

/** 409 @category errors */
export class Conflict extends Data.TaggedError("Conflict")<{ readonly message: string }> {}

/**
 * 408: the request's body arrived too slowly (see `@tollgate/http` `BodyDeadline`); the connection
 * is closed with the answer.
 *
 * @category errors
 */
export class RequestTimeout extends Data.TaggedError("RequestTimeout")<{ readonly message: string }> {}

/** 410 @category errors */
export class Gone extends Data.TaggedError("Gone")<{ readonly message: string }> {}

/** 413 @category errors */
export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{ readonly message: string }> {}

/**
 * 429. `headers` are the rate-limit headers of the limit that tripped; `retryAfterSeconds` becomes
 * `Retry-After`; `customMessage` names the RPC cap that tripped.
 *
 * @category errors
 */
export class RateLimited extends Data.TaggedError("RateLimited")<{
  readonly message: string
  readonly retryAfterSeconds: number
  readonly headers?: Readonly<Record<string, string>>
  readonly customMessage?: string
}> {}

/** 500: the inference itself failed. @category errors */
export class InferenceFailed extends Data.TaggedError("InferenceFailed")<{ readonly message: string }> {}

/** 502: an upstream answered badly or not at all. @category errors */
export class BadGateway extends Data.TaggedError("BadGateway")<{ readonly message: string }> {}

/** 503: retry with exponential backoff. @category errors */
export class ServiceUnavailable extends Data.TaggedError("ServiceUnavailable")<{
  readonly message: string
  readonly retryAfterSeconds?: number
}> {}

/**
 * The 503 of a store that cannot be reached (`store` as users may read it, e.g. "The credit
 * ledger"): it asks for a retry in a second and never carries the driver's error, whose text names
 * internals (`~effect/persistence/Redis/RedisError`); `tollgate_redis_errors_total` counts them.
 *
 * @category constructors
 */
export const storeUnavailable = (store: string): ServiceUnavailable =>
  new ServiceUnavailable({ message: `${store} is temporarily unavailable; retry shortly`, retryAfterSeconds: 1 })

/** 504: an upstream did not answer in time. @category errors */
export class GatewayTimeout extends Data.TaggedError("GatewayTimeout")<{ readonly message: string }> {}

/** 505: the request line names an HTTP version other than 1.0 and 1.1. @category errors */
export class HttpVersionNotSupported extends Data.TaggedError("HttpVersionNotSupported")<{ readonly message: string }> {}

/**
 * Every error that reaches a client.
 *
 * @category models
 */
export type ApiError =
  | InvalidRequest
  | Unauthenticated
  | InsufficientBalance
  | SpendCapReached
  | PaymentRequired
  | Forbidden
  | NotFound
  | MethodNotAllowed
  | Conflict
  | RequestTimeout
  | Gone
  | PayloadTooLarge
  | RateLimited
  | InferenceFailed
  | BadGateway
  | ServiceUnavailable
  | GatewayTimeout
  | HttpVersionNotSupported

/**
 * The HTTP status of each error.
 *
 * @category models
 */
export const statusOf: { readonly [K in ApiError["_tag"]]: number } = {
  InvalidRequest: 400,
  Unauthenticated: 401,
  InsufficientBalance: 402,
  SpendCapReached: 402,
  PaymentRequired: 402,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  Conflict: 409,
  RequestTimeout: 408,
  Gone: 410,
  PayloadTooLarge: 413,
  RateLimited: 429,
  InferenceFailed: 500,
  BadGateway: 502,
  ServiceUnavailable: 503,
  GatewayTimeout: 504,
  HttpVersionNotSupported: 505
}

/** @category guards */
export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in statusOf
