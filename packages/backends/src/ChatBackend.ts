/**
 * Chat completions from any OpenAI-compatible upstream (vLLM, llama.cpp server, Ollama, hosted
 * APIs). A text model of the model list names its upstreams; this adapter picks one per call,
 * sends the body as the client wrote it (with the upstream's own model name), and answers either
 * the completion or the stream of chunks of the upstream's Server-Sent Events.
 *
 * Routing: with a `prompt_cache_key`, every upstream is ranked by a hash of (key, upstream)
 * (rendezvous hashing), so one key keeps landing on the same upstream, whose prompt cache is warm,
 * while that upstream is healthy; when it fails only its keys move, and they come back when it
 * recovers. Without a key, calls rotate. An upstream that fails to answer (transport error,
 * timeout, 5xx) is skipped for a cool-down and the next one is tried, as long as nothing has been
 * produced yet; a 429 moves on too; any other 4xx is the request's fault and is returned as is.
 * Health is per process: it is a cache that is safe to lose.
 *
 * A model with no upstreams is served by a local echo model, so the dev server runs offline. It
 * reports usage as an OpenAI-compatible server does (`usage` on a completion; a last chunk with
 * empty `choices` and the `usage` when the request sets `stream_options.include_usage`), counted
 * with the tokenizer the chat route bills with.
 *
 * @since 0.1.0
 */
import { type Models, Spans } from "@tollgate/core"
import * as Tokens from "@tollgate/documents/Tokens"
import { type Array as Arr, Clock, Context, Data, Duration, Effect, Layer, Option, References, Stream } from "effect"
import { HttpTraceContext } from "effect/http"
import * as Undici from "undici"
import * as SseSplitter from "./SseSplitter.ts"
import * as UpstreamHttp from "./UpstreamHttp.ts"

/**
 * A JSON object as the upstream sent it (a completion or one stream chunk).
 *
 * @category models
 */
export type Json = Readonly<Record<string, unknown>>

/**
 * Why an upstream call failed. `status` and `headers` are the upstream's answer when it gave one
 * (`headers` matter for a 429: its rate-limit and retry headers are passed on).
 *
 * @category errors
 */
export class UpstreamError extends Data.TaggedError("ChatUpstreamError")<{
  readonly kind: "status" | "transport" | "timeout" | "decode"
  readonly message: string
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
}> {}

/** @category models */
export interface Call {
  readonly model: Models.TextModel
  /** The OpenAI request body, without `model` (each upstream gets its own model name). */
  readonly body: Json
  /**
   * The JSON bytes of `body.messages`, when the caller has them as they came, in parts written one
   * after the other: sent as they are instead of encoded again (a long conversation is most of a
   * body), copied once, into the request body.
   */
  readonly messages?: ReadonlyArray<Uint8Array> | undefined
  readonly promptCacheKey?: string | undefined
}

/** @category models */
export interface Completion {
  readonly body: Json
  /** The base URL of the upstream that answered, or `local`. */
  readonly upstream: string
}

/**
 * A stream's chunks, read one of two ways (run one of them: both read the same response).
 *
 * @category models
 */
export interface ChunkStream {
  /**
   * The `data:` text of each chunk as the upstream wrote it, in order, up to `[DONE]`, a batch per
   * network read: a relay that changes little in a chunk works on its text and parses only the
   * chunks it must.
   */
  readonly events: Stream.Stream<string, UpstreamError>
  /** The same chunks parsed; a chunk that is not a JSON object fails the stream. */
  readonly chunks: Stream.Stream<Json, UpstreamError>
  readonly upstream: string
}

/** @category services */
export class ChatBackend extends Context.Service<ChatBackend, {
  readonly complete: (call: Call) => Effect.Effect<Completion, UpstreamError>
  /** Connects and checks the status before it returns, so a refusal is known before any byte is sent on. */
  readonly stream: (call: Call) => Effect.Effect<ChunkStream, UpstreamError>
}>()("@tollgate/backends/ChatBackend") {}

/** @category options */
export interface Options {
  /** How long a stream may take to start (its response headers); default 60 s. */
  readonly connectTimeout?: Duration.Input
  /**
   * How long a non-streamed completion may take: upstreams answer it only once the whole reply is
   * generated, which can take minutes; default 10 minutes.
   */
  readonly completionTimeout?: Duration.Input
  /** How long a stream may go without a chunk before it is cut; default 60 s. */
  readonly idleTimeout?: Duration.Input
  /** How long an upstream that failed is skipped. */
  readonly coolDown?: Duration.Input
}

