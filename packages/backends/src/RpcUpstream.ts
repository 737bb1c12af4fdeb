/**
 * The nodes behind the RPC proxy: for each network slug, one or more JSON-RPC HTTP upstreams from
 * the config file (`{"rpc": {"upstreams": {"<slug>": ["http://..."]}}}`). A call goes to the first
 * upstream; when a connection cannot be made it fails over to the next, and a batch of reads is
 * also retried after a connection that broke mid-call (a write is retried only when its connection
 * was refused, so it was never sent). The answer comes back with the request's order restored and
 * every "method not found" dialect (-32004, -32001, "not supported", HTTP 405/415) turned into
 * -32601, its `message` kept. Nothing else is changed: a batch is reordered on the raw text of its
 * items (never through JS numbers, so an id or a result of `12345678901234567890` survives), and
 * only an item whose code is rewritten is encoded again. An upstream that cannot be reached is a
 * 502, one that does not answer in time a 504.
 *
 * The upstreams are reached through undici's dispatcher API (one keep-alive `Agent`, a handler that
 * collects the reply's bytes) rather than `node:http`'s client or undici's `request` with its body
 * stream: measured on the reference server (`eth_blockNumber` through the RPC route, memory stores,
 * 50 connections, 10 s, three runs each alternated on one machine), server CPU per request went
 * from 348 us (node:http) to 277 us (undici `request`) to 229 us (undici `dispatch`), and
 * throughput from about 31,900 to 46,900 answers per 10 s.
 *
 * @since 0.1.0
 */
import { Errors, JsonRpc } from "@tollgate/core"
import * as JsonText from "@tollgate/core/JsonText"
import { Context, Effect, Layer, Schema } from "effect"
import * as Undici from "undici"

/**
 * The `rpc` section of the config file.
 *
 * @category schemas
 */
export const Config = Schema.Struct({
  upstreams: Schema.Record(
    Schema.String,
    Schema.Array(Schema.String.check(Schema.isPattern(/^https?:\/\/.+/u, { message: "must be an http:// or https:// URL" })))
      .check(Schema.isMinLength(1))
  ),
  /** Per attempt; default 30 s. */
  timeoutMs: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** Attempts per call across the upstreams of a slug; default: each upstream once, at least 2. */
  attempts: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0)))
})

/** @category models */
export type Config = typeof Config.Type

/**
 * What the upstream answered: the JSON-RPC response as `JsonRpc.parse` read it, for billing
 * (absent when the request held notifications only), and the bytes for the caller: the upstream's
 * own when nothing changed, else in request order with "method not found" codes as -32601.
 *
 * @category models
 */
export interface Answer {
  readonly response: unknown
  readonly body: Uint8Array | undefined
}

/** @category services */
export class RpcUpstream extends Context.Service<RpcUpstream, {
  /** Whether the slug has an upstream in this deployment. */
  readonly serves: (network: string) => boolean
  readonly forward: (
    network: string,
    request: JsonRpc.Request,
    body: Uint8Array
  ) => Effect.Effect<Answer, Errors.BadGateway | Errors.GatewayTimeout | Errors.ServiceUnavailable>
}>()("@tollgate/backends/RpcUpstream") {}

const WRITES = new Set([
  "eth_sendRawTransaction", "eth_sendRawTransactionSync", "eth_sendUserOperation",
  "zks_sendRawTransactionWithDetailedOutput", "sendTransaction", "requestAirdrop",
  "starknet_addInvokeTransaction", "starknet_addDeclareTransaction", "starknet_addDeployAccountTransaction"
])

const NOT_FOUND_CODES = new Set([-32601, -32004, -32001])
const NOT_FOUND_TEXT = /not supported|method not found|does not exist|not available|not whitelisted|not included in your current plan/i

/** Why an attempt failed: `refused` was never sent; `broken` may have been. */
type Failure =
  | { readonly _tag: "refused" | "broken"; readonly detail: string }
  | { readonly _tag: "timeout" }
  | { readonly _tag: "status"; readonly status: number; readonly body: Buffer }

interface Reply {
  readonly status: number
  readonly body: Buffer
}

