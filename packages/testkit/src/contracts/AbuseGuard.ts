/**
 * The contract of `AbuseGuard`: more than 20 failures within 30 s block the caller for 30 s.
 * Written once; `@tollgate/core` runs it against the memory layer and `@tollgate/redis` against
 * Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { AbuseGuard } from "@tollgate/core"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"

/** The Redis client schedules on the clock, so contract tests run on the live one. */
const live = <A, E, R>(body: Effect.Effect<A, E, R>) => TestClock.withLive(body)

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<AbuseGuard.AbuseGuard, E>>) =>
  Contract.contract(
    "AbuseGuard contract: more than 20 failures within 30 s block the caller for 30 s",
    backends,
    (it) => {
      it.effect("20 failures do not block; the 21st does, for about 30 s", () =>
        live(Effect.gen(function*() {
          const guard = yield* AbuseGuard.AbuseGuard
          const caller = `caller-${Math.random()}`
          for (let i = 0; i < 20; i++) yield* guard.recordFailure(caller)
          assert.strictEqual(yield* guard.blockedFor(caller), 0)
          yield* guard.recordFailure(caller)
          const ms = yield* guard.blockedFor(caller)
          assert.isTrue(ms > 25_000 && ms <= 30_000, `blocked for ${ms} ms`)
        })))

      it.effect("counting and blocking are one step: of 100 concurrent failures exactly 21 are counted, the rest see the block", () =>
        live(Effect.gen(function*() {
          const guard = yield* AbuseGuard.AbuseGuard
          const caller = `caller-${Math.random()}`
          const answers = yield* Effect.forEach(Array.from({ length: 100 }), () => guard.recordFailure(caller), {
            concurrency: "unbounded"
          })
          assert.strictEqual(answers.filter((ms) => ms === 0).length, 21)
          assert.isTrue(answers.filter((ms) => ms > 0).every((ms) => ms > 25_000 && ms <= 30_000))
        })))

      it.effect("callers are counted apart", () =>
        live(Effect.gen(function*() {
          const guard = yield* AbuseGuard.AbuseGuard
          const a = `caller-${Math.random()}`
          const b = `caller-${Math.random()}`
          for (let i = 0; i < 21; i++) yield* guard.recordFailure(a)
          assert.isTrue((yield* guard.blockedFor(a)) > 0)
          assert.strictEqual(yield* guard.blockedFor(b), 0)
        })))
    }
  )
