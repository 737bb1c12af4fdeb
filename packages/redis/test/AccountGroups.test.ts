import { assert } from "@effect/vitest"
import { Admission, AuthStore, CreditLedger, Money, RateLimiter } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import { Clock, Effect, Layer } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as AccountGroups from "../src/AccountGroups.ts"
import * as AdmissionStoreRedis from "../src/AdmissionStoreRedis.ts"
import * as AuthStoreRedis from "../src/AuthStoreRedis.ts"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

// Throwaway servers: the test counts every script call they run.
const redis = await RedisServer.start()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const nano = Money.unsafeNano
let counter = 0
const fresh = () => `acct-${process.pid}-${Date.now()}-${counter++}`

const grouped = (target: RedisConnection.Target) =>
  Layer.mergeAll(
    // A delay far above a Redis round trip on a loaded machine: a step that waited for a group
    // shows as a wait of seconds, one that went at once as milliseconds. An answer sends what
    // waits at once, so the delay itself never slows these tests.
    AdmissionStoreRedis.layerRedis({ admissionGroupMs: 3_000, settlementGroupMs: 3_000 }),
    AuthStoreRedis.layerRedis,
    CreditLedgerRedis.layerRedis(),
    RateLimiterRedis.layerRedis()
  ).pipe(Layer.provide(RedisConnection.layer(target)))

/** The script calls (as Functions or by EVALSHA) the nodes ran since `reset`, summed over `urls`. */
const scriptCalls = (urls: () => Promise<ReadonlyArray<string>>) => ({
  reset: Effect.promise(async () => {
    for (const url of await urls()) await RedisServer.command(url, "CONFIG", "RESETSTAT")
  }),
  count: Effect.promise(async () => {
    let calls = 0
    for (const url of await urls()) calls += (await RedisServer.scriptCalls(url)).total
    return calls
  })
})

const backends = [
  { ...RedisServer.backend(redis, (url) => grouped({ url })), name: "redis" },
  { ...RedisCluster.backend(cluster, (seeds) => grouped({ cluster: seeds })), name: "redis cluster" }
]
const scriptCallsOn = (backend: string) =>
  scriptCalls(async () => backend === "redis" ? [redis.url] : (await cluster.masters()).map((node) => node.url))

/** A new account with `funds` of credit. */
const funded = (funds: number) =>
  Effect.gen(function*() {
    const auth = yield* AuthStore.AuthStore
    const ledger = yield* CreditLedger.CreditLedger
    const accountId = fresh()
    yield* auth.insertAccount({ id: accountId, createdAt: new Date(0) })
    yield* ledger.grant({ accountId, amount: nano(funds), reference: "funds" })
    return accountId
  })

const HOLD = 1_000

/** A request counter of `limit` a minute and, for `daily`, a rolling credit counter: admissions of one group carry takes of different sizes. */
const counters = (accountId: string, limit: number, daily: boolean, now: number) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.RateLimiter
    const limits: Array<RateLimiter.Limit> = [{
      type: "user",
      key: `${accountId}:minute`,
      hashTag: accountId,
      requests: { limit, windowMs: 60_000 }
    }]
    if (daily)
      limits.push({ type: "user", key: `${accountId}:day`, hashTag: accountId, credits: { limit: 1e9, windowMs: 86_400_000, reserve: 20 } })
    return limiter.plan(limits, now).counters
  })

