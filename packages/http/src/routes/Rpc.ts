/**
 * `POST /crypto/rpc/{network}`: the JSON-RPC proxy, a paid endpoint (`Endpoint.make`). The request
 * is checked whole before anything is metered (a well-formed `Idempotency-Key`, a supported
 * network, JSON-RPC 2.0 items whose methods the network's family admits, a configured upstream), so
 * a refused request costs nothing and burns no key.
 *
 * **Details**
 *
 * The metered pipeline's hold and 24 h credit reservation are the worst case (every item at its
 * tier), the capture what the upstream's answer actually costs (an item not answered with a result
 * costs 5 credits, see `JsonRpc.outcomes`). A duplicate of a keyed request still in flight gets 409
 * from the pipeline; a later one gets the stored response. A single read goes through `RpcReads`
 * (the cache, merging of identical reads in flight), and so does a batch of reads each with an id
 * (the cache item by item); the answer says `X-Cache: HIT` when the cache gave all of it, and is
 * charged the same unless the operator set a discount.
 *
 * @since 0.1.0
 */
import * as RpcReads from "@tollgate/backends/RpcReads"
import { isWrite, RpcUpstream } from "@tollgate/backends/RpcUpstream"
import { Errors, JsonRpc, Money, Networks, PricingEngine, RpcCache } from "@tollgate/core"
import { Context, Effect, Result, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as JsonDepth from "../JsonDepth.ts"
import type { Outcome } from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import { CurrentRequest } from "../RequestContext.ts"
import type * as Route from "../Route.ts"

const parseJson = (bytes: Uint8Array): Result.Result<unknown, Errors.InvalidRequest> => {
  try {
    const json = JsonRpc.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"))
    return JsonDepth.exceeds(json) ? Result.fail(JsonDepth.tooDeep) : Result.succeed(json)
  } catch {
    return Result.fail(new Errors.InvalidRequest({ message: "Invalid JSON-RPC request: the body is not JSON" }))
  }
}

/** One JSON-RPC item of the body, as decoded. @category schemas */
export const JsonRpcItem = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  method: Schema.String,
  params: Schema.optionalKey(Schema.Union([Schema.Array(Schema.Unknown), Schema.Record(Schema.String, Schema.Unknown)])),
  id: Schema.optionalKey(Schema.Union([Schema.String, Schema.Finite, Schema.Null]))
})

/**
 * A checked request: its network, its items, the body forwarded as it came, and its worst case in
 * credits; for one read with an id (which the cache and merging consider), its parameters.
 */
interface Checked {
  readonly slug: string
  readonly network: Networks.Network
  readonly rpc: JsonRpc.Request
  readonly body: Uint8Array
  readonly worst: number
  readonly read: { readonly params: unknown } | undefined
  /** For a batch of reads each with an id (which the cache considers item by item), their parameters. */
  readonly reads: ReadonlyArray<unknown> | undefined
}

/** The parameters of a request that is one read with an id, or `undefined`. */
const singleRead = (json: unknown, rpc: JsonRpc.Request): { readonly params: unknown } | undefined => {
  const item = rpc.items[0]
  if (rpc.batch || item === undefined || item.id === undefined || isWrite(item.method)) return undefined
  return { params: (json as { readonly params?: unknown }).params }
}