const upstreamId = (upstream: Models.Upstream) => `${upstream.baseUrl}#${upstream.model ?? ""}`

/** FNV-1a, 32 bits: a stable, fast hash for rendezvous ranking (not a security boundary). */
const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/**
 * The order in which to try a model's upstreams: healthy ones first, ranked by the cache key when
 * there is one, rotated otherwise; the ones cooling down last, as a last resort.
 *
 * @category routing
 */
export const order = (
  upstreams: ReadonlyArray<Models.Upstream>,
  options: { readonly promptCacheKey?: string | undefined; readonly rotation: number; readonly isHealthy: (id: string) => boolean }
): ReadonlyArray<Models.Upstream> => {
  const { promptCacheKey } = options
  const ranked = promptCacheKey === undefined
    ? upstreams.map((_, i) => upstreams[(i + options.rotation) % upstreams.length]!)
    : [...upstreams].sort((a, b) => fnv1a(`${promptCacheKey}\u0000${upstreamId(b)}`) - fnv1a(`${promptCacheKey}\u0000${upstreamId(a)}`))
  return [
    ...ranked.filter((upstream) => options.isHealthy(upstreamId(upstream))),
    ...ranked.filter((upstream) => !options.isHealthy(upstreamId(upstream)))
  ]
}

const headersOf = (response: UpstreamHttp.Response): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (typeof value === "string") headers[name] = value
  }
  return headers
}

const isRetryable = (error: UpstreamError) =>
  error.kind === "transport" || error.kind === "timeout" || (error.status !== undefined && (error.status >= 500 || error.status === 429))

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const encoder = new TextEncoder()
const MESSAGES_MEMBER = encoder.encode(`,"messages":`)
const CLOSE_OBJECT = 125

/** `body` encoded with `messages` (JSON bytes, in parts) as its last member, those bytes copied as they are. */
const withMessages = (body: Json, messages: ReadonlyArray<Uint8Array>): Uint8Array => {
  const { messages: _, ...rest } = body
  const head = encoder.encode(JSON.stringify(rest))
  const open = head.length - 1 // without its closing brace; `rest` has `model`, so it is not empty
  let length = open + MESSAGES_MEMBER.length + 1
  for (const part of messages) length += part.length
  const out = new Uint8Array(length)
  out.set(head.subarray(0, open))
  out.set(MESSAGES_MEMBER, open)
  let at = open + MESSAGES_MEMBER.length
  for (const part of messages) {
    out.set(part, at)
    at += part.length
  }
  out[at] = CLOSE_OBJECT
  return out
}

