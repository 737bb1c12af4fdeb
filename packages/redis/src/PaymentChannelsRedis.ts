/**
 * The Redis layer of `PaymentChannels`: two instances serving one channel see one reservation at a
 * time and one cumulative charge, and every channel with charges is listed for the claim batches.
 *
 * **Details**
 *
 * One hash per channel (`<prefix>:{<channelId>}`, the channel id its hash tag) and one set naming
 * every channel. Open, reserve, commit and mirror are Lua scripts on the channel's hash. The set is
 * written apart from the hash (on a Redis Cluster they sit on different slots): a channel is added
 * to it when it is opened, before any call is served on it.
 *
 * @since 0.1.0
 */
import { Errors, PaymentChannels } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"

/** @category constants */
export const defaultPrefix = "tollgate:channel"

/**
 * The fields of a channel, in the order every script answers them.
 *
 * @category internals
 */
export const FIELDS = [
  "config",
  "balance",
  "totalClaimed",
  "withdrawRequestedAt",
  "charged",
  "chargedNano",
  "signedMax",
  "signature",
  "lastRequestAt"
] as const

/** Whole numbers written without an exponent (Lua's `tostring` writes 1e+15). */
const library = `
local FIELDS = {'config', 'balance', 'totalClaimed', 'withdrawRequestedAt', 'charged', 'chargedNano', 'signedMax', 'signature', 'lastRequestAt'}
local NANO_PER_UNIT = 1000
local function whole(n) return string.format('%.0f', n) end
local function fields(key) return redis.call('HMGET', key, unpack(FIELDS)) end
-- The twin of PaymentChannels' mirrored: what is claimed on chain counts as charged.
local function mirror(key, balance, claimed, withdrawRequestedAt)
  local charged = math.max(tonumber(redis.call('HGET', key, 'charged')), tonumber(claimed))
  local chargedNano = math.max(tonumber(redis.call('HGET', key, 'chargedNano')), tonumber(claimed) * NANO_PER_UNIT)
  redis.call('HSET', key, 'balance', balance, 'totalClaimed', claimed, 'withdrawRequestedAt', withdrawRequestedAt,
    'charged', whole(charged), 'chargedNano', whole(chargedNano))
end
`

const openScript = Redis.script(
  (
    key: string,
    config: string,
    balance: string,
    totalClaimed: string,
    withdrawRequestedAt: number,
    now: number
  ) => [key, config, balance, totalClaimed, withdrawRequestedAt, now],
  {
    numberOfKeys: 1,
    lua: `${library}
if redis.call('EXISTS', KEYS[1]) == 1 then
  mirror(KEYS[1], ARGV[2], ARGV[3], ARGV[4])
else
  redis.call('HSET', KEYS[1], 'config', ARGV[1], 'balance', ARGV[2], 'totalClaimed', ARGV[3], 'withdrawRequestedAt', ARGV[4],
    'charged', ARGV[3], 'chargedNano', whole(tonumber(ARGV[3]) * NANO_PER_UNIT), 'signedMax', ARGV[3], 'signature', '', 'lastRequestAt', ARGV[5])
end
return fields(KEYS[1])
`
  }
).withReturnType<ReadonlyArray<string | null>>()

/**
 * The Lua twin of `PaymentChannels.refusal`: the same rules in the same order, then the voucher
 * stored and the channel held.
 *
 * @category internals
 */
export const reserveScript = Redis.script(
  (
    key: string,
    maxClaimable: string,
    signature: string,
    price: string,
    exposureCap: string,
    now: number,
    leaseMs: number
  ) => [key, maxClaimable, signature, price, exposureCap, now, leaseMs],
  {
    numberOfKeys: 1,
    lua: `${library}
if redis.call('EXISTS', KEYS[1]) == 0 then return {'invalid_batch_settlement_evm_missing_channel'} end
local state = redis.call('HMGET', KEYS[1], 'withdrawRequestedAt', 'pendingSince', 'charged', 'balance', 'totalClaimed')
local max = tonumber(ARGV[1])
local now = tonumber(ARGV[5])
local refusal = nil
if tonumber(state[1]) ~= 0 then refusal = 'batch_settlement_withdrawal_pending'
elseif state[2] and now - tonumber(state[2]) < tonumber(ARGV[6]) then refusal = 'invalid_batch_settlement_evm_channel_busy'
elseif max ~= tonumber(state[3]) + tonumber(ARGV[3]) then refusal = 'invalid_batch_settlement_evm_cumulative_amount_mismatch'
elseif max > tonumber(state[4]) then refusal = 'invalid_batch_settlement_evm_cumulative_exceeds_balance'
elseif max - tonumber(state[5]) > tonumber(ARGV[4]) then refusal = 'batch_settlement_exposure_cap'
end
if refusal then
  local answer = fields(KEYS[1])
  table.insert(answer, 1, refusal)
  return answer
end
redis.call('HSET', KEYS[1], 'pendingSince', ARGV[5], 'signedMax', ARGV[1], 'signature', ARGV[2], 'lastRequestAt', ARGV[5])
local answer = fields(KEYS[1])
table.insert(answer, 1, 'Reserved')
return answer
`
  }
).withReturnType<ReadonlyArray<string | null>>()

/** The twin of `PaymentChannels`' memory commit and `unitsOf`. */
/** The round's lock: taken when free or already the owner's, for `ttlMs` (Redis's clock, not `now`). */
const lockScript = Redis.script((key: string, owner: string, ttlMs: number) => [key, owner, ttlMs], {
  numberOfKeys: 1,
  lua: `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`
}).withReturnType<number>()

