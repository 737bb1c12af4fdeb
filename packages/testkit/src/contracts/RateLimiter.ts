/**
 * The contract of `RateLimiter`: every limit all or nothing, nothing consumed on rejection, exact
 * headers. Written once; `@tollgate/core` runs it against the memory layer and `@tollgate/redis`
 * against Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { type Errors, Principal, RateLimiter, RateLimitLog, RateLimitPolicy } from "@tollgate/core"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import * as Contract from "../Contract.ts"

const MINUTE = 60_000

let counter = 0
const fresh = (name: string) => `${name}-${Date.now()}-${counter++}`

// Every step starts at the beginning of a window, so the expected headers are round numbers.
const startClock = Effect.fnUntraced(function*(alignMs: number = MINUTE) {
  const now = yield* Clock.currentTimeMillis
  const start = Math.ceil(now / alignMs) * alignMs
  yield* TestClock.adjust(start - now)
  return start
})

const limit = (key: string, requests: number, tokens?: { readonly limit: number; readonly reserve: number }): RateLimiter.Limit => ({
  type: "user",
  key,
  hashTag: key,
  requests: { limit: requests, windowMs: MINUTE },
  ...(tokens === undefined ? {} : { tokens: { ...tokens, windowMs: MINUTE } })
})

const rejection = <A>(self: Effect.Effect<A, Errors.RateLimited | Errors.ServiceUnavailable>) =>
  Effect.flip(self).pipe(Effect.map((error) => {
    assert.strictEqual(error._tag, "RateLimited")
    return error as Errors.RateLimited
  }))

const used = (l: RateLimiter.Limit) =>
  Effect.flatMap(RateLimiter.RateLimiter, (limiter) => limiter.inspect([l])).pipe(Effect.map(([status]) => status!))

const caller = new Principal.ApiKeyPrincipal({ accountId: "acct_rpc", keyId: "key_1", keyType: "INFERENCE", tier: "default" })

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<RateLimiter.RateLimiter | RateLimitLog.RateLimitLog, E>>) => {
  Contract.contract(
    "RateLimiter contract: every limit all or nothing, nothing consumed on rejection, exact headers",
    backends,
    (it) => {
      it.effect("an admitted call gets the exact x-ratelimit-* headers of its limit", () =>
        Effect.gen(function*() {
          const now = (yield* startClock()) + 15_000
          yield* TestClock.setTime(now)
          const limiter = yield* RateLimiter.RateLimiter
          const l = limit(fresh("headers"), 3, { limit: 100, reserve: 10 })
          const windowEnd = now - 15_000 + MINUTE
          const { headers } = yield* limiter.admit([l])
          assert.deepStrictEqual(headers, {
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "2",
            "x-ratelimit-reset-requests": String(windowEnd / 1000),
            "x-ratelimit-limit-tokens": "100",
            "x-ratelimit-remaining-tokens": "90",
            "x-ratelimit-reset-tokens": "45",
            "x-ratelimit-type": "user"
          })
        }))

      it.effect("several limits are all or nothing: a rejection by one consumes nothing in the others", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          // One account's limits share its hash tag, as every call's limits do (one Cluster slot).
          const account = fresh("account")
          const wide = { ...limit(`${account}:wide`, 10), type: "api_key" as const, hashTag: account }
          const narrow = { ...limit(`${account}:narrow`, 1), hashTag: account }
          const admitted = yield* limiter.admit([wide, narrow])
          assert.strictEqual(admitted.headers["x-ratelimit-type"], "user")
          assert.strictEqual(admitted.headers["x-ratelimit-remaining-requests"], "0")
          yield* rejection(limiter.admit([wide, narrow]))
          yield* rejection(limiter.admit([wide, narrow]))
          assert.strictEqual((yield* used(wide)).requests?.used, 1)
          assert.strictEqual((yield* used(narrow)).requests?.used, 1)
        }))

      it.effect("a 429 carries Retry-After and x-ratelimit-reset-requests of the moment a retry passes", () =>
        Effect.gen(function*() {
          const start = yield* startClock()
          yield* TestClock.setTime(start + 20_500)
          const limiter = yield* RateLimiter.RateLimiter
          const l = limit(fresh("retry"), 2)
          yield* limiter.admit([l])
          yield* limiter.admit([l])
          const error = yield* rejection(limiter.admit([l]))
          assert.strictEqual(error.retryAfterSeconds, 40)
          assert.strictEqual(error.headers?.["x-ratelimit-reset-requests"], String((start + MINUTE) / 1000))
          assert.strictEqual(error.headers?.["x-ratelimit-remaining-requests"], "0")
          assert.match(error.message, /2 requests per minute/)
          yield* TestClock.adjust(39_000)
          yield* rejection(limiter.admit([l]))
          yield* TestClock.adjust(error.retryAfterSeconds * 1000 - 39_000)
          const again = yield* limiter.admit([l])
          assert.strictEqual(again.headers["x-ratelimit-remaining-requests"], "1")
        }))

      it.effect("tokens are reserved at admission and settled to the actual count afterwards", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const key = fresh("tokens")
          const call = (reserve: number) => limit(key, 100, { limit: 100, reserve })
          const first = yield* limiter.admit([call(60)])
          assert.strictEqual(first.headers["x-ratelimit-remaining-tokens"], "40")
          yield* rejection(limiter.admit([call(60)]))
          yield* first.settle({ tokens: 20 })
          yield* first.settle({ tokens: 0 })
          assert.strictEqual((yield* used(call(0))).tokens?.remaining, 80)
          const second = yield* limiter.admit([call(60)])
          assert.strictEqual(second.headers["x-ratelimit-remaining-tokens"], "20")
          yield* second.settle({ tokens: 90 })
          assert.strictEqual((yield* used(call(0))).tokens?.remaining, 0)
          yield* rejection(limiter.admit([call(1)]))
        }))

      it.effect("a cancelled admission gives back its requests, tokens and credits, once", () =>
        Effect.gen(function*() {
          yield* startClock(10 * MINUTE)
          const limiter = yield* RateLimiter.RateLimiter
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct") })
          const rpc = RateLimitPolicy.limitsFor(principal, { kind: "rpc", reserveCredits: 20 })
          const tokens = limit(fresh("cancel"), 2, { limit: 100, reserve: 40 })
          yield* limiter.admit(rpc)
          const before = yield* limiter.inspect(rpc)
          const admission = yield* limiter.admit(rpc)
          yield* admission.cancel
          yield* admission.cancel
          yield* admission.settle({ credits: 5 })
          assert.deepStrictEqual(yield* limiter.inspect(rpc), before)
          const first = yield* limiter.admit([tokens])
          yield* first.cancel
          const [status] = yield* limiter.inspect([tokens])
          assert.deepStrictEqual([status?.requests?.used, status?.tokens?.used], [0, 0])
          yield* limiter.admit([tokens])
          yield* limiter.admit([tokens])
          yield* rejection(limiter.admit([tokens]))
        }))

      it.effect("RPC: 100 requests per minute per caller; the 429 customMessage names the per-minute cap", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct") })
          const limits = RateLimitPolicy.limitsFor(principal, { kind: "rpc", reserveCredits: 20, sku: "rpc:ethereum-mainnet" })
          for (let i = 0; i < 100; i++) yield* limiter.admit(limits)
          const error = yield* rejection(limiter.admit(limits))
          assert.strictEqual(error.customMessage, "RPC per-minute request cap exceeded (100 requests per minute)")
          assert.strictEqual(error.headers?.["x-ratelimit-limit-requests"], "100")
        }))

      it.effect("RPC: 10,000,000 credits per rolling 24 hours; the 429 customMessage names the daily cap", () =>
        Effect.gen(function*() {
          const start = yield* startClock(10 * MINUTE)
          const limiter = yield* RateLimiter.RateLimiter
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct") })
          const rpc = (credits: number) => RateLimitPolicy.limitsFor(principal, { kind: "rpc", reserveCredits: credits })
          yield* limiter.admit(rpc(6_000_000))
          yield* TestClock.setTime(start + 12 * 3_600_000)
          yield* limiter.admit(rpc(3_000_000))
          const error = yield* rejection(limiter.admit(rpc(2_000_000)))
          assert.strictEqual(error.customMessage, "RPC daily credit cap exceeded (10000000 credits per rolling 24 hours)")
          assert.strictEqual(error.retryAfterSeconds, 12 * 3600)
          yield* TestClock.setTime(start + 24 * 3_600_000 - 1)
          yield* rejection(limiter.admit(rpc(2_000_000)))
          yield* TestClock.setTime(start + 24 * 3_600_000)
          yield* limiter.admit(rpc(2_000_000))
          const [, daily] = yield* limiter.inspect(rpc(0))
          assert.strictEqual(daily?.credits?.used, 5_000_000)
        }))

      it.effect("settling credits below the reservation gives the rest back to the rolling window", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct") })
          const rpc = (credits: number) => RateLimitPolicy.limitsFor(principal, { kind: "rpc", reserveCredits: credits })
          const admission = yield* limiter.admit(rpc(9_000_000))
          yield* admission.settle({ credits: 1_000 })
          const [, daily] = yield* limiter.inspect(rpc(0))
          assert.strictEqual(daily?.credits?.remaining, 10_000_000 - 1_000)
        }))

      it.effect("inspect consumes nothing", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const l = limit(fresh("inspect"), 1, { limit: 10, reserve: 5 })
          for (let i = 0; i < 3; i++) yield* limiter.inspect([l])
          const { headers } = yield* limiter.admit([l])
          assert.strictEqual(headers["x-ratelimit-remaining-requests"], "0")
        }))

      it.effect("a rejection is logged with the time, the limit, the model and the key", () =>
        Effect.gen(function*() {
          const now = yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const log = yield* RateLimitLog.RateLimitLog
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct"), keyId: "key_9" })
          const limits = RateLimitPolicy.limitsFor(principal, { kind: "image", sku: "image:flux-dev" })
          for (let i = 0; i < 20; i++) yield* limiter.admit(limits)
          yield* rejection(limiter.admit(limits))
          assert.deepStrictEqual(yield* log.list(principal.accountId), [{
            accountId: principal.accountId,
            keyId: "key_9",
            kind: "image",
            model: "flux-dev",
            timestamp: now,
            limitType: "user",
            limit: "20 requests per minute"
          }])
        }))

      it.effect("property: in every window no more than the limit is admitted, exactly as a model says, and a rejection leaves remaining unchanged", () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.RateLimiter
          const runs = fc.sample(
            fc.array(fc.record({ advance: fc.integer({ min: 0, max: 25_000 }), reserve: fc.integer({ min: 0, max: 40 }) }), {
              minLength: 1,
              maxLength: 40
            }),
            { numRuns: 25, seed: 4 }
          )
          for (const steps of runs) {
            yield* startClock()
            const key = fresh("prop")
            const windows = new Map<number, { requests: number; tokens: number }>()
            for (const { advance, reserve } of steps) {
              yield* TestClock.adjust(advance)
              const now = yield* Clock.currentTimeMillis
              const window = windows.get(Math.floor(now / MINUTE)) ?? { requests: 0, tokens: 0 }
              const l = limit(key, 5, { limit: 100, reserve })
              const before = yield* used(l)
              const expected = window.requests + 1 <= 5 && (reserve === 0 || window.tokens + reserve <= 100)
              const result = yield* Effect.result(limiter.admit([l]))
              assert.strictEqual(result._tag === "Success", expected)
              if (result._tag === "Success") {
                windows.set(Math.floor(now / MINUTE), { requests: window.requests + 1, tokens: window.tokens + reserve })
              } else {
                assert.deepStrictEqual(yield* used(l), before)
              }
            }
            for (const { requests, tokens } of windows.values()) {
              assert.isAtMost(requests, 5)
              assert.isAtMost(tokens, 100)
            }
          }
        }))
    }
  )
  Contract.contract(
    "RateLimiter contract: a count without checking adds to every counter, past its limit, and settles like an admission",
    backends,
    (it) => {
      it.effect("a count past the limits is admitted with the headers of what it counted, and later admissions are refused", () =>
        Effect.gen(function*() {
          yield* startClock()
          const limiter = yield* RateLimiter.RateLimiter
          const l = limit(fresh("count"), 1, { limit: 100, reserve: 80 })
          yield* limiter.admit([l])
          const counted = yield* limiter.count([l])
          assert.strictEqual(counted.headers["x-ratelimit-remaining-requests"], "0")
          assert.strictEqual(counted.headers["x-ratelimit-remaining-tokens"], "0")
          const status = yield* used(l)
          assert.deepStrictEqual([status.requests?.used, status.tokens?.used], [2, 160])
          yield* rejection(limiter.admit([{ ...l, tokens: { limit: 100, reserve: 0, windowMs: MINUTE } }]))
        }))

      it.effect("a count's tokens settle to the actual use, and a cancelled count gives back everything it added, once", () =>
        Effect.gen(function*() {
          yield* startClock(10 * MINUTE)
          const limiter = yield* RateLimiter.RateLimiter
          const l = limit(fresh("count-settle"), 5, { limit: 100, reserve: 80 })
          const counted = yield* limiter.count([l])
          yield* counted.settle({ tokens: 10 })
          assert.strictEqual((yield* used(l)).tokens?.used, 10)
          const principal = new Principal.ApiKeyPrincipal({ ...caller, accountId: fresh("acct") })
          const rpc = (credits: number) => RateLimitPolicy.limitsFor(principal, { kind: "rpc", reserveCredits: credits })
          const past = yield* limiter.count(rpc(12_000_000))
          const [, daily] = yield* limiter.inspect(rpc(0))
          assert.strictEqual(daily?.credits?.used, 12_000_000)
          yield* rejection(limiter.admit(rpc(1)))
          yield* past.cancel
          yield* past.cancel
          const [requests, after] = yield* limiter.inspect(rpc(0))
          assert.deepStrictEqual([requests?.requests?.used, after?.credits?.used], [0, 0])
          yield* limiter.admit(rpc(1))
        }))
    }
  )
}
