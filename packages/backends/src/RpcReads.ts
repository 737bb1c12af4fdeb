/**
 * Single JSON-RPC reads on their way to an upstream: answered from the cache when the policy
 * (`RpcCachePolicy`) allows, else merged with identical reads in flight, so that one upstream call
 * answers them all, and stored when the answer may be kept. Each caller gets its own `id` back:
 * a cached or shared answer is written again around the caller's id, its result kept as the
 * node's text (never through JS numbers).
 *
 * **Details**
 *
 * Reads are identical when the network, the method and the parameters (as JSON text) are; the id
 * is not part of it. A batch of reads each with an id is answered item by item: the items the
 * cache holds from it, the rest upstream in one batch of their own raw text, the node's answers
 * matched back by the raw text of their ids. A write is never merged nor cached; a batch holding
 * one (or a notification) goes upstream as it came.
 *
 * @since 0.1.0
 */
import type { Errors, Networks } from "@tollgate/core"
import { JsonRpc, JsonText, RpcCachePolicy } from "@tollgate/core"
import type * as RpcCache from "@tollgate/core/RpcCache"
import { Effect, Fiber } from "effect"
import * as RpcMetrics from "./RpcMetrics.ts"
import type * as RpcUpstream from "./RpcUpstream.ts"

/**
 * A read's answer and where it came from: `hit` when the cache answered (no upstream call).
 *
 * @category models
 */
export interface Read {
  readonly answer: RpcUpstream.Answer
  readonly hit: boolean
}

type Failure = Errors.BadGateway | Errors.GatewayTimeout | Errors.ServiceUnavailable

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** One answer object around `id`, its member (`result` or `error`) as JSON text. */
const render = (id: string, member: "result" | "error", raw: string): Uint8Array =>
  Buffer.from(`{"jsonrpc":"2.0","id":${id},"${member}":${raw}}`)

const NONE: RpcCachePolicy.Decision = { _tag: "none" }

/** What the cache makes of one read (`plan` in `make`). */
interface Plan {
  readonly base: string
  readonly decision: RpcCachePolicy.Decision
  readonly key: string | undefined
}

/**
 * The elements of a batch answer as sent to the caller, parsed and as raw text, index for index
 * (the answer's `response` is in the node's order, its body may be in the request's); none when it
 * is not an array.
 */
const elementsOf = (
  answer: RpcUpstream.Answer | undefined
): { readonly answers: ReadonlyArray<unknown>; readonly raw: ReadonlyArray<string> } => {
  if (answer?.body === undefined || !Array.isArray(answer.response)) return { answers: [], raw: [] }
  const text = Buffer.from(answer.body).toString("utf8")
  const parsed = JsonRpc.parse(text)
  return Array.isArray(parsed) ? { answers: parsed, raw: JsonText.elements(text) } : { answers: [], raw: [] }
}

/** What billing reads of a cached answer: that it is a result (only results are cached). */
const CACHED = { result: null }

/**
 * The answer of a shared call for a caller with another id: the node's answer object written
 * again around that id, or the answer as it is when it is not one answer object.
 */
const forCaller = (answer: RpcUpstream.Answer, id: string): RpcUpstream.Answer => {
  if (answer.body === undefined || !isRecord(answer.response)) return answer
  const parsed = JsonText.parse(Buffer.from(answer.body).toString("utf8"))
  if (!isRecord(parsed)) return answer
  const member = "result" in parsed ? "result" : "error" in parsed ? "error" : undefined
  if (member === undefined) return answer
  return { response: answer.response, body: render(id, member, JSON.stringify(parsed[member])) }
}

const QUANTITY = /^0x[0-9a-fA-F]{1,16}$/u

/**
 * The block ranges an `eth_getLogs` call is split into: parts of at most `maxRange` blocks, when
 * its range is two block numbers wider than that and it needs at most `maxParts` parts;
 * otherwise `undefined` (the call goes as it came).
 *
 * @category internals
 */
