/**
 * The contract of `AuditLog`: entries are appended, never changed, and read newest first a page at
 * a time, one account's own or every entry. Written once; `@tollgate/core` runs it against the
 * memory layer and `@tollgate/redis` against Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { AuditLog } from "@tollgate/core"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"

/** The Redis client schedules on the clock, so contract tests run on the live one. */
const live = <A, E, R>(body: Effect.Effect<A, E, R>) => TestClock.withLive(body)

const unique = () => `acct_audit_${crypto.randomUUID().slice(0, 8)}`

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<AuditLog.AuditLog, E>>) =>
  Contract.contract(
    "Audit log contract: append-only, read newest first a page at a time, an account's own entries or every entry",
    backends,
    (it) => {
      it.effect("an account's entries come back newest first with who, when, what and the details, paged with the cursor", () =>
        live(Effect.gen(function*() {
          const log = yield* AuditLog.AuditLog
          const accountId = unique()
          const before = Date.now()
          for (let i = 0; i < 5; i++) {
            yield* log.append({
              actor: i % 2 === 0 ? "cli" : "key:key_admin",
              action: "key.minted",
              accountId,
              details: { keyId: `key_${i}` }
            })
          }
          const first = yield* log.list({ accountId, limit: 2 })
          assert.deepStrictEqual(first.entries.map((entry) => entry.details["keyId"]), ["key_4", "key_3"])
          assert.deepStrictEqual(first.entries.map((entry) => [entry.actor, entry.action, entry.accountId]), [
            ["cli", "key.minted", accountId],
            ["key:key_admin", "key.minted", accountId]
          ])
          assert.isTrue(first.entries.every((entry) => entry.at.getTime() >= before - 1000 && entry.at.getTime() <= Date.now()))
          const second = yield* log.list({ accountId, limit: 2, before: first.next })
          assert.deepStrictEqual(second.entries.map((entry) => entry.details["keyId"]), ["key_2", "key_1"])
          const last = yield* log.list({ accountId, limit: 2, before: second.next })
          assert.deepStrictEqual(last.entries.map((entry) => entry.details["keyId"]), ["key_0"])
          assert.isUndefined(last.next)
        })))

      it.effect("an account sees only its own entries; every entry, with those of no account, is listed for operators", () =>
        live(Effect.gen(function*() {
          const log = yield* AuditLog.AuditLog
          const [one, two] = [unique(), unique()]
          yield* log.append({ actor: "cli", action: "credits.granted", accountId: one, details: { amountUsd: "5" } })
          yield* log.append({ actor: "cli", action: "key.revoked", accountId: two, details: { keyId: "key_x" } })
          yield* log.append({ actor: "server", action: "signing_keys.in_use", details: { signing: "kid_1", verifying: [] } })
          assert.deepStrictEqual((yield* log.list({ accountId: one, limit: 10 })).entries.map((entry) => entry.action), ["credits.granted"])
          assert.deepStrictEqual((yield* log.list({ accountId: two, limit: 10 })).entries.map((entry) => entry.action), ["key.revoked"])
          const all = (yield* log.list({ limit: 3 })).entries
          assert.deepStrictEqual(all.map((entry) => [entry.action, entry.accountId]), [
            ["signing_keys.in_use", undefined],
            ["key.revoked", two],
            ["credits.granted", one]
          ])
        })))

      it.effect("an account with no entries reads an empty page", () =>
        live(Effect.gen(function*() {
          const log = yield* AuditLog.AuditLog
          assert.deepStrictEqual(yield* log.list({ accountId: unique(), limit: 10 }), { entries: [] })
        })))
    }
  )
