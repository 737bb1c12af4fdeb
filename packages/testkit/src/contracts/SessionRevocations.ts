/**
 * The contract of `SessionRevocations`: a portal sign-in that signed out stays revoked until it
 * would have ended, and no longer. Written once; `@tollgate/core` runs it against the memory layer and
 * `@tollgate/redis` against Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { SessionRevocations } from "@tollgate/core"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import * as Contract from "../Contract.ts"

const id = () => Crypto.randomBytes(16).toString("base64url")

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<SessionRevocations.SessionRevocations, E>>) =>
  Contract.contract(
    "SessionRevocations contract: a sign-in that signed out stays revoked until it would have ended, and no longer",
    backends,
    (it) => {
      it.effect("a sign-in never signed out is not revoked; a revoked one is, the others are not", () =>
        Effect.gen(function*() {
          const store = yield* SessionRevocations.SessionRevocations
          const [out, kept] = [id(), id()]
          assert.isFalse(yield* store.isRevoked(out))
          yield* store.revoke(out, (yield* Clock.currentTimeMillis) + 60_000)
          assert.isTrue(yield* store.isRevoked(out))
          assert.isFalse(yield* store.isRevoked(kept))
        }))

      it.effect("the revocation ends with the sign-in's own end; a sign-in already ended leaves nothing", () =>
        Effect.gen(function*() {
          const store = yield* SessionRevocations.SessionRevocations
          const [short, ended] = [id(), id()]
          const now = yield* Clock.currentTimeMillis
          yield* store.revoke(short, now + 150)
          yield* store.revoke(ended, now - 1)
          assert.isTrue(yield* store.isRevoked(short))
          assert.isFalse(yield* store.isRevoked(ended))
          // Past the end on both clocks: the test clock the memory store reads, Redis's own.
          yield* TestClock.adjust("300 millis")
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
          assert.isFalse(yield* store.isRevoked(short))
        }))
    }
  )
