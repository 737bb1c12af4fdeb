/**
 * The nodes behind the RPC proxy: for each network slug, one or more JSON-RPC HTTP upstreams from
 * the config file (`{"rpc": {"upstreams": {"<slug>": ["http://..."]}}}`). A call tries the
 * upstreams best first and fails over; the answer comes back as the node wrote it, in the request's
 * order, with only "method not found" normalized. An upstream that cannot be reached is a 502, one
 * that does not answer in time a 504.
 *
 * **Details**
 *
 * Each EVM upstream's chain id is checked when the service starts (another chain fails it), and its
 * head and finalized block are polled. The order is `RpcHealth`'s (a read skips an upstream lagging
 * behind the others, the rest are ranked by latency and failures), and a read not answered after
 * the hedge delay is also sent to the next one (`RpcHedge`). When a connection cannot be made the
 * call fails over to the next upstream, and a batch of reads is also retried after a connection
 * that broke mid-call (a write is retried only when its connection was refused, so it was never
 * sent, and is never hedged). Every "method not found" dialect (-32004, -32001, "not supported",
 * HTTP 405/415) becomes -32601, its `message` kept. Nothing else is changed: a batch is reordered
 * on the raw text of its items (never through JS numbers, so an id or a result of
 * `12345678901234567890` survives), and only an item whose code is rewritten is encoded again.
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
import { Errors, JsonRpc, Networks } from "@tollgate/core"
import * as JsonText from "@tollgate/core/JsonText"
import * as RpcCache from "@tollgate/core/RpcCache"
import { Context, Data, Effect, Layer, Schedule, Schema, type Scope } from "effect"
import * as Undici from "undici"
import * as RpcHealth from "./RpcHealth.ts"
import * as RpcHedge from "./RpcHedge.ts"
import * as RpcMetrics from "./RpcMetrics.ts"

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
  attempts: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** Blocks an upstream may be behind the best head before reads skip it; default 5. */
  maxLagBlocks: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  /** How often each EVM upstream's head and finalized block are read; default 2000 ms, 0: never. */
  headPollMs: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Per network slug: the finalized block as this many blocks below the head, instead of the `finalized` tag. */
  finalityDepth: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))),
  /** When a read is also sent to a second upstream: after this many ms, after the first's p90 (default), or never. */
  hedgeAfterMs: Schema.optionalKey(Schema.Union([Schema.Int.check(Schema.isGreaterThan(0)), Schema.Literals(["p90", "off"])])),
  /** `eth_getLogs` over more than `maxRange` blocks is split into parts of `maxRange`, at most `maxParts` (default 10). */
  getLogs: Schema.optionalKey(Schema.Struct({
    maxRange: Schema.Int.check(Schema.isGreaterThan(0)),
    maxParts: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0)))
  })),
  cache: Schema.optionalKey(RpcCache.Config)
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
  /** What the network's upstreams last reported of its head and finality; `undefined` before any did. */
  readonly chainState: (network: string) => RpcHealth.ChainState | undefined
  /** How `eth_getLogs` is split (`rpc.getLogs`), when it is. */
  readonly getLogs: { readonly maxRange: number; readonly maxParts: number } | undefined
}>()("@tollgate/backends/RpcUpstream") {}

/**
 * An upstream that answers `eth_chainId` with another chain than its network's: the server does
 * not start.
 *
 * @category errors
 */
export class ChainMismatch extends Data.TaggedError("RpcChainMismatch")<{ readonly network: string; readonly message: string }> {}

/**
 * Whether a method sends something (a transaction, an airdrop): such a call is never sent twice,
 * never hedged, never merged and never cached.
 *
 * @category models
 */
export const isWrite = (method: string): boolean => WRITES.has(method)

