/**
 * One call to an OpenAI-compatible upstream (`/images/generations`, `/embeddings`, `/audio/speech`,
 * `/audio/transcriptions`, `/videos`), tried on each configured upstream in turn. What an
 * upstream's failure means to the client is decided here once: a refusal of the request itself
 * (4xx) is the client's 400 and is not retried elsewhere; a transport failure, a 5xx, or an
 * unreadable body moves on to the next upstream, and when none is left becomes a 502 (504 when the
 * last one timed out).
 *
 * @since 0.1.0
 */
import { Errors, type Models } from "@tollgate/core"
import { type Duration, Effect } from "effect"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "effect/http"

/** @category options */
export interface Options {
  /** Per attempt, body included. */
  readonly timeout: Duration.Input
}

/**
 * The JSON body of the upstream's error, when it sent one in the OpenAI shape.
 *
 * @category models
 */
export interface UpstreamRefusal {
  readonly status: number
  readonly code: string | undefined
  readonly message: string
}

const refusalOf = (status: number, body: unknown): UpstreamRefusal => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  const fields = typeof error === "object" && error !== null ? error as Record<string, unknown> : {}
  return {
    status,
    code: typeof fields.code === "string" ? fields.code : undefined,
    message: typeof fields.message === "string" ? fields.message : typeof error === "string" ? error : `HTTP ${status}`
  }
}

type Attempt<A> =
  | { readonly _tag: "Ok"; readonly value: A; readonly upstream: Models.Upstream }
  | { readonly _tag: "Refused"; readonly refusal: UpstreamRefusal }
  | { readonly _tag: "Failed"; readonly timedOut: boolean; readonly reason: string }

/**
 * What `call` sends and how it reads a 2xx answer. `read` returns `undefined` for a body it cannot
 * use (the next upstream is tried); `timeout` covers `read` too, so a reader that only takes the
 * response (a stream passed on) bounds the wait for the headers.
 *
 * @category models
 */
export interface Exchange<A> extends Options {
  readonly request: (upstream: Models.Upstream, url: (path: string) => string) => HttpClientRequest.HttpClientRequest
  readonly read: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A | undefined>
  readonly onRefusal: (refusal: UpstreamRefusal) => Errors.ApiError
}

/**
 * Runs one exchange on each upstream in turn until one answers 2xx with something `read` accepts.
 * The request carries the upstream's bearer key.
 *
 * @category calls
 */
export const call = Effect.fn("OpenAiCompatible.call")(function*<A>(
  upstreams: ReadonlyArray<Models.Upstream>,
  exchange: Exchange<A>
) {
  const client = yield* HttpClient.HttpClient
  let last: Attempt<A> = { _tag: "Failed", timedOut: false, reason: "no upstream is configured" }
  for (const upstream of upstreams) {
    const base = upstream.baseUrl.replace(/\/+$/u, "")
    const request = exchange.request(upstream, (path) => `${base}${path}`).pipe(
      upstream.apiKey === undefined ? (r) => r : HttpClientRequest.bearerToken(upstream.apiKey)
    )
    last = yield* client.execute(request).pipe(
      Effect.flatMap((response): Effect.Effect<Attempt<A>> =>
        response.status >= 200 && response.status < 300
          ? Effect.map(exchange.read(response), (value): Attempt<A> =>
            value === undefined
              ? { _tag: "Failed", timedOut: false, reason: "the upstream answered with a body that cannot be read" }
              : { _tag: "Ok", value, upstream })
          : Effect.map(Effect.orElseSucceed(response.json, () => undefined), (json): Attempt<A> =>
            response.status >= 400 && response.status < 500 && response.status !== 429
              ? { _tag: "Refused", refusal: refusalOf(response.status, json) }
              : { _tag: "Failed", timedOut: false, reason: `the upstream answered HTTP ${response.status}` })
      ),
      Effect.timeoutOrElse({
        duration: exchange.timeout,
        orElse: () => Effect.succeed<Attempt<A>>({ _tag: "Failed", timedOut: true, reason: "the upstream timed out" })
      }),
      Effect.catch((error) => Effect.succeed<Attempt<A>>({ _tag: "Failed", timedOut: false, reason: error.message }))
    )
    if (last._tag !== "Failed") break
    yield* Effect.logWarning("upstream failed", { url: upstream.baseUrl, reason: last.reason })
  }
  switch (last._tag) {
    case "Ok":
      return { value: last.value, upstream: last.upstream }
    case "Refused":
      return yield* Effect.fail(exchange.onRefusal(last.refusal))
    case "Failed":
      return yield* Effect.fail(
        last.timedOut
          ? new Errors.GatewayTimeout({ message: "The upstream did not answer in time" })
          : new Errors.BadGateway({ message: "The upstream failed to answer" })
      )
  }
})

/**
 * POSTs `body` (with `model` set to the upstream's name of the model) to `path` of each upstream
 * until one answers 2xx with JSON. `onRefusal` turns a 4xx into the client's error.
 *
 * @category calls
 */
export const postJson = (
  upstreams: ReadonlyArray<Models.Upstream>,
  path: string,
  modelId: string,
  body: Readonly<Record<string, unknown>>,
  options: Options & { readonly onRefusal: (refusal: UpstreamRefusal) => Errors.ApiError }
): Effect.Effect<unknown, Errors.ApiError, HttpClient.HttpClient> =>
  Effect.map(
    call(upstreams, {
      ...options,
      request: (upstream, url) =>
        HttpClientRequest.post(url(path)).pipe(HttpClientRequest.bodyJsonUnsafe({ ...body, model: upstream.model ?? modelId })),
      read: (response) => Effect.orElseSucceed(response.json, () => undefined)
    }),
    (answer) => answer.value
  )
