/**
 * The contract of `Webhooks.WebhookStore`: a latch fires once per crossing; a delivery is stored
 * before it is sent, leased to one sender at a time, and kept in the log. Written once;
 * `@tollgate/core` runs it against the memory layer and `@tollgate/redis` against Redis and Redis
 * Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Webhooks } from "@tollgate/core"
import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"

let counter = 0
const fresh = (name: string) => `${name}-${process.pid}-${Date.now()}-${counter++}`

/** A pending delivery created at `at`, due at once. */
const delivery = (id: string, at: number): Webhooks.Delivery => ({
  id,
  type: "balance.below_threshold",
  url: "http://127.0.0.1:1/hooks",
  payload: JSON.stringify({ type: "balance.below_threshold", timestamp: new Date(at).toISOString(), data: { id } }),
  createdAt: at,
  attempts: 0,
  status: "pending",
  nextAt: at
})

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<Webhooks.WebhookStore, E>>) =>
  Contract.contract(
    "Webhook store: a latch fires once per crossing; a delivery is stored before it is sent, leased to one sender at a time, and kept in the log",
    backends,
    (it) => {
      it.effect("a latch is set once until it is cleared; one with a time to live is set again after it", () =>
        Effect.gen(function*() {
          const store = yield* Webhooks.WebhookStore
          const key = fresh("balance")
          assert.deepStrictEqual([yield* store.latch(key), yield* store.latch(key)], [true, false])
          yield* store.unlatch(key)
          assert.isTrue(yield* store.latch(key))
          const timed = fresh("cap")
          assert.deepStrictEqual([yield* store.latch(timed, 60_000), yield* store.latch(timed, 60_000)], [true, false])
        }))

      it.effect("a due delivery is claimed by one sender: a second claim within the lease finds nothing, one after it finds it again", () =>
        Effect.gen(function*() {
          const store = yield* Webhooks.WebhookStore
          const id = fresh("msg")
          const now = Date.now()
          yield* store.enqueue([delivery(id, now)])
          const first = yield* store.claimDue(now, 1_000, 10_000)
          assert.include(first.map((due) => due.id), id)
          const again = yield* store.claimDue(now + 500, 1_000, 10_000)
          assert.notInclude(again.map((due) => due.id), id)
          const afterLease = yield* store.claimDue(now + 1_000, 1_000, 10_000)
          assert.include(afterLease.map((due) => due.id), id)
        }))

      it.effect("a delivered one is never due again; a failed attempt is due at its next time; the log lists newest first", () =>
        Effect.gen(function*() {
          const store = yield* Webhooks.WebhookStore
          // Far in the future, so the other tests' deliveries are older than these.
          const at = Date.now() + 86_400_000
          const [a, b] = [fresh("msg-a"), fresh("msg-b")]
          yield* store.enqueue([delivery(a, at), delivery(b, at + 1)])
          yield* store.update({ ...delivery(a, at), status: "delivered", attempts: 1, deliveredAt: at })
          yield* store.update({ ...delivery(b, at + 1), attempts: 1, nextAt: at + 5_000, lastError: "the endpoint answered 503" })
          assert.deepStrictEqual((yield* store.claimDue(at + 4_999, 1_000, 10_000)).filter((due) => due.id === a || due.id === b), [])
          assert.deepStrictEqual(
            (yield* store.claimDue(at + 5_000, 1_000, 10_000)).map((due) => [due.id, due.attempts, due.lastError]).filter(([id]) =>
              id === b
            ),
            [[b, 1, "the endpoint answered 503"]]
          )
          const log = yield* store.list(2)
          assert.deepStrictEqual(log.map((entry) => [entry.id, entry.status]), [[b, "pending"], [a, "delivered"]])
          assert.deepStrictEqual((yield* store.list(1, at + 1)).map((entry) => entry.id), [a])
          assert.strictEqual(Option.getOrUndefined(yield* store.get(a))?.deliveredAt, at)
          assert.isTrue(Option.isNone(yield* store.get(fresh("missing"))))
        }))

      it.effect("a latch's time to live is the store's clock's", () =>
        Effect.gen(function*() {
          const store = yield* Webhooks.WebhookStore
          const key = fresh("ttl")
          assert.isTrue(yield* store.latch(key, 50))
          yield* TestClock.adjust(60)
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 60)))
          assert.isTrue(yield* store.latch(key, 50))
        }))
    }
  )