/**
 * The adapter over undici's dispatcher API (`UpstreamHttp`): one keep-alive `Agent` for every
 * upstream, closed with the scope. HTTP/1.1 only: undici 8 would otherwise offer h2 to https
 * upstreams.
 *
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options: Options = {}) {
  const agent = yield* Effect.acquireRelease(
    Effect.sync(() => new Undici.Agent({ allowH2: false })),
    (agent) => Effect.promise(() => agent.close())
  )
  // Spans without a call-site stack, and none with tracing off: `Effect.fn` would capture a stack
  // on every call, which is on the way to a stream's first chunk.
  const traced = yield* Spans.current
  // With tracing on, the upstream request carries the trace of the call's span.
  const traceHeaders: Effect.Effect<Readonly<Record<string, string>>> = (yield* References.TracerEnabled)
    ? Effect.map(Effect.option(Effect.currentSpan), Option.match({ onNone: () => ({}), onSome: HttpTraceContext.toHeaders }))
    : Effect.succeed({})
  const connectTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout ?? "60 seconds"))
  const completionTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.completionTimeout ?? "10 minutes"))
  const idleTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.idleTimeout ?? "60 seconds"))
  const coolDownMs = Duration.toMillis(Duration.fromInputUnsafe(options.coolDown ?? "30 seconds"))
  const unhealthyUntil = new Map<string, number>()
  let rotation = 0

  const send = (upstream: Models.Upstream, call: Call, stream: boolean) => {
    const body = {
      ...call.body,
      model: upstream.model ?? call.model.id,
      ...(stream
        ? {
          stream: true,
          stream_options: { ...(isObject(call.body["stream_options"]) ? call.body["stream_options"] : {}), include_usage: true }
        }
        : {})
    }
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (upstream.apiKey !== undefined) headers["authorization"] = `Bearer ${upstream.apiKey}`
    const request = (trace: Readonly<Record<string, string>>): UpstreamHttp.Request => ({
      url: new URL(`${upstream.baseUrl.replace(/\/+$/, "")}/chat/completions`),
      headers: { ...headers, ...trace },
      body: call.messages === undefined ? JSON.stringify(body) : withMessages(body, call.messages),
      headersTimeoutMs: stream ? connectTimeoutMs : completionTimeoutMs,
      bodyTimeoutMs: idleTimeoutMs
    })
    return Effect.flatMap(traceHeaders, (trace) => UpstreamHttp.post(agent, request(trace))).pipe(
      Effect.mapError((error) =>
        error.kind === "timeout"
          ? new UpstreamError({ kind: "timeout", message: `${upstream.baseUrl} did not answer in time` })
          : new UpstreamError({ kind: "transport", message: `${upstream.baseUrl} is unreachable: ${String(error.cause)}` })
      ),
      Effect.flatMap((response) =>
        response.status >= 200 && response.status < 300 ? Effect.succeed(response) : response.text.pipe(
          Effect.orElseSucceed(() => ""),
          Effect.flatMap((text) =>
            Effect.fail(
              new UpstreamError({
                kind: "status",
                status: response.status,
                headers: headersOf(response),
                message: upstreamMessage(text) ?? `upstream answered ${response.status}`
              })
            )
          )
        )
      )
    )
  }

  const attempt = <A>(call: Call, run: (upstream: Models.Upstream) => Effect.Effect<A, UpstreamError>) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const candidates = order(call.model.upstreams, {
        promptCacheKey: call.promptCacheKey,
        rotation: rotation++,
        isHealthy: (id) => (unhealthyUntil.get(id) ?? 0) <= now
      })
      let last: UpstreamError | undefined
      for (const upstream of candidates) {
        const result = yield* Effect.result(run(upstream))
        if (result._tag === "Success") {
          unhealthyUntil.delete(upstreamId(upstream))
          return result.success
        }
        last = result.failure
        if (!isRetryable(last)) return yield* last
        if (last.status !== 429) unhealthyUntil.set(upstreamId(upstream), now + coolDownMs)
      }
      return yield* (last ?? new UpstreamError({ kind: "transport", message: `model ${call.model.id} has no upstream` }))
    })

  const complete = (call: Call): Effect.Effect<Completion, UpstreamError> => {
    if (call.model.upstreams.length === 0) return Effect.sync(() => ({ body: Local.complete(call), upstream: "local" }))
    return traced(
      "ChatBackend.complete",
      attempt(call, (upstream) =>
        send(upstream, call, false).pipe(
          Effect.flatMap((response) =>
            Effect.flatMap(
              Effect.mapError(response.text, () => new UpstreamError({ kind: "transport", message: "upstream completion broke off" })),
              (text) =>
                Effect.try({
                  try: (): unknown => JSON.parse(text),
                  catch: () => new UpstreamError({ kind: "decode", message: "upstream sent an unreadable completion" })
                })
            )
          ),
          Effect.flatMap((body) =>
            isObject(body)
              ? Effect.succeed({ body, upstream: upstream.baseUrl })
              : Effect.fail(new UpstreamError({ kind: "decode", message: "upstream sent a completion that is not an object" }))
          )
        ))
    )
  }

  const stream = (call: Call): Effect.Effect<ChunkStream, UpstreamError> => {
    if (call.model.upstreams.length === 0) {
      return Effect.sync(() => chunkStream(Stream.fromIterable(Local.chunks(call).map((chunk) => JSON.stringify(chunk))), "local"))
    }
    return traced(
      "ChatBackend.stream",
      attempt(
        call,
        (upstream) => Effect.map(send(upstream, call, true), (response) => chunkStream(sseEvents(response), upstream.baseUrl))
      )
    )
  }

  return ChatBackend.of({ complete, stream })
})

const upstreamMessage = (text: string): string | undefined => {
  try {
    const body: unknown = JSON.parse(text)
    if (isObject(body)) {
      const error = body["error"]
      if (typeof error === "string") return error
      if (isObject(error) && typeof error["message"] === "string") return error["message"]
      if (typeof body["message"] === "string") return body["message"]
    }
  } catch {
    return text.length > 0 && text.length <= 500 ? text : undefined
  }
  return undefined
}

const parseChunk = (data: string): Json | undefined => {
  try {
    const chunk: unknown = JSON.parse(data)
    return isObject(chunk) ? chunk : undefined
  } catch {
    return undefined
  }
}

const chunkStream = (events: Stream.Stream<string, UpstreamError>, upstream: string): ChunkStream => ({
  events,
  chunks: Stream.mapArrayEffect(events, (batch) => {
    const chunks: Array<Json> = []
    for (const data of batch) {
      const chunk = parseChunk(data)
      if (chunk === undefined)
        return Effect.fail(new UpstreamError({ kind: "decode", message: "upstream sent an unreadable stream chunk" }))
      chunks.push(chunk)
    }
    // one chunk per event of a batch, which is never empty
    return Effect.succeed(chunks as unknown as Arr.NonEmptyReadonlyArray<Json>)
  }),
  upstream
})

/**
 * The data of the upstream's events, a batch per network read. An upstream that goes quiet for the
 * idle timeout is cut off (`UpstreamHttp.Request.bodyTimeoutMs`), so a stalled stream neither
 * holds the client nor its credit hold forever.
 */
