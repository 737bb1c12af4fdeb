/**
 * The contract of `IdempotencyStore`: (principal, key) to fingerprint, state and stored response,
 * and a claim left in flight past its lease taken over. Written once; `@tollgate/core` runs it
 * against the memory layer and `@tollgate/redis` against Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { IdempotencyStore } from "@tollgate/core"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"

const Store = IdempotencyStore.IdempotencyStore

const response: IdempotencyStore.StoredResponse = {
  status: 200,
  headers: { "content-type": "application/json", "x-service-rpc-credits": "20" },
  body: Buffer.from("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x1\"}").toString("base64")
}

let counter = 0
const fresh = () => `key-${Date.now()}-${counter++}`

/**
 * Runs the contract of claims, fingerprints and stored responses against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<IdempotencyStore.IdempotencyStore, E>>) =>
  Contract.contract(
    "IdempotencyStore contract: (principal, key) -> fingerprint, state and stored response",
    backends,
    (it) => {
      it.effect("the first claim owns the key; a duplicate in flight is told so", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "Claimed" })
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "InFlight" })
        }))

      it.effect("a completed key replays the stored response byte for byte", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          yield* store.complete("acct_1", key, response)
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "Replay", response })
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "Replay", response })
        }))

      it.effect("the same key with a different body is a mismatch, in flight or done", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "other"), { _tag: "Mismatch" })
          yield* store.complete("acct_1", key, response)
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "other"), { _tag: "Mismatch" })
        }))

      it.effect("keys are per principal: another principal's same key is its own", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          yield* store.complete("acct_1", key, response)
          assert.deepStrictEqual(yield* store.claim("acct_2", key, "other"), { _tag: "Claimed" })
        }))

      it.effect("an abandoned key is not burnt: the next request claims it, even with another body", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          yield* store.abandon("acct_1", key)
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "other"), { _tag: "Claimed" })
        }))

      it.effect("abandon and a second complete never touch a completed key", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          yield* store.complete("acct_1", key, response)
          yield* store.abandon("acct_1", key)
          yield* store.complete("acct_1", key, { ...response, status: 500 })
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "Replay", response })
        }))

      it.effect("a completion of a key no request holds (never claimed, or abandoned) stores nothing: the next request claims it", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const unclaimed = fresh()
          yield* store.complete("acct_1", unclaimed, response)
          assert.deepStrictEqual(yield* store.claim("acct_1", unclaimed, "fp"), { _tag: "Claimed" })
          assert.deepStrictEqual(yield* store.claim("acct_1", unclaimed, "fp"), { _tag: "InFlight" })
          const abandoned = fresh()
          yield* store.claim("acct_1", abandoned, "fp")
          yield* store.abandon("acct_1", abandoned)
          yield* store.complete("acct_1", abandoned, response)
          assert.deepStrictEqual(yield* store.claim("acct_1", abandoned, "other"), { _tag: "Claimed" })
          assert.deepStrictEqual(yield* store.claim("acct_1", abandoned, "other"), { _tag: "InFlight" })
        }))

      it.effect("100 concurrent claims of one key: exactly one is Claimed", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          const claims = yield* Effect.forEach(
            Array.from({ length: 100 }, () => store.claim("acct_1", key, "fp")),
            (claim) => claim,
            { concurrency: "unbounded" }
          )
          assert.strictEqual(claims.filter((claim) => claim._tag === "Claimed").length, 1)
          assert.strictEqual(claims.filter((claim) => claim._tag === "InFlight").length, 99)
        }))
    }
  )

/**
 * The lease the backends of `runLease` are built with: long enough for two store calls in a row
 * on a loaded machine; the takeover is polled for.
 *
 * @category constants
 */
export const LEASE_MS = 1_000

/**
 * Runs the contract of a claim left in flight past its lease against each backend, each built
 * with `LEASE_MS`.
 *
 * @category constructors
 */
export const runLease = <E>(backends: ReadonlyArray<Contract.Backend<IdempotencyStore.IdempotencyStore, E>>) =>
  Contract.contract(
    "IdempotencyStore contract: a claim left in flight past its lease is taken over (a crashed process does not lock its key)",
    backends,
    (it) => {
      it.effect("InFlight within the lease, Claimed after it", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = fresh()
          yield* store.claim("acct_1", key, "fp")
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "InFlight" })
          // Past the lease (on the real clock for Redis, the test clock for memory), the claim is taken over.
          const deadline = Date.now() + 10 * LEASE_MS
          let claim = yield* store.claim("acct_1", key, "fp")
          while (claim._tag === "InFlight" && Date.now() < deadline) {
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
            yield* TestClock.adjust("100 millis")
            claim = yield* store.claim("acct_1", key, "fp")
          }
          assert.deepStrictEqual(claim, { _tag: "Claimed" })
          assert.deepStrictEqual(yield* store.claim("acct_1", key, "fp"), { _tag: "InFlight" })
        }))
    }
  )
