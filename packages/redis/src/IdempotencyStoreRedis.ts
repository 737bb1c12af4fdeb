/**
 * The Redis layer of `IdempotencyStore`: of two instances racing on one key, one wins, and
 * instances need not agree on the time. A record expires 24 h after its first claim.
 *
 * **Details**
 *
 * One hash per (principal, key) holds the body's fingerprint, the claim time and, once done, the
 * stored response. Claim, complete and abandon are Lua scripts (`lua/idempotency-claim.lua`,
 * `lua/record.lua`), and the claim time comes from the Redis server's clock. The principal is the
 * hash tag: one account's keys sit on one Cluster slot.
 *
 * @since 0.1.0
 */
import { Errors, IdempotencyStore } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

const claimScript = Redis.script(
  (key: string, fingerprint: string, ttlMs: number, leaseMs: number) => [key, fingerprint, ttlMs, leaseMs],
  {
    numberOfKeys: 1,
    lua: Lua.read("idempotency-claim")
  }
).withReturnType<ReadonlyArray<string>>()

/**
 * The Lua of `complete` and `abandon` as functions of a record's key, shared with the admission
 * store's settlement script (`AdmissionStoreRedis`).
 *
 * @category internals
 */
export const recordLibrary = Lua.read("record")

const completeScript = Redis.script(
  (key: string, status: number, headers: string, body: string) => [key, status, headers, body],
  {
    numberOfKeys: 1,
    lua: `${recordLibrary}${Lua.read("idempotency-complete")}`
  }
)

const abandonScript = Redis.script((key: string) => [key], {
  numberOfKeys: 1,
  lua: `${recordLibrary}${Lua.read("idempotency-abandon")}`
})

/** @category constants */
export const defaultPrefix = "tollgate:idem"

/**
 * The key of a (scope, key) record; the scope (the account) is its hash tag.
 *
 * @category internals
 */
export const recordKey = (prefix: string, scope: string, key: string) => `${prefix}:{${scope}}:${key}`

const unavailable = () => Errors.storeUnavailable("The idempotency store")

const toClaim = (reply: ReadonlyArray<string>): IdempotencyStore.Claim => {
  switch (reply[0]) {
    case "Claimed":
      return { _tag: "Claimed" }
    case "Mismatch":
      return { _tag: "Mismatch" }
    case "Replay":
      return {
        _tag: "Replay",
        response: {
          status: Number(reply[1]),
          headers: JSON.parse(reply[2] ?? "{}") as Record<string, string>,
          body: reply[3] ?? ""
        }
      }
    default:
      return { _tag: "InFlight" }
  }
}

/**
 * A store over the `Redis` service, its keys under `prefix`.
 *
 * @category constructors
 */
export const make = (options: { readonly prefix?: string; readonly ttlMs?: number; readonly leaseMs?: number } = {}) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const prefix = options.prefix ?? defaultPrefix
    const ttlMs = options.ttlMs ?? IdempotencyStore.TTL_MS
    const leaseMs = options.leaseMs ?? IdempotencyStore.LEASE_MS
    const claim = redis.eval(claimScript)
    const complete = redis.eval(completeScript)
    const abandon = redis.eval(abandonScript)
    const name = (scope: string, key: string) => recordKey(prefix, scope, key)
    return IdempotencyStore.IdempotencyStore.of({
      claim: (scope, key, fingerprint) =>
        claim(name(scope, key), fingerprint, ttlMs, leaseMs).pipe(Effect.map(toClaim), Effect.mapError(unavailable)),
      complete: (scope, key, response) =>
        complete(name(scope, key), response.status, JSON.stringify(response.headers), response.body).pipe(
          Effect.asVoid,
          Effect.mapError(unavailable)
        ),
      abandon: (scope, key) => abandon(name(scope, key)).pipe(Effect.asVoid, Effect.mapError(unavailable))
    })
  })

/**
 * The Redis layer, shared by every instance pointed at the same Redis.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<IdempotencyStore.IdempotencyStore, never, Redis.Redis> = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  make()
)