const sseEvents = (response: UpstreamHttp.Response): Stream.Stream<string, UpstreamError> =>
  response.body.pipe(
    Stream.mapError((error) =>
      error.kind === "timeout"
        ? new UpstreamError({ kind: "timeout", message: "upstream stream went quiet" })
        : new UpstreamError({ kind: "transport", message: "upstream stream broke off" })
    ),
    SseSplitter.data
  )

/**
 * The offline model: answers with the last user message, word by word; a model that supports
 * thinking thinks first, in a think-tag block, so the dev server shows the stripping options.
 */
const Local = {
  reply: (call: Call): string => {
    const last = [...Local.messages(call)].reverse().find((message) => message["role"] === "user")
    const said = Tokens.contentText(last?.["content"]).replaceAll("\n", " ")
    return `${call.model.supportsThinking ? "<think>The user wants an echo.</think>\n\n" : ""}You said: ${said}`
  },
  messages: (call: Call): ReadonlyArray<Json> =>
    Array.isArray(call.body["messages"]) ? (call.body["messages"] as Array<unknown>).filter(isObject) : [],
  usage: (call: Call, reply: string): Json => {
    const prompt = Tokens.conversation(Local.messages(call))
    const completion = Tokens.count(reply)
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
  },
  complete: (call: Call): Json => {
    const reply = Local.reply(call)
    return {
      id: `chatcmpl-local-${crypto.randomUUID()}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: call.model.id,
      choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop" }],
      usage: Local.usage(call, reply)
    }
  },
  chunks: (call: Call): Array<Json> => {
    const id = `chatcmpl-local-${crypto.randomUUID()}`
    const created = Math.floor(Date.now() / 1000)
    const chunk = (choices: ReadonlyArray<Json>, usage?: Json): Json => ({
      id,
      object: "chat.completion.chunk",
      created,
      model: call.model.id,
      choices,
      ...(usage === undefined ? {} : { usage })
    })
    const delta = (content: Json, finish: string | null): Json => ({ index: 0, delta: content, finish_reason: finish })
    const reply = Local.reply(call)
    const words = reply.split(/(?<= )/)
    const options = call.body["stream_options"]
    const withUsage = isObject(options) && options["include_usage"] === true
    return [
      chunk([delta({ role: "assistant", content: "" }, null)]),
      ...words.map((word) => chunk([delta({ content: word }, null)])),
      chunk([delta({}, "stop")]),
      ...(withUsage ? [chunk([], Local.usage(call, reply))] : [])
    ]
  }
}

/**
 * The adapter as a layer (`make`): its `Agent` is closed with the layer.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<ChatBackend> => Layer.effect(ChatBackend, make(options))