/** The parameters of each item of a batch of reads each with an id, or `undefined`. */
const batchReads = (json: unknown, rpc: JsonRpc.Request): ReadonlyArray<unknown> | undefined => {
  if (!rpc.batch || rpc.items.some((item) => item.id === undefined || isWrite(item.method))) return undefined
  return (json as ReadonlyArray<{ readonly params?: unknown }>).map((item) => item.params)
}

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/crypto/rpc/:network",
  kind: "rpc",
  idempotency: true,
  serve: Effect.gen(function*() {
    const upstream = yield* RpcUpstream
    const cache = yield* RpcCache.RpcCache
    const reads = RpcReads.make(upstream, cache)
    const discount = cache.settings.hitDiscountPercent
    const tables = yield* PricingEngine.PricingEngine
    const read = RequestBody.bytes()
    // A short chain of steps rather than a generator: every paid RPC call runs it.
    const decode = Effect.withFiber((fiber): Effect.Effect<Checked, Errors.ApiError, Route.RequestServices> => {
      const slug = Context.get(fiber.context, CurrentRequest).params["network"] ?? ""
      const network = Networks.findNetwork(slug)
      if (network === undefined) {
        return Effect.fail(new Errors.InvalidRequest({ message: `Unsupported RPC network: ${slug}` }))
      }
      return Effect.flatMap(read, (body): Effect.Effect<Checked, Errors.ApiError> => {
        const json = parseJson(body)
        if (Result.isFailure(json)) return Effect.fail(json.failure)
        const rpc = JsonRpc.check(network, json.success)
        if (Result.isFailure(rpc)) return Effect.fail(rpc.failure)
        if (!upstream.serves(slug)) {
          return Effect.fail(
            new Errors.ServiceUnavailable({
              message: `No upstream is configured for ${slug}: add its node URLs under rpc.upstreams.${slug} in the TOLLGATE_CONFIG file`
            })
          )
        }
        const worst = PricingEngine.rpcCredits(tables, slug, rpc.success.items.map((item) => item.tier))
        if (typeof worst !== "number") return Effect.fail(new Errors.InvalidRequest({ message: worst.message }))
        return Effect.succeed({
          slug,
          network,
          rpc: rpc.success,
          body,
          worst,
          read: singleRead(json.success, rpc.success),
          reads: batchReads(json.success, rpc.success)
        })
      })
    })

    return {
      decode,
      quote: ({ slug, worst }: Checked) => PricingEngine.rpcFromCredits(tables, slug, worst),
      shape: ({ worst }: Checked) => ({ reserveCredits: worst }),
      subject: ({ rpc }: Checked) => ({ methods: rpc.items.map((item) => item.method) }),
      // The network and the bytes as sent: a key reused on another network or with another body is refused.
      fingerprint: ({ body, slug }: Checked) => Buffer.concat([Buffer.from(`${slug}\n`), body]),
      /**
       * Answers the checked request (one read through the cache and merging, a batch of reads
       * through the cache item by item, anything else straight upstream) and prices the answer; a cache hit costs the same unless the operator
       * set `hitDiscountPercent`.
       */
      execute: ({ body, network, read, reads: batch, rpc, slug }: Checked) =>
        Effect.flatMap(
          read !== undefined
            ? reads.read(network, rpc, read.params, body)
            : batch !== undefined
            ? reads.readBatch(network, rpc, batch, body)
            : Effect.map(upstream.forward(slug, rpc, body), (answer): RpcReads.Read => ({ answer, hit: false })),
          ({ answer, hit }): Effect.Effect<Outcome, Errors.InvalidRequest> => {
            const credits = PricingEngine.rpcCredits(tables, slug, JsonRpc.outcomes(rpc, answer.response))
            if (typeof credits !== "number") return Effect.fail(new Errors.InvalidRequest({ message: credits.message }))
            const actual = hit && discount > 0 ? Math.ceil(credits * (100 - discount) / 100) : credits
            const price = PricingEngine.rpcFromCredits(tables, slug, actual)
            return Effect.succeed({
              response: answer.body === undefined
                ? HttpServerResponse.empty({ status: 204 })
                : HttpServerResponse.uint8Array(answer.body, { contentType: "application/json" }),
              headers: {
                "x-service-rpc-credits": String(actual),
                "x-service-rpc-cost-usd": Money.formatUsd(price.amount),
                "x-cache": hit ? "HIT" : "MISS"
              },
              charge: price.amount,
              usage: {
                units: actual,
                pricePerUnit: price.pricePerUnit,
                notes: `${rpc.items.length} JSON-RPC call${rpc.items.length === 1 ? "" : "s"} on ${slug}${hit ? " (cache hit)" : ""}`
              },
              actualCredits: actual
            })
          }
        )
    }
  }),
  docs: {
    summary: "Forward JSON-RPC 2.0 calls to a node of a supported chain",
    description: "A single JSON-RPC object or a batch of 1 to 100. Credits per item = baseCredits[chain] x tier " +
      "multiplier (Standard 1, Advanced 2, Large 4), for an answer from the cache too (`X-Cache: HIT`); an item not " +
      "answered with a result (a JSON-RPC error, an " +
      "error for the whole batch, an empty or malformed answer) costs 5 credits. " +
      "A batch with any unsupported, unknown or WebSocket-only method is refused whole, naming every offending " +
      "method. `Idempotency-Key` replays the stored response for 24 hours with `Idempotent-Replayed: true`; " +
      "a duplicate still in progress gets 409.",
    tags: ["Crypto RPC"],
    request: {
      contentType: "application/json",
      schema: Schema.Union([JsonRpcItem, Schema.Array(JsonRpcItem).check(Schema.isMinLength(1), Schema.isMaxLength(JsonRpc.MAX_BATCH))]),
      example: { jsonrpc: "2.0", method: "eth_blockNumber", params: [], id: 1 }
    },
    responses: {
      200: {
        description: "The upstream's JSON-RPC response; items may carry an `error`",
        example: { jsonrpc: "2.0", id: 1, result: "0x1b4" },
        headers: [
          "X-Service-RPC-Credits",
          "X-Service-RPC-Cost-USD",
          "X-Cache",
          "X-Request-ID",
          "X-RateLimit-Limit-Requests",
          "X-RateLimit-Remaining-Requests",
          "Idempotent-Replayed"
        ]
      },
      204: { description: "The request held notifications only" },
      400: { description: "Unsupported network, malformed JSON-RPC, offending methods, bad or reused Idempotency-Key" },
      401: { description: "Authentication failed" },
      402: { description: "Payment or balance required" },
      409: { description: "A request with the same Idempotency-Key is still in progress" },
      429: { description: "Per-minute request cap or rolling 24 h credit cap; `customMessage` names which" },
      502: { description: "The upstream could not be reached or answered badly" },
      504: { description: "The upstream did not answer in time" }
    }
  }
})