const commitScript = Redis.script((key: string, chargeNano: string) => [key, chargeNano], {
  numberOfKeys: 1,
  lua: `${library}
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local chargedNano = tonumber(redis.call('HGET', KEYS[1], 'chargedNano')) + tonumber(ARGV[1])
local charged = math.max(tonumber(redis.call('HGET', KEYS[1], 'charged')), math.ceil(chargedNano / NANO_PER_UNIT))
redis.call('HSET', KEYS[1], 'charged', whole(charged), 'chargedNano', whole(chargedNano))
redis.call('HDEL', KEYS[1], 'pendingSince')
return fields(KEYS[1])
`
}).withReturnType<ReadonlyArray<string | null>>()

const mirrorScript = Redis.script(
  (key: string, balance: string, totalClaimed: string, withdrawRequestedAt: number) => [key, balance, totalClaimed, withdrawRequestedAt],
  {
    numberOfKeys: 1,
    lua: `${library}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
mirror(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
`
  }
)

/**
 * The key of a channel's hash.
 *
 * @category internals
 */
export const channelKey = (prefix: string, channelId: string) => `${prefix}:{${channelId}}`

/**
 * A channel from the fields a script answered (in `FIELDS` order).
 *
 * @category internals
 */
export const fromFields = (channelId: string, values: ReadonlyArray<string | null>): PaymentChannels.Channel => ({
  channelId,
  config: JSON.parse(values[0] ?? "{}") as PaymentChannels.ChannelConfig,
  balance: BigInt(values[1] ?? "0"),
  totalClaimed: BigInt(values[2] ?? "0"),
  withdrawRequestedAt: Number(values[3] ?? "0"),
  charged: BigInt(values[4] ?? "0"),
  chargedNano: BigInt(values[5] ?? "0"),
  signedMax: BigInt(values[6] ?? "0"),
  signature: values[7] ?? "",
  lastRequestAt: Number(values[8] ?? "0")
})

const unavailable = () => Errors.storeUnavailable("The payment channel store")

/**
 * A store over the `Redis` service, its keys under `prefix`.
 *
 * @category constructors
 */
export const make = (options: { readonly prefix?: string } = {}) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const prefix = options.prefix ?? defaultPrefix
    const index = `${prefix}s`
    const open = redis.eval(openScript)
    const reserve = redis.eval(reserveScript)
    const commit = redis.eval(commitScript)
    const mirror = redis.eval(mirrorScript)
    const lock = redis.eval(lockScript)
    const key = (channelId: string) => channelKey(prefix, channelId)
    const get = (channelId: string) =>
      redis.send<ReadonlyArray<string | null>>("HMGET", key(channelId), ...FIELDS).pipe(
        Effect.map((values) => values[0] === null ? Option.none() : Option.some(fromFields(channelId, values)))
      )
    return PaymentChannels.PaymentChannels.of({
      open: (channelId, config, onChain, now) =>
        redis.send("SADD", index, channelId).pipe(
          Effect.andThen(
            open(
              key(channelId),
              JSON.stringify(config),
              String(onChain.balance),
              String(onChain.totalClaimed),
              onChain.withdrawRequestedAt,
              now
            )
          ),
          Effect.map((values) => fromFields(channelId, values)),
          Effect.mapError(unavailable)
        ),
      get: (channelId) => get(channelId).pipe(Effect.mapError(unavailable)),
      reserve: (reservation) =>
        reserve(
          key(reservation.channelId),
          String(reservation.maxClaimable),
          reservation.signature,
          String(reservation.price),
          String(reservation.exposureCap),
          reservation.now,
          reservation.leaseMs
        ).pipe(
          Effect.mapError(unavailable),
          Effect.flatMap((answer) => {
            const [outcome, ...values] = answer
            if (outcome === "Reserved") return Effect.succeed(fromFields(reservation.channelId, values))
            return Effect.fail(
              new PaymentChannels.VoucherRefused({
                reason: outcome as PaymentChannels.Refusal,
                channel: values.length === 0 ? undefined : fromFields(reservation.channelId, values)
              })
            )
          })
        ),
      commit: (channelId, chargeNano) =>
        commit(key(channelId), String(chargeNano)).pipe(
          Effect.mapError(unavailable),
          Effect.flatMap((values) =>
            values.length === 0
              ? Effect.die(new Error(`PaymentChannels.commit: no channel ${channelId}`))
              : Effect.succeed(fromFields(channelId, values))
          )
        ),
      release: (channelId) => redis.send("HDEL", key(channelId), "pendingSince").pipe(Effect.asVoid, Effect.mapError(unavailable)),
      mirror: (channelId, onChain) =>
        mirror(key(channelId), String(onChain.balance), String(onChain.totalClaimed), onChain.withdrawRequestedAt).pipe(
          Effect.asVoid,
          Effect.mapError(unavailable)
        ),
      list: redis.send<ReadonlyArray<string>>("SMEMBERS", index).pipe(
        Effect.flatMap((ids) => Effect.forEach(ids, get)),
        Effect.map((channels) => channels.flatMap((channel) => Option.isSome(channel) ? [channel.value] : [])),
        Effect.mapError(unavailable)
      ),
      remove: (channelId) =>
        redis.send("DEL", key(channelId)).pipe(
          Effect.andThen(redis.send("SREM", index, channelId)),
          Effect.asVoid,
          Effect.mapError(unavailable)
        ),
      lockRound: (owner, _now, ttlMs) =>
        lock(`${prefix}:round`, owner, ttlMs).pipe(Effect.map((taken) => taken === 1), Effect.mapError(unavailable))
    })
  })

/**
 * The Redis layer, shared by every instance pointed at the same Redis.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<PaymentChannels.PaymentChannels, never, Redis.Redis> = Layer.effect(
  PaymentChannels.PaymentChannels,
  make()
)
