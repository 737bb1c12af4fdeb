/**
 * The Redis layer of `KeyCaps`, and the Lua the admission script (`AdmissionStoreRedis`) checks and
 * counts a key's cap with (`lua/cap.lua`). An uncapped key has no hash, and the admission reads
 * nothing else for it.
 *
 * **Details**
 *
 * A capped key is one hash, `tollgate:cap:{accountId}:<keyId>`, under the account's hash tag like
 * every key an admission touches: `usd` (the cap, nano-USD), `period` (`EPOCH`, `MONTH`,
 * `LIFETIME`), `p` (the period id its spend is counted in, `KeyCaps.periodId`), `spent`,
 * `h:<reference>` = `<period id> <quote> <expiry>` per open hold, and `x`, at or before the
 * earliest of those expiries.
 *
 * @since 0.1.0
 */
import { Errors, KeyCaps, Money } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

/**
 * The hash of a key's cap and spend; with an empty key id, one that never exists (the admission
 * script's placeholder for a call without a key).
 *
 * @category internals
 */
export const capKey = (accountId: string, keyId: string) => `tollgate:cap:{${accountId}}:${keyId}`

/**
 * The cap's functions for the admission script. They run after the ledger's library
 * (`CreditLedgerRedis.ledgerLibrary`) and use its `s`, `now` and `holdRecord`: a hold the ledger
 * closed on its own (it expired, or a deferred job captured it) is settled into the spend from the
 * ledger's record when a new period starts, or when the spend would refuse a call and a hold may
 * have expired: a refusal otherwise costs one read.
 *
 * @category internals
 */
export const capLibrary = Lua.read("cap")

const unavailable = () => Errors.storeUnavailable("The spend cap store")

/**
 * `KeyCaps` over the `Redis` service in context; the admission script does the counting.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<KeyCaps.KeyCaps, never, Redis.Redis> = Layer.effect(
  KeyCaps.KeyCaps,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    return KeyCaps.KeyCaps.of({
      set: (accountId, keyId, cap) =>
        Effect.asVoid(
          cap === undefined
            ? send("DEL", capKey(accountId, keyId))
            : send("HSET", capKey(accountId, keyId), "usd", String(cap.usd), "period", cap.period)
        ),
      read: (accountId, keyIds, now) =>
        Effect.map(
          Effect.forEach(keyIds, (keyId) =>
            send<ReadonlyArray<string | null>>("HMGET", capKey(accountId, keyId), "usd", "period", "p", "spent"), {
            concurrency: "unbounded"
          }),
          (rows) => {
            const found = new Map<string, KeyCaps.KeySpend>()
            rows.forEach(([usd, period, counted, spent], i) => {
              if (usd == null || period == null)
                return
              const cap = { usd: Money.unsafeNano(Number(usd)), period: period as KeyCaps.LimitPeriod }
              const current = counted === KeyCaps.periodId(cap.period, now)
              found.set(keyIds[i]!, { cap, spent: Money.unsafeNano(current ? Number(spent) : 0) })
            })
            return found
          }
        )
    })
  })
)