Contract.contract(
  "Admissions of one account that meet while one is in flight go in one Redis call, and each is decided as if it had gone alone, after those before it",
  backends,
  (it, backend) => {
    const calls = scriptCallsOn(backend)

    it.effect("ten admissions at once against a balance for six: one call alone, nine in one; a hold larger than what is left refused alone; the balance refuses the last three and they take no request", () =>
      Effect.gen(function*() {
        const ledger = yield* CreditLedger.CreditLedger
        const store = yield* Admission.AdmissionStore
        const limiter = yield* RateLimiter.RateLimiter
        const accountId = yield* funded(6 * HOLD)
        const now = yield* Clock.currentTimeMillis
        yield* calls.reset
        const replies = yield* Effect.all(
          Array.from({ length: 10 }, (_, i) =>
            Effect.flatMap(counters(accountId, 8, i % 2 === 1, now), (planned) =>
              store.admit({
                now,
                accountId,
                counters: planned,
                // The fifth call's hold is more than the four before it left: it is judged where its part of the group lies.
                hold: { reference: `r${i}`, amount: nano(i === 4 ? 3 * HOLD : HOLD), priceVersion: "v1" }
              }))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(yield* calls.count, 2)
        assert.deepStrictEqual(replies.map((reply) => reply._tag), [
          "Admitted",
          "Admitted",
          "Admitted",
          "Admitted",
          "HoldRefused",
          "Admitted",
          "Admitted",
          "HoldRefused",
          "HoldRefused",
          "HoldRefused"
        ])
        // Each admission saw the holds before it: the balance before its own hold, and its request counted after theirs.
        const admitted = replies.flatMap((reply) => reply._tag === "Admitted" ? [reply] : [])
        assert.deepStrictEqual(admitted.map((reply) => reply.hold.before.heldUsd), [0, HOLD, 2 * HOLD, 3 * HOLD, 4 * HOLD, 5 * HOLD])
        assert.deepStrictEqual(admitted.map((reply) => reply.states[0]?.used), [1, 2, 3, 4, 5, 6])
        const balance = yield* ledger.balance(accountId)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [6 * HOLD, 6 * HOLD])
        const [minute] = yield* limiter.inspect([{
          type: "user",
          key: `${accountId}:minute`,
          hashTag: accountId,
          requests: { limit: 8, windowMs: 60_000 }
        }])
        assert.strictEqual(minute?.requests?.used, 6)
      }))

    it.effect("an admission with nothing of its account in flight goes at once, as its own call", () =>
      Effect.gen(function*() {
        const store = yield* Admission.AdmissionStore
        const accountId = yield* funded(10_000)
        const now = yield* Clock.currentTimeMillis
        yield* calls.reset
        const started = Date.now()
        const reply = yield* store.admit({ now, accountId, counters: [], hold: { reference: "r", amount: nano(HOLD), priceVersion: "v1" } })
        // Well under the 3 s delay: it did not wait for a group.
        assert.isBelow(Date.now() - started, 1_500)
        assert.strictEqual(reply._tag, "Admitted")
        assert.strictEqual(yield* calls.count, 1)
      }))
  }
)

Contract.contract(
  "Settlements of one account that meet while one is in flight go in one Redis call, and each learns its own answer",
  backends,
  (it, backend) => {
    const calls = scriptCallsOn(backend)

    it.effect("ten settlements at once: the first goes alone, the nine behind it in one call; a capture over its hold fails alone", () =>
      Effect.gen(function*() {
        const ledger = yield* CreditLedger.CreditLedger
        const store = yield* Admission.AdmissionStore
        const accountId = yield* funded(100_000)
        const now = yield* Clock.currentTimeMillis
        for (let i = 0; i < 10; i++) {
          const reply = yield* store.admit({
            now,
            accountId,
            counters: [],
            hold: { reference: `r${i}`, amount: nano(HOLD), priceVersion: "v1" }
          })
          assert.strictEqual(reply._tag, "Admitted")
        }
        yield* calls.reset
        // r9 captures more than it held: ExceedsHold, for it alone.
        const amounts = Array.from({ length: 10 }, (_, i) => (i === 9 ? 5_000 : 100 * (i + 1)))
        const answers = yield* Effect.all(
          amounts.map((amount, i) =>
            Effect.result(store.settle({
              now,
              capture: {
                accountId,
                reference: `r${i}`,
                amount: nano(amount),
                usage: { sku: "test", units: 1, pricePerUnit: nano(amount), requestId: `q${i}`, executionMs: 1 }
              },
              adjustments: []
            }))
          ),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(yield* calls.count, 2)
        assert.deepStrictEqual(
          answers.map((answer) => answer._tag === "Success" ? answer.success.fromUsd : (answer.failure as CreditLedger.LedgerError).reason),
          [100, 200, 300, 400, 500, 600, 700, 800, 900, "ExceedsHold"]
        )
        // Each settlement's balance is the account's right after it, within the group.
        const settled = answers.flatMap((answer) => answer._tag === "Success" ? [answer.success.balance.usd] : [])
        assert.deepStrictEqual(settled, [99_900, 99_700, 99_400, 99_000, 98_500, 97_900, 97_200, 96_400, 95_500])
        const balance = yield* ledger.balance(accountId)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [95_500, HOLD])
        const usage = yield* ledger.usage(accountId, { order: "asc", limit: 20 })
        assert.deepStrictEqual(usage.entries.map((entry) => entry.requestId).sort(), ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"])
      }))

    it.effect("a settlement with nothing of its account in flight goes at once, as its own call", () =>
      Effect.gen(function*() {
        const store = yield* Admission.AdmissionStore
        const accountId = yield* funded(10_000)
        const now = yield* Clock.currentTimeMillis
        yield* store.admit({ now, accountId, counters: [], hold: { reference: "r", amount: nano(HOLD), priceVersion: "v1" } })
        yield* calls.reset
        const started = Date.now()
        const settlement = yield* store.settle({
          now,
          capture: {
            accountId,
            reference: "r",
            amount: nano(250),
            usage: { sku: "test", units: 1, pricePerUnit: nano(250), requestId: "q", executionMs: 1 }
          },
          adjustments: []
        })
        // Well under the 3 s delay: it did not wait for a group.
        assert.isBelow(Date.now() - started, 1_500)
        assert.strictEqual(settlement.balance.usd, 9_750)
        assert.strictEqual(yield* calls.count, 1)
      }))
  }
)

describe("A step waits for its group at most the delay, and a group holds at most MAX_GROUP steps", () => {
  /** The groups handed to Redis, each with the function that answers it. */
  const recorder = () => {
    const sent: Array<{ readonly group: ReadonlyArray<string>; readonly done: () => void }> = []
    return { sent, send: (group: ReadonlyArray<string>, done: () => void) => void sent.push({ group, done }) }
  }

  it("behind one that Redis has not answered, the next two go together once the 20 ms delay is up", async () => {
    const { send, sent } = recorder()
    const submit = AccountGroups.make(20, send)
    submit("acct", "a")
    submit("acct", "b")
    submit("acct", "c")
    expect(sent.map((each) => each.group)).toEqual([["a"]])
    await new Promise((resolve) => setTimeout(resolve, 40))
    expect(sent.map((each) => each.group)).toEqual([["a"], ["b", "c"]])
  })

  it("an answer sends what waits at once, before the delay; another account's settlement does not wait for it", () => {
    const { send, sent } = recorder()
    const submit = AccountGroups.make(1_000, send)
    submit("acct", "a")
    submit("acct", "b")
    submit("other", "x")
    sent[0]!.done()
    expect(sent.map((each) => each.group)).toEqual([["a"], ["x"], ["b"]])
  })

  it(`the ${AccountGroups.MAX_GROUP}th waiting step sends its group at once`, () => {
    const { send, sent } = recorder()
    const submit = AccountGroups.make(1_000, send)
    for (let i = 0; i <= AccountGroups.MAX_GROUP; i++) submit("acct", `s${i}`)
    expect(sent.map((each) => each.group.length)).toEqual([1, AccountGroups.MAX_GROUP])
    sent.forEach((each) => each.done())
  })
})