/**
 * One undici `Agent` for every upstream: a keep-alive pool of HTTP/1.1 connections per origin.
 *
 * - `headersTimeout`/`bodyTimeout` are off: the per-attempt timer of `post` is the only deadline, so
 *   a configured `timeoutMs` above undici's 300 s defaults still holds.
 * - `allowH2: false` keeps https upstreams on HTTP/1.1 as before (undici 8 would otherwise offer h2
 *   by ALPN, whose GOAWAY handling requeues streams).
 * - No retry of a POST by undici: retries only come from `RetryAgent` or the `retry` interceptor,
 *   neither used here. A request's `idempotent` flag defaults to true only for GET/HEAD/QUERY
 *   (undici `lib/core/request.js`), so a POST is never pipelined behind another request
 *   (`client-h1.js` `busy`). When a keep-alive socket closes, only the request that was written
 *   is failed (`onHttpSocketClose`: "Fail head of pipeline"); requests still queued were never
 *   written and go out on the next connection. Checked in undici 8.12.
 */
const agent = new Undici.Agent({
  connections: 256,
  allowH2: false,
  headersTimeout: 0,
  bodyTimeout: 0
})

/**
 * Error codes meaning the request never left: the connection was refused, the name did not
 * resolve, the host or network was unreachable, or the connection was not made within undici's
 * connect timeout (10 s; a shorter `timeoutMs` fires first and is a timeout).
 */
const REFUSED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"])

/** Where one upstream URL is sent: its origin and path, and the basic credentials of its userinfo. */
interface Target {
  readonly origin: string
  readonly path: string
  readonly authorization: string | undefined
}

const toTarget = (url: URL): Target => ({
  origin: url.origin,
  path: url.pathname + url.search,
  // As node:http did for `http://user:pass@host/`: undici ignores userinfo in an origin.
  authorization: url.username === "" && url.password === "" ? undefined : `Basic ${
    Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")
  }`
})

const describeError = (error: unknown): { readonly code: string | undefined; readonly detail: string } => {
  const { code, message } = error as { readonly code?: unknown; readonly message?: unknown }
  const text = typeof message === "string" ? message : String(error)
  if (typeof code !== "string") return { code: undefined, detail: text }
  // undici's own codes say little ("UND_ERR_SOCKET"); its message says what happened ("other side closed").
  return { code, detail: code.startsWith("UND_ERR_") ? text : code }
}

/** The reason given to undici when a call is abandoned (timeout or interruption); never surfaced. */
const ABANDONED = new Error("abandoned by tollgate")

/**
 * One POST: the reply, or why there is none. Succeeds with the failure rather than failing, since a
 * failed attempt is an input to the retry decision, not an error yet. Interruption (the client went
 * away) and the timeout abort the request (before it is written, if it is still queued for a
 * connection); undici then closes the connection, so a half-read reply never goes back to the pool.
 */
const post = (target: Target, body: Uint8Array, timeoutMs: number) =>
  Effect.callback<Reply | Failure>((resume) => {
    let settled = false
    let started: Undici.Dispatcher.DispatchController | undefined
    let status = 0
    const chunks: Array<Buffer> = []
    const done = (outcome: Reply | Failure) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(Effect.succeed(outcome))
    }
    const abandon = () => {
      settled = true
      clearTimeout(timer)
      started?.abort(ABANDONED)
    }
    const timer = setTimeout(() => {
      done({ _tag: "timeout" })
      abandon()
    }, timeoutMs)
    agent.dispatch({
      origin: target.origin,
      path: target.path,
      method: "POST",
      headers: target.authorization === undefined
        ? { "content-type": "application/json", "content-length": String(body.byteLength), accept: "application/json" }
        : {
          "content-type": "application/json",
          "content-length": String(body.byteLength),
          accept: "application/json",
          authorization: target.authorization
        },
      body
    }, {
      onRequestStart: (controller) => {
        if (settled) controller.abort(ABANDONED)
        else started = controller
      },
      onResponseStart: (_controller, statusCode) => {
        status = statusCode
      },
      onResponseData: (_controller, chunk) => {
        chunks.push(chunk)
      },
      onResponseEnd: () => done({ status, body: Buffer.concat(chunks) }),
      onResponseError: (_controller, error) => {
        const { code, detail } = describeError(error)
        done({ _tag: code !== undefined && REFUSED.has(code) ? "refused" : "broken", detail })
      }
    })
    return Effect.sync(abandon)
  })

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Whether an answer is a "method not found" in another dialect, to be rewritten to -32601. */
const isOtherNotFound = (answer: unknown): boolean => {
  if (!isRecord(answer) || !isRecord(answer["error"])) return false
  const { code, message } = answer["error"]
  if (code === -32601) return false
  return (typeof code === "number" && NOT_FOUND_CODES.has(code)) || (typeof message === "string" && NOT_FOUND_TEXT.test(message))
}