const WRITES = new Set([
  "eth_sendRawTransaction",
  "eth_sendRawTransactionSync",
  "eth_sendUserOperation",
  "zks_sendRawTransactionWithDetailedOutput",
  "sendTransaction",
  "requestAirdrop",
  "starknet_addInvokeTransaction",
  "starknet_addDeclareTransaction",
  "starknet_addDeployAccountTransaction"
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
  authorization: url.username === "" && url.password === "" ?
    undefined :
    `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`
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
  const byId = JsonRpc.answerIndexes(answers)
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

/** One configured upstream: where it is sent, and what is known of it. */
interface Node extends RpcHealth.Upstream {
  readonly target: Target
}

/** A failure of the node itself, as the health score counts it (a JSON-RPC error answer is not). */
const isFailure = (sent: Reply | Failure): boolean => "_tag" in sent || sent.status >= 500

/**
 * One timed exchange with an upstream; its latency and failure go to the upstream's health and
 * to the metrics. An exchange abandoned for a hedge that won counts its time so far.
 */
const exchange = (network: string, node: Node, body: Uint8Array, timeoutMs: number) =>
  Effect.withFiber((fiber) => {
    const started = performance.now()
    return post(node.target, body, timeoutMs).pipe(
      Effect.map((sent) => {
        const latencyMs = performance.now() - started
        const failed = isFailure(sent)
        RpcHealth.record(node, latencyMs, failed)
        RpcMetrics.recordExchange(fiber.context, network, node.label, latencyMs, failed)
        return sent
      }),
      Effect.onInterrupt(() => Effect.sync(() => RpcHealth.record(node, performance.now() - started, false)))
    )
  })

/** The hex quantity of a JSON-RPC result, or `undefined`. */
const quantity = (value: unknown): number | undefined =>
  typeof value === "string" && /^0x[0-9a-f]+$/iu.test(value) ? Number.parseInt(value, 16) : undefined

/** The probe sent to an EVM upstream: its head, its finalized block, and its chain id until confirmed. */
const probe = (withChainId: boolean) =>
  Buffer.from(JSON.stringify([
    { jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["latest", false] },
    { jsonrpc: "2.0", id: 2, method: "eth_getBlockByNumber", params: ["finalized", false] },
    ...(withChainId ? [{ jsonrpc: "2.0", id: 3, method: "eth_chainId", params: [] }] : [])
  ]))

/** The results of a probe's answer by id; empty when it was not a batch answer. */
const probeResults = (sent: Reply | Failure): Map<unknown, unknown> => {
  if ("_tag" in sent || sent.status !== 200) return new Map()
  try {
    const parsed: unknown = JSON.parse(sent.body.toString("utf8"))
    if (!Array.isArray(parsed)) return new Map()
    return new Map(parsed.filter(isRecord).filter((item) => "result" in item).map((item) => [item["id"], item["result"]]))
  } catch {
    return new Map()
  }
}

/**
 * An upstream service over the config's URLs: the chain id of every EVM upstream checked once
 * (a mismatch fails with `ChainMismatch`; an upstream that does not answer is checked again by
 * each poll until it does), then each upstream's head and finalized block read every `headPollMs`
 * for as long as the scope lives.
 *
 * @category constructors
 */
export const make = (config: Config): Effect.Effect<RpcUpstream["Service"], ChainMismatch, Scope.Scope> =>
  Effect.gen(function*() {
    const timeoutMs = config.timeoutMs ?? 30_000
    const maxLagBlocks = config.maxLagBlocks ?? 5
    const headPollMs = config.headPollMs ?? 2000
    const nodes = new Map(
      Object.entries(config.upstreams).map(([slug, urls]) => [
        slug,
        urls.map((url): Node => ({ ...RpcHealth.make(url), target: toTarget(new URL(url)) }))
      ])
    )

    const poll = (network: string, chainId: number, node: Node, probeTimeoutMs: number) =>
      Effect.withFiber((fiber) =>
        Effect.flatMap(exchange(network, node, probe(node.chainConfirmed !== true), probeTimeoutMs), (sent) => {
          const results = probeResults(sent)
          const reported = quantity(results.get(3))
          if (reported !== undefined) node.chainConfirmed = reported === chainId
          if (node.chainConfirmed === false) {
            return Effect.fail(
              new ChainMismatch({ network, message: `${node.label} reports chain id ${reported}, not ${chainId} (${network})` })
            )
          }
          const latest = results.get(1)
          if (isRecord(latest)) {
            node.head = quantity(latest["number"])
            node.headHash = typeof latest["hash"] === "string" ? latest["hash"] : undefined
            const depth = config.finalityDepth?.[network]
            const finalized = results.get(2)
            node.finalized = depth !== undefined && node.head !== undefined
              ? Math.max(0, node.head - depth)
              : isRecord(finalized)
              ? quantity(finalized["number"])
              : undefined
          }
          const all = nodes.get(network) ?? []
          const best = RpcHealth.bestHead(all)
          for (const each of all) {
            if (best !== undefined && each.head !== undefined) {
              RpcMetrics.headLag.of(network, each.label).updateUnsafe(best - each.head, fiber.context)
            }
          }
          return Effect.void
        })
      )

    const evm = [...nodes].flatMap(([network, list]) => {
      const chainId = Networks.findNetwork(network)?.chainId
      return chainId === undefined ? [] : list.map((node) => ({ network, chainId, node }))
    })
    yield* Effect.forEach(evm, ({ chainId, network, node }) => poll(network, chainId, node, Math.min(timeoutMs, 5000)), {
      concurrency: "unbounded",
      discard: true
    })
    if (headPollMs > 0) {
      yield* Effect.forEach(evm, ({ chainId, network, node }) =>
        poll(network, chainId, node, Math.min(timeoutMs, headPollMs * 5)).pipe(
          Effect.catchTag(
            "RpcChainMismatch",
            (mismatch) => Effect.logError("RPC upstream on another chain; it is no longer used", { cause: mismatch.message })
          ),
          Effect.repeat(Schedule.spaced(headPollMs)),
          Effect.delay(headPollMs),
          Effect.forkScoped
        ), { discard: true })
    }

    const hedgeDelay = (node: Node): number | undefined => {
      const setting = config.hedgeAfterMs ?? "p90"
      if (setting === "off") return undefined
      if (typeof setting === "number") return setting
      const p90 = RpcHealth.p90(node)
      return p90 === undefined ? undefined : Math.max(1, Math.ceil(p90))
    }

    return RpcUpstream.of({
      serves: (network) => (nodes.get(network)?.length ?? 0) > 0,
      getLogs: config.getLogs === undefined ? undefined : { maxRange: config.getLogs.maxRange, maxParts: config.getLogs.maxParts ?? 10 },
      chainState: (network) => {
        const list = nodes.get(network)
        return list === undefined ? undefined : RpcHealth.chainState(list)
      },
      // Untraced, and the attempts chained by hand rather than by a generator: every paid RPC call
      // runs this, inside the metered pipeline's `tollgate.backend` span.
      forward: (network: string, request: JsonRpc.Request, body: Uint8Array) => {
        const all = nodes.get(network) ?? []
        if (all.length === 0) {
          return Effect.fail(
            new Errors.ServiceUnavailable({
              message:
                `No upstream is configured for ${network}: add its node URLs under rpc.upstreams.${network} in the TOLLGATE_CONFIG file`
            })
          )
        }
        const readOnly = request.items.every((item) => !WRITES.has(item.method))
        const ordered = RpcHealth.order(all, readOnly, maxLagBlocks)
        const attempts = config.attempts ?? Math.max(all.length, 2)
        const failed = (last: Failure): Effect.Effect<never, Errors.BadGateway | Errors.GatewayTimeout> =>
          last._tag === "timeout"
            ? Effect.fail(new Errors.GatewayTimeout({ message: `The ${network} upstream did not answer within ${timeoutMs} ms` }))
            : Effect.andThen(
              Effect.logWarning("RPC upstream failed", { network, cause: describeFailure(last) }),
              Effect.fail(new Errors.BadGateway({ message: callerMessage(network, last) }))
            )
        const outcome = (node: Node) =>
          Effect.map(exchange(network, node, body, timeoutMs), (sent) => "_tag" in sent ? sent : interpret(request, sent))
        const attempt = (n: number): Effect.Effect<Answer, Errors.BadGateway | Errors.GatewayTimeout> => {
          const node = ordered[n % ordered.length]!
          // A write is never hedged: it must not reach two nodes.
          const delay = readOnly && ordered.length > 1 ? hedgeDelay(node) : undefined
          const sent = delay === undefined
            ? Effect.map(outcome(node), (result) => ({ result, next: n + 1 }))
            : Effect.withFiber((fiber) =>
              Effect.map(
                RpcHedge.race(outcome(node), outcome(ordered[(n + 1) % ordered.length]!), delay, (result) => !("_tag" in result)),
                (hedged) => {
                  if (hedged.hedged) RpcMetrics.hedgesSent.of(network).updateUnsafe(1, fiber.context)
                  if (hedged.hedgeWon) RpcMetrics.hedgesWon.of(network).updateUnsafe(1, fiber.context)
                  return { result: hedged.outcome, next: hedged.hedged ? n + 2 : n + 1 }
                }
              )
            )
          return Effect.flatMap(sent, ({ next, result }) => {
            if (!("_tag" in result)) return Effect.succeed(result)
            const retry = result._tag === "refused" ||
              (readOnly && (result._tag === "broken" || (result._tag === "status" && result.status >= 500)))
            return retry && next < attempts ? attempt(next) : failed(result)
          })
        }
        return attempt(0)
      }
    })
  })

/**
 * The service from a decoded `rpc` config section; its head polls end with the layer's scope.
 *
 * @category layers
 */
export const layer = (config: Config): Layer.Layer<RpcUpstream, ChainMismatch> => Layer.effect(RpcUpstream, make(config))

/**
 * The service from the raw `rpc` section of the config file; a bad section fails with the field
 * and the rule it broke.
 *
 * @category layers
 */
export const layerFromUnknown = (section: unknown): Layer.Layer<RpcUpstream, Schema.SchemaError | ChainMismatch> =>
  Layer.effect(RpcUpstream, Effect.flatMap(Schema.decodeUnknownEffect(Config)(section ?? { upstreams: {} }), make))