export const logParts = (
  params: unknown,
  limits: { readonly maxRange: number; readonly maxParts: number } | undefined
): ReadonlyArray<readonly [number, number]> | undefined => {
  if (limits === undefined || !Array.isArray(params) || params.length !== 1 || !isRecord(params[0])) return undefined
  const { fromBlock, toBlock } = params[0]
  if (typeof fromBlock !== "string" || typeof toBlock !== "string" || !QUANTITY.test(fromBlock) || !QUANTITY.test(toBlock)) return undefined
  const from = Number.parseInt(fromBlock, 16)
  const to = Number.parseInt(toBlock, 16)
  const span = to - from + 1
  if (span <= limits.maxRange || Math.ceil(span / limits.maxRange) > limits.maxParts) return undefined
  const parts: Array<readonly [number, number]> = []
  for (let start = from; start <= to; start += limits.maxRange) parts.push([start, Math.min(to, start + limits.maxRange - 1)])
  return parts
}

const hex = (n: number) => `0x${n.toString(16)}`

/**
 * The reads of one process over an upstream service and a cache.
 *
 * @category constructors
 */
export const make = (upstream: RpcUpstream.RpcUpstream["Service"], cache: RpcCache.RpcCache["Service"]) => {
  const inFlight = new Map<string, { readonly call: Fiber.Fiber<RpcUpstream.Answer, Failure>; readonly body: Uint8Array }>()
  const settings = cache.settings

  /**
   * The upstream call of `key`, shared with every identical read that arrives before it ends. A
   * caller whose body is not the one sent gets the answer around its own id.
   */
  const shared = (key: string, network: string, request: JsonRpc.Request, body: Uint8Array, id: string) =>
    Effect.withFiber((fiber) => {
      let flight = inFlight.get(key)
      if (flight === undefined) {
        // Forked apart from the caller: a caller that goes away leaves the call to the others.
        const call = Effect.runForkWith(fiber.context)(upstream.forward(network, request, body))
        flight = { call, body }
        inFlight.set(key, flight)
        call.addObserver(() => inFlight.delete(key))
      }
      const sent = flight.body
      return Effect.map(Fiber.join(flight.call), (answer) =>
        sent === body || Buffer.compare(sent, body) === 0 ? answer : forCaller(answer, id))
    })

  /**
   * One `eth_getLogs` as consecutive calls over `parts`, their logs joined in block order; the
   * first part not answered with logs is the answer (an error for the whole call).
   */
  const split = (
    network: string,
    request: JsonRpc.Request,
    params: ReadonlyArray<Record<string, unknown>>,
    parts: ReadonlyArray<readonly [number, number]>,
    id: string
  ) =>
    Effect.map(
      Effect.forEach(parts, ([from, to]) =>
        upstream.forward(
          network,
          request,
          Buffer.from(
            JSON.stringify({
              jsonrpc: "2.0",
              id: 1,
              method: "eth_getLogs",
              params: [{ ...params[0], fromBlock: hex(from), toBlock: hex(to) }]
            })
          )
        ), { concurrency: 4 }),
      (answers): RpcUpstream.Answer => {
        const logs: Array<unknown> = []
        for (const answer of answers) {
          const parsed = answer.body === undefined ? undefined : JsonText.parse(Buffer.from(answer.body).toString("utf8"))
          if (!isRecord(parsed) || !Array.isArray(parsed["result"])) return forCaller(answer, id)
          for (const log of parsed["result"]) logs.push(log)
        }
        const raw = JSON.stringify(logs)
        return { response: { jsonrpc: "2.0", result: logs }, body: render(id, "result", raw) }
      }
    )

  /**
   * What the cache makes of one read: `base`, what identical reads share; its policy; and `key`,
   * where its answer would be stored (undefined when it may neither be read nor kept).
   */
  const plan = (network: Networks.Network, method: string, params: unknown) => {
    const slug = network.slug
    const base = `${slug}\n${method}\n${params === undefined ? "" : JSON.stringify(params)}`
    const decision: RpcCachePolicy.Decision = settings.enabled ? RpcCachePolicy.decide(network, method, params) : NONE
    // The chain's state matters only to an answer that follows the head or names a block number.
    const chain = decision._tag === "head" || decision._tag === "block" ? upstream.chainState(slug) : undefined
    const finalized = chain?.finalized
    const key = decision._tag === "none" ? undefined : decision._tag === "head"
      ? settings.headTtlMs > 0 && chain !== undefined ? `${base}\n${chain.headHash}` : undefined
      : decision._tag === "block"
      ? finalized !== undefined && decision.number <= finalized ? base : undefined
      : base
    return { base, decision, key }
  }

  /** Stores a result (its JSON text) when the policy keeps it, given what is now known of the chain. */
  const keep = (slug: string, key: string, decision: RpcCachePolicy.Decision, result: unknown, text: string) => {
    const ttlMs = RpcCachePolicy.lifetime(decision, result, upstream.chainState(slug)?.finalized, settings)
    return ttlMs === undefined ? Effect.void : cache.set(key, text, ttlMs)
  }

  /**
   * Stores the results of a batch answer that the cache may keep: each answer is matched to its
   * item by the raw text of its id, never by its position.
   */
  const keepAnswers = (
    slug: string,
    items: ReadonlyArray<JsonRpc.Item>,
    plans: ReadonlyArray<Plan>,
    answers: ReadonlyArray<unknown>,
    raw: ReadonlyArray<string>
  ) => {
    const byId = JsonRpc.answerIndexes(answers)
    const kept: Array<Effect.Effect<void>> = []
    items.forEach((item, i) => {
      const { decision, key } = plans[i]!
      const index = key === undefined ? undefined : byId.get(item.id!)?.shift()
      const answer = index === undefined ? undefined : answers[index]
      if (!isRecord(answer) || !("result" in answer) || raw[index!] === undefined) return
      const text = JsonText.member(Buffer.from(raw[index!]!), "result")
      if (text !== undefined) kept.push(keep(slug, key!, decision, answer["result"], Buffer.from(text).toString("utf8")))
    })
    return Effect.all(kept, { discard: true })
  }

  return {
    /**
     * Answers one read with an id (`request` holds one item, not a batch), from the cache or
     * upstream.
     */
    read: (network: Networks.Network, request: JsonRpc.Request, params: unknown, body: Uint8Array) =>
      Effect.withFiber((fiber): Effect.Effect<Read, Failure> => {
        const item = request.items[0]!
        const id = item.id!
        const slug = network.slug
        const { base, decision, key } = plan(network, item.method, params)
        // Built only when the cache cannot answer: a hit takes no step an upstream call needs.
        const fetch = () => {
          const parts = item.method === "eth_getLogs" ? logParts(params, upstream.getLogs) : undefined
          return Effect.map(
            parts === undefined
              ? shared(base, slug, request, body, id)
              : split(slug, request, params as ReadonlyArray<Record<string, unknown>>, parts, id),
            (answer): Read => ({ answer, hit: false })
          )
        }
        if (key === undefined) return fetch()
        return Effect.flatMap(cache.get(key), (cached): Effect.Effect<Read, Failure> => {
          if (cached !== undefined) {
            RpcMetrics.cacheHits.of(slug).updateUnsafe(1, fiber.context)
            return Effect.succeed({ answer: { response: CACHED, body: render(id, "result", cached) }, hit: true })
          }
          RpcMetrics.cacheMisses.of(slug).updateUnsafe(1, fiber.context)
          return Effect.tap(fetch(), (read) => {
            const response = read.answer.response
            if (!isRecord(response) || !("result" in response) || read.answer.body === undefined) return Effect.void
            const text = JsonText.member(read.answer.body, "result")
            return text === undefined ? Effect.void : keep(slug, key, decision, response["result"], Buffer.from(text).toString("utf8"))
          })
        })
      }),

    /**
     * Answers a batch of reads, each with an id (`params` holds each item's parameters): the items
     * the cache holds from it, the others upstream in one batch of their own raw text (their ids
     * as sent), and the node's answers put back by the raw text of their ids, never by position.
     * Answers come in request order, then those matching no item (a null-id error) as they came;
     * an item the node left out is left out (billed as an error), and an error object answering
     * the whole upstream batch answers each of its items. With nothing cached, the batch goes
     * upstream as it came and its answer is the node's; either way the results the policy allows
     * are stored. `hit` when no item went upstream.
     */
    readBatch: (network: Networks.Network, request: JsonRpc.Request, params: ReadonlyArray<unknown>, body: Uint8Array) =>
      Effect.withFiber((fiber): Effect.Effect<Read, Failure> => {
        const slug = network.slug
        const plans = request.items.map((item, i) => plan(network, item.method, params[i]))
        if (plans.every((each) => each.key === undefined)) {
          return Effect.map(upstream.forward(slug, request, body), (answer): Read => ({ answer, hit: false }))
        }
        const lookups = Effect.forEach(plans, (each) => each.key === undefined ? Effect.undefined : cache.get(each.key), {
          concurrency: "unbounded"
        })
        return Effect.flatMap(lookups, (cached): Effect.Effect<Read, Failure> => {
          plans.forEach((each, i) => {
            if (each.key === undefined) return
            const counter = cached[i] === undefined ? RpcMetrics.cacheMisses : RpcMetrics.cacheHits
            counter.of(slug).updateUnsafe(1, fiber.context)
          })
          const missed = request.items.flatMap((_item, i) => cached[i] === undefined ? [i] : [])
          if (missed.length === request.items.length) {
            return Effect.flatMap(upstream.forward(slug, request, body), (answer) => {
              const read: Read = { answer, hit: false }
              const { answers, raw } = elementsOf(answer)
              return Effect.as(keepAnswers(slug, request.items, plans, answers, raw), read)
            })
          }
          const rawItems = JsonText.elements(Buffer.from(body).toString("utf8"))
          const items = missed.map((i) => request.items[i]!)
          const sent = items.length === 0
            ? Effect.succeed(undefined)
            : upstream.forward(slug, { batch: true, items }, Buffer.from(`[${missed.map((i) => rawItems[i]!).join(",")}]`))
          return Effect.flatMap(sent, (answer): Effect.Effect<Read, Failure> => {
            const { answers, raw } = elementsOf(answer)
            // One object answering the whole upstream batch (an error): the answer of each item sent.
            const whole = answer?.body !== undefined && isRecord(answer.response) ? JsonText.member(answer.body, "error") : undefined
            const byId = JsonRpc.answerIndexes(answers)
            const placed = new Set<number>()
            const parts: Array<string> = []
            request.items.forEach((item, i) => {
              const hit = cached[i]
              if (hit !== undefined) return parts.push(`{"jsonrpc":"2.0","id":${item.id},"result":${hit}}`)
              if (whole !== undefined) return parts.push(`{"jsonrpc":"2.0","id":${item.id},"error":${Buffer.from(whole).toString("utf8")}}`)
              const index = byId.get(item.id!)?.shift()
              if (index === undefined || raw[index] === undefined) return
              placed.add(index)
              parts.push(raw[index])
            })
            raw.forEach((text, index) => {
              if (!placed.has(index)) parts.push(text)
            })
            const text = `[${parts.join(",")}]`
            const read: Read = { answer: { response: JsonRpc.parse(text), body: Buffer.from(text) }, hit: items.length === 0 }
            return Effect.as(keepAnswers(slug, items, missed.map((i) => plans[i]!), answers, raw), read)
          })
        })
      })
  }
}
