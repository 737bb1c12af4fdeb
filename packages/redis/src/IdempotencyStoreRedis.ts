/**
 * The Redis layer of `IdempotencyStore`: one hash per (principal, key) holding the body's
 * fingerprint, the claim time and, once done, the stored response; it expires 24 h after the first
 * claim. Claim, complete and abandon are Lua scripts, so two instances racing on one key see one
 * winner, and the claim time comes from the Redis server's clock, so instances need not agree on
 * the time. The principal is the hash tag: one account's keys sit on one Cluster slot.
 *
 * @since 0.1.0
 */
import { Errors, IdempotencyStore } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"

const claimScript = Redis.script(
  (key: string, fingerprint: string, ttlMs: number, leaseMs: number) => [key, fingerprint, ttlMs, leaseMs],
  {
    numberOfKeys: 1,
    lua: `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local current = redis.call('HMGET', KEYS[1], 'fingerprint', 'claimedAt', 'status')
if not current[1] then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'claimedAt', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'Claimed'}
end
if current[1] ~= ARGV[1] then return {'Mismatch'} end
if current[3] then
  local stored = redis.call('HMGET', KEYS[1], 'status', 'headers', 'body')
  return {'Replay', stored[1], stored[2], stored[3]}
end
if now - tonumber(current[2]) < tonumber(ARGV[3]) then return {'InFlight'} end
redis.call('HSET', KEYS[1], 'claimedAt', now)
return {'Claimed'}
`
  }
).withReturnType<ReadonlyArray<string>>()

/**
 * The Lua of `complete` and `abandon` as functions of a record's key, shared with the admission
 * store's settlement script (`AdmissionStoreRedis`).
 *
 * @category internals
 */
export const recordLibrary = `
local function completeRecord(key, status, headers, body)
  -- Every record holds its claim's fingerprint: one without a status is claimed and not completed.
  local record = redis.call('HMGET', key, 'fingerprint', 'status')
  if record[1] and not record[2] then
    redis.call('HSET', key, 'status', status, 'headers', headers, 'body', body)
  end
end
local function abandonRecord(key)
  if redis.call('HEXISTS', key, 'status') == 0 then redis.call('DEL', key) end
end
`

const completeScript = Redis.script(
  (key: string, status: number, headers: string, body: string) => [key, status, headers, body],
  {
    numberOfKeys: 1,
    lua: `${recordLibrary}
completeRecord(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
`
  }
)

const abandonScript = Redis.script((key: string) => [key], {
  numberOfKeys: 1,
  lua: `${recordLibrary}
abandonRecord(KEYS[1])
return 1
`
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
