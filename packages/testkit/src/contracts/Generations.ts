/**
 * The contract of `Generations`: a call's record is read back by its own account only. Written
 * once; `@tollgate/core` runs it against the memory layer and `@tollgate/redis` against Redis and
 * Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Generations, Money } from "@tollgate/core"
import { Effect, Option } from "effect"
import * as Contract from "../Contract.ts"

let counter = 0
const generation = (overrides: Partial<Generations.Generation> = {}): Generations.Generation => ({
  id: `gen-${Date.now()}-${counter++}`,
  accountId: "acct_generations",
  model: "llama-3.3-70b",
  upstream: "gpu-1:8000",
  promptTokens: 12,
  completionTokens: 5,
  cachedTokens: 4,
  cost: Money.unsafeNano(12_345),
  latencyMs: 87,
  cutShort: false,
  createdAt: Date.now(),
  ...overrides
})

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<Generations.Generations, E>>) =>
  Contract.contract(
    "Generations contract: a call's record is read back by its own account only",
    backends,
    (it) => {
      it.effect("a recorded call reads back as it was under its account, and as unknown under another", () =>
        Effect.gen(function*() {
          const generations = yield* Generations.Generations
          const recorded = generation({ cutShort: true })
          yield* generations.record(recorded)
          assert.deepStrictEqual(yield* generations.get(recorded.accountId, recorded.id), Option.some(recorded))
          assert.deepStrictEqual(yield* generations.get("acct_other", recorded.id), Option.none())
          assert.deepStrictEqual(yield* generations.get(recorded.accountId, "gen-unknown"), Option.none())
        }))
    }
  )