/** The answer's text with the code -32601, everything else (the message, big numbers) as it was. */
const asNotFound = (text: string): string => {
  const answer = JsonText.parse(text) as Record<string, unknown>
  return JSON.stringify({ ...answer, error: { ...(answer["error"] as Record<string, unknown>), code: -32601 } })
}

/** The answers a node that refuses the method at the HTTP level (405, 415) would have sent. */
const methodNotFound = (request: JsonRpc.Request, status: number): Answer => {
  const answers = request.items.flatMap((item) =>
    item.id === undefined ? [] : [
      `{"jsonrpc":"2.0","id":${item.id},"error":{"code":-32601,"message":${
        JSON.stringify(`Method ${item.method} is not supported by the upstream (HTTP ${status})`)
      }}}`
    ]
  )
  const text = request.batch ? `[${answers.join(",")}]` : answers[0]
  if (text === undefined) return { response: [], body: undefined }
  return { response: JsonRpc.parse(text), body: Buffer.from(text) }
}

/**
 * For each position of the reply, the index of the answer to put there: the answers to the
 * request's ids in request order, then the answers that match no id (an error with a null id, an
 * id the node changed) in the order they came.
 *
 * @category internals
 */
export const requestOrder = (request: JsonRpc.Request, answers: ReadonlyArray<unknown>): ReadonlyArray<number> => {
  const byId = new Map<string, Array<number>>()
  answers.forEach((answer, index) => {
    const id = isRecord(answer) ? JsonRpc.idText(answer["id"]) : undefined
    if (id === undefined || id === "null") return
    const queue = byId.get(id)
    if (queue === undefined) byId.set(id, [index])
    else queue.push(index)
  })
  const placed = new Set<number>()
  const order: Array<number> = []
  for (const item of request.items) {
    if (item.id === undefined || item.id === "null") continue
    const index = byId.get(item.id)?.shift()
    if (index !== undefined) {
      order.push(index)
      placed.add(index)
    }
  }
  answers.forEach((_answer, index) => {
    if (!placed.has(index)) order.push(index)
  })
  return order
}

/**
 * The JSON-RPC response of an upstream reply, or why it is not one.
 *
 * @category internals
 */
export const interpret = (request: JsonRpc.Request, reply: Reply): Answer | Failure => {
  if (reply.status === 405 || reply.status === 415) return methodNotFound(request, reply.status)
  const text = reply.body.toString("utf8")
  const empty = text.trim() === ""
  if (empty && (reply.status === 200 || reply.status === 204) && request.items.every((item) => item.id === undefined)) {
    return { response: undefined, body: undefined }
  }
  let parsed: unknown
  try {
    parsed = JsonRpc.parse(text)
  } catch {
    return { _tag: "status", status: reply.status, body: reply.body }
  }
  const looksLikeJsonRpc = Array.isArray(parsed) || (isRecord(parsed) && ("result" in parsed || "error" in parsed))
  if (!looksLikeJsonRpc) return { _tag: "status", status: reply.status, body: reply.body }
  if (!Array.isArray(parsed)) {
    return { response: parsed, body: isOtherNotFound(parsed) ? Buffer.from(asNotFound(text)) : reply.body }
  }
  const order = requestOrder(request, parsed)
  const rewrite = parsed.map(isOtherNotFound)
  if (order.every((index, position) => index === position) && !rewrite.includes(true)) {
    return { response: parsed, body: reply.body }
  }
  const raw = JsonText.elements(text)
  const items = order.map((index) => rewrite[index] === true ? asNotFound(raw[index]!) : raw[index]!)
  return { response: parsed, body: Buffer.from(`[${items.join(",")}]`) }
}

