/**
 * The one place where errors become responses. Tagged errors from `@tollgate/core` map to their
 * status and the spec's body (StandardError, DetailedError, the 402 forms, the 429 with its
 * headers); anything else a client could not have caused is a 500 whose body says nothing about
 * the internals. Anthropic's Messages API renders the same errors in Anthropic's shape
 * (`renderAnthropic`), with the same statuses and headers.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import { type ByteSize, Cause, Effect } from "effect"
import { HttpIncomingMessage, type HttpServerError, HttpServerResponse } from "effect/http"

const json = (status: number, body: unknown, headers?: Readonly<Record<string, string>>) =>
  HttpServerResponse.jsonUnsafe(body, headers === undefined ? { status } : { status, headers })

/** Every problem of DetailedError details, depth first, with the path of its field. */
const problems = (
  details: Errors.FieldErrors,
  path: ReadonlyArray<string> = []
): Array<{ readonly path: ReadonlyArray<string>; readonly message: string }> => [
  ...details._errors.map((message) => ({ path, message })),
  ...Object.entries(details).flatMap(([key, child]) => Array.isArray(child) ? [] : problems(child, [...path, key]))
]

/**
 * The `error` text of a DetailedError: the message and its first problem as `field: problem`,
 * since clients such as the `openai` SDK show `error` and never `details` (`Invalid request
 * parameters: model: Unknown text model: gpt-4o`). The others are counted; `details` keeps them
 * all. A message that already states its problem is left as it is.
 */
const detailedMessage = (message: string, details: Errors.FieldErrors): string => {
  const [first, ...others] = problems(details)
  if (first === undefined || message.includes(first.message)) return message
  const problem = first.path.length === 0 ? first.message : `${first.path.join(".")}: ${first.message}`
  return others.length === 0 ? `${message}: ${problem}` : `${message}: ${problem} (and ${others.length} more in details)`
}

/**
 * The 413 of a body over `limit` bytes: the message states the limit, so a client knows what to
 * send instead.
 *
 * @category constructors
 */
export const bodyTooLarge = (limit: ByteSize.ByteSize | number | undefined): Errors.PayloadTooLarge =>
  new Errors.PayloadTooLarge({
    message: limit === undefined ? "Request body is too large" : `Request body is too large: the limit is ${Number(limit)} bytes`
  })

/**
 * The response of a tagged error.
 *
 * @category rendering
 */
export const render = (error: Errors.ApiError): HttpServerResponse.HttpServerResponse => {
  const status = Errors.statusOf[error._tag]
  switch (error._tag) {
    case "InvalidRequest":
      return json(
        status,
        error.details === undefined ? { error: error.message } : {
          error: detailedMessage(error.message, error.details),
          details: error.details
        }
      )
    case "InsufficientBalance":
      return json(status, { error: error.message, code: "INSUFFICIENT_BALANCE" })
    case "SpendCapReached":
      return json(status, { error: error.message, code: "SPEND_CAP_REACHED" })
    case "PaymentRequired":
      return json(status, error.body, { "cache-control": "no-store", ...error.headers })
    case "MethodNotAllowed":
      return json(status, { error: error.message }, { allow: error.allow.join(", ") })
    case "RateLimited":
      return json(
        status,
        error.customMessage === undefined
          ? { error: error.message }
          : { error: error.message, customMessage: error.customMessage },
        { ...error.headers, "retry-after": String(Math.max(0, Math.ceil(error.retryAfterSeconds))) }
      )
    case "ServiceUnavailable":
      return json(
        status,
        { error: error.message },
        error.retryAfterSeconds === undefined ? undefined : { "retry-after": String(error.retryAfterSeconds) }
      )
    case "RequestTimeout":
      // The rest of a body that came too slowly is not waited for: the connection ends here.
      return json(status, { error: error.message }, { connection: "close" })
    default:
      return json(status, { error: error.message })
  }
}

/** The `error.type` Anthropic's clients read for each status. */
const anthropicTypes: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error"
}

/**
 * The response of a tagged error in Anthropic's shape (`{type: "error", error: {type, message}}`),
 * for the Messages API: the status and headers `render` gives it, and the message it states
 * (a DetailedError's first problem included, as its `details` have no place there). An x402
 * payment request keeps its own body.
 *
 * @category rendering
 */
export const renderAnthropic = (error: Errors.ApiError): HttpServerResponse.HttpServerResponse => {
  const rendered = render(error)
  // a 402 that asks for a payment keeps the payment protocol's body, which a paying client reads
  if (error._tag === "PaymentRequired") return rendered
  const message = error._tag === "InvalidRequest" && error.details !== undefined
    ? detailedMessage(error.message, error.details)
    : error.message
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(rendered.headers)) {
    if (name !== "content-type" && typeof value === "string") headers[name] = value
  }
  return json(rendered.status, { type: "error", error: { type: anthropicTypes[rendered.status] ?? "api_error", message } }, headers)
}

/**
 * The response of a router-level failure: an unreadable body is the client's mistake (400, or 413
 * when too large); a route that does not exist is a 404.
 *
 * @category rendering
 */
export const fromServerError = (error: HttpServerError.HttpServerError): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  switch (error.reason._tag) {
    case "RequestParseError":
      return error.reason.reason === "BodyTooLarge"
        ? Effect.map(HttpIncomingMessage.MaxBodySize, (limit) => render(bodyTooLarge(limit)))
        : Effect.succeed(render(new Errors.InvalidRequest({ message: "Request body could not be read" })))
    case "RouteNotFound":
      return Effect.succeed(render(new Errors.NotFound({ message: "Not found" })))
    default:
      return fromDefect(error)
  }
}

/**
 * A bug or an unexpected failure: logged with its cause, answered 500 with a body that says nothing
 * about the internals.
 *
 * @category rendering
 */
export const fromDefect = (defect: unknown): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.logError("unhandled failure", Cause.die(defect)).pipe(
    Effect.as(render(new Errors.InferenceFailed({ message: "Internal server error" })))
  )
