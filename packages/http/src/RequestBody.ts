/**
 * Reading a request's JSON body, the same way on every route: under the app's body cap or a
 * route's own (`maxBytes`, for routes whose bodies are legitimately larger), a body over the cap is
 * a 413 and one that is not JSON a 400, and `schema` decodes it into a 400 DetailedError naming
 * every bad field. Routes never read `request.json` themselves, so the answer to a bad body does
 * not depend on which route received it. A body read under a raised cap first holds its size
 * against the process's `UploadBudget` for the rest of the request. Every body is read under the
 * `BodyDeadline`: one that arrives too slowly is a 408. A JSON body nested deeper than
 * `JsonDepth.MAX_DEPTH` is a 400.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import { type ByteSize, Context, Effect, Schema, type Scope } from "effect"
import { HttpIncomingMessage, type HttpServerError, HttpServerRequest } from "effect/http"
import * as BodyDeadline from "./BodyDeadline.ts"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as JsonDepth from "./JsonDepth.ts"
import { UploadBudget } from "./UploadBudget.ts"

/**
 * The JSON body, read under `maxBytes` when given, else under the app's cap.
 *
 * @category reading
 */
export const json = (
  maxBytes?: ByteSize.ByteSize
): Effect.Effect<
  unknown,
  Errors.PayloadTooLarge | Errors.InvalidRequest | Errors.ServiceUnavailable | Errors.RequestTimeout,
  HttpServerRequest.HttpServerRequest | Scope.Scope
> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (maxBytes !== undefined) yield* (yield* UploadBudget).hold(Number(maxBytes))
    const limit = maxBytes ?? (yield* HttpIncomingMessage.MaxBodySize)
    const body = maxBytes === undefined
      ? request.json
      : Effect.provideService(request.json, HttpIncomingMessage.MaxBodySize, maxBytes)
    const parsed = yield* BodyDeadline.read(Effect.mapError(body, (error) =>
      error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
        ? ErrorResponse.bodyTooLarge(limit)
        : new Errors.InvalidRequest({ message: unparsable(error.reason.cause) })))
    if (JsonDepth.exceeds(parsed))
      return yield* JsonDepth.tooDeep
    return parsed
  })

const decoder = new TextDecoder()

/**
 * The JSON body with its bytes, read and refused as `json` reads and refuses it: for routes that
 * forward part of the body as it came (the chat route's messages, found with `JsonText.member`)
 * instead of encoding again what they did not change.
 *
 * @category reading
 */
export const jsonWithBytes = (
  maxBytes?: ByteSize.ByteSize
): Effect.Effect<
  { readonly json: unknown; readonly bytes: Uint8Array },
  Errors.PayloadTooLarge | Errors.InvalidRequest | Errors.ServiceUnavailable | Errors.RequestTimeout,
  HttpServerRequest.HttpServerRequest | Scope.Scope
> =>
  Effect.flatMap(bytes(maxBytes), (bytes) => {
    let json: unknown
    try {
      json = bytes.length === 0 ? null : JSON.parse(decoder.decode(bytes))
    } catch (cause) {
      return Effect.fail(new Errors.InvalidRequest({ message: unparsable(cause) }))
    }
    return JsonDepth.exceeds(json) ? Effect.fail(JsonDepth.tooDeep) : Effect.succeed({ json, bytes })
  })

/**
 * Where a body that is not JSON broke, in the parser's words (`Unexpected token '}',
 * ..."ssages": [}" is not valid JSON`, or `... at position 14 (line 1 column 15)`): a client
 * fixing it needs the place, not only the verdict.
 */
const unparsable = (cause: unknown): string =>
  cause instanceof SyntaxError ? `The body is not valid JSON: ${cause.message}` : "The body must be a JSON object"

/**
 * The raw body, read under `maxBytes` when given, else under the app's cap: for routes that
 * forward or fingerprint the bytes as they came (the RPC proxy).
 *
 * @category reading
 */
export const bytes = (
  maxBytes?: ByteSize.ByteSize
): Effect.Effect<
  Uint8Array,
  Errors.PayloadTooLarge | Errors.InvalidRequest | Errors.ServiceUnavailable | Errors.RequestTimeout,
  HttpServerRequest.HttpServerRequest | Scope.Scope
> =>
  // The RPC proxy reads every paid call's body here: the request and its cap are read from the
  // fiber, not as Effect steps.
  Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    if (maxBytes === undefined) {
      return BodyDeadline.read(Effect.mapBoth(request.arrayBuffer, bytesRead(fiber.getRef(HttpIncomingMessage.MaxBodySize))))
    }
    const body = BodyDeadline.read(
      Effect.mapBoth(Effect.provideService(request.arrayBuffer, HttpIncomingMessage.MaxBodySize, maxBytes), bytesRead(maxBytes))
    )
    return Effect.andThen(Effect.flatMap(UploadBudget, (budget) => budget.hold(Number(maxBytes))), body)
  })

const bytesRead = (limit: ByteSize.ByteSize | undefined) => ({
  onSuccess: (buffer: ArrayBuffer) => new Uint8Array(buffer),
  onFailure: (error: HttpServerError.HttpServerError) =>
    error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
      ? ErrorResponse.bodyTooLarge(limit)
      : new Errors.InvalidRequest({ message: "Request body could not be read" })
})

/**
 * Decodes untrusted input (a body, a query) with `schema`, every problem reported at once as a
 * 400 DetailedError under `message`.
 *
 * @category decoding
 */
export const decode = <S extends Schema.Decoder<unknown>>(
  schema: S,
  input: unknown,
  message?: string
): Effect.Effect<S["Type"], Errors.InvalidRequest> =>
  Schema.decodeUnknownEffect(schema)(input, { errors: "all" }).pipe(
    Effect.mapError((error) => Errors.invalidRequestFromIssue(error.issue, message))
  )

/**
 * The JSON body decoded with `schema`.
 *
 * @category reading
 */
export const schema = <S extends Schema.Decoder<unknown>>(
  schema: S,
  maxBytes?: ByteSize.ByteSize
): Effect.Effect<
  S["Type"],
  Errors.PayloadTooLarge | Errors.InvalidRequest | Errors.ServiceUnavailable | Errors.RequestTimeout,
  HttpServerRequest.HttpServerRequest | Scope.Scope
> => Effect.flatMap(json(maxBytes), (body) => decode(schema, body))