/**
 * What a caller is told of a failure: the same words for the same kind of failure, never the
 * driver's error code or text (`ECONNREFUSED`, undici's messages), which name internals and change
 * with the runtime; `describeFailure` goes to the log.
 */
const callerMessage = (network: string, failure: Exclude<Failure, { readonly _tag: "timeout" }>): string => {
  switch (failure._tag) {
    case "refused":
      return `The ${network} upstream could not be reached`
    case "broken":
      return `The ${network} upstream broke off its answer`
    case "status":
      return `The ${network} upstream answered HTTP ${failure.status}`
  }
}

const describeFailure = (failure: Failure): string => {
  switch (failure._tag) {
    case "refused":
    case "broken":
      return failure.detail
    case "timeout":
      return "timeout"
    case "status":
      return `HTTP ${failure.status}`
  }
}

/**
 * An upstream service over the config's URLs.
 *
 * @category constructors
 */
export const make = (config: Config) => {
  const timeoutMs = config.timeoutMs ?? 30_000
  const upstreams = new Map(Object.entries(config.upstreams).map(([slug, urls]) => [slug, urls.map((url) => toTarget(new URL(url)))]))
  return RpcUpstream.of({
    serves: (network) => (upstreams.get(network)?.length ?? 0) > 0,
    // Untraced, and the attempts chained by hand rather than by a generator: every paid RPC call
    // runs this, inside the metered pipeline's `tollgate.backend` span.
    forward: (network: string, request: JsonRpc.Request, body: Uint8Array) => {
      const urls = upstreams.get(network) ?? []
      if (urls.length === 0) {
        return Effect.fail(new Errors.ServiceUnavailable({ message: `No upstream is configured for ${network}: add its node URLs under rpc.upstreams.${network} in the TOLLGATE_CONFIG file` }))
      }
      const readOnly = request.items.every((item) => !WRITES.has(item.method))
      const attempts = config.attempts ?? Math.max(urls.length, 2)
      const failed = (last: Failure): Effect.Effect<never, Errors.BadGateway | Errors.GatewayTimeout> =>
        last._tag === "timeout"
          ? Effect.fail(new Errors.GatewayTimeout({ message: `The ${network} upstream did not answer within ${timeoutMs} ms` }))
          : Effect.andThen(
            Effect.logWarning("RPC upstream failed", { network, cause: describeFailure(last) }),
            Effect.fail(new Errors.BadGateway({ message: callerMessage(network, last) }))
          )
      const attempt = (n: number): Effect.Effect<Answer, Errors.BadGateway | Errors.GatewayTimeout> =>
        Effect.flatMap(post(urls[n % urls.length]!, body, timeoutMs), (sent) => {
          const outcome = "_tag" in sent ? sent : interpret(request, sent)
          if (!("_tag" in outcome)) return Effect.succeed(outcome)
          const retry = outcome._tag === "refused" ||
            (readOnly && (outcome._tag === "broken" || (outcome._tag === "status" && outcome.status >= 500)))
          return retry && n + 1 < attempts ? attempt(n + 1) : failed(outcome)
        })
      return attempt(0)
    }
  })
}

/**
 * The service from a decoded `rpc` config section.
 *
 * @category layers
 */
export const layer = (config: Config): Layer.Layer<RpcUpstream> => Layer.succeed(RpcUpstream, make(config))

/**
 * The service from the raw `rpc` section of the config file; a bad section fails with the field
 * and the rule it broke.
 *
 * @category layers
 */
export const layerFromUnknown = (section: unknown): Layer.Layer<RpcUpstream, Schema.SchemaError> =>
  Layer.effect(RpcUpstream, Effect.map(Schema.decodeUnknownEffect(Config)(section ?? { upstreams: {} }), make))
