/**
 * The contract of `PendingSettlements`: a payment's sent transaction is kept until it is deleted.
 * Written once; `@tollgate/core` runs it against the memory layer and `@tollgate/redis` against
 * Redis and Redis Cluster, where what only Redis does (entries shared by instances, the TTL) is
 * tested beside it.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { PendingSettlements } from "@tollgate/core"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Contract from "../Contract.ts"

const Store = PendingSettlements.PendingSettlements

/**
 * A payment signature as the SDK keys it: 65 bytes of hex, or `bytes` for a contract wallet's.
 *
 * @category fixtures
 */
export const signature = (bytes = 65) => `0x${Crypto.randomBytes(bytes).toString("hex")}`
/**
 * A transaction hash.
 *
 * @category fixtures
 */
export const txHash = () => `0x${Crypto.randomBytes(32).toString("hex")}`
const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<PendingSettlements.PendingSettlements, E>>) =>
  Contract.contract(
    "PendingSettlements contract: a payment's sent transaction is kept until it is deleted",
    backends,
    (it) => {
      it.effect("a payment never sent has no pending transaction", () =>
        Effect.gen(function*() {
          const store = yield* Store
          assert.strictEqual(yield* promise(() => store.get(signature())), undefined)
        }))

      it.effect("a set transaction reads back; setting again replaces it", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = signature()
          const [first, second] = [txHash(), txHash()]
          yield* promise(() => store.set(key, first))
          assert.strictEqual(yield* promise(() => store.get(key)), first)
          yield* promise(() => store.set(key, second))
          assert.strictEqual(yield* promise(() => store.get(key)), second)
        }))

      it.effect("delete forgets it; deleting a payment with no entry is no error", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const key = signature()
          yield* promise(() => store.set(key, txHash()))
          yield* promise(() => store.delete(key))
          assert.strictEqual(yield* promise(() => store.get(key)), undefined)
          yield* promise(() => store.delete(key))
        }))

      it.effect("each payment has its own entry, a 2 KB EIP-6492 signature as well as a 65-byte one", () =>
        Effect.gen(function*() {
          const store = yield* Store
          const entries = [signature(), signature(2048), signature()].map((key) => [key, txHash()] as const)
          yield* Effect.forEach(entries, ([key, hash]) => promise(() => store.set(key, hash)), { concurrency: "unbounded" })
          for (const [key, hash] of entries) assert.strictEqual(yield* promise(() => store.get(key)), hash)
          yield* promise(() => store.delete(entries[0]![0]))
          assert.strictEqual(yield* promise(() => store.get(entries[1]![0])), entries[1]![1])
        }))
    }
  )
