/**
 * The Redis layer of `Webhooks.WebhookStore`: deliveries survive a restart, and every instance
 * sends from the same queue. Under the hash tag `{webhooks}` (one Cluster slot): a hash of the
 * deliveries as JSON by id, a sorted set of the pending ones by when they are due, another of all
 * of them by creation (the log, trimmed to `Webhooks.LOG_SIZE`), and one key per set latch. A
 * claim is a script that leases the due deliveries (moves their due time past the lease), so two
 * instances polling together never send one delivery twice at once.
 *
 * @since 0.1.0
 */
import { Errors, Webhooks } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"

const PREFIX = "tollgate:{webhooks}"
const deliveriesKey = `${PREFIX}:deliveries`
const dueKey = `${PREFIX}:due`
const logKey = `${PREFIX}:log`
const latchKey = (key: string) => `${PREFIX}:latch:${key}`

const claimScript = Redis.script(
  (deliveries: string, due: string, now: number, leaseMs: number, limit: number) => [deliveries, due, now, leaseMs, limit],
  {
    numberOfKeys: 2,
    lua: `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', '0', ARGV[3])
if #ids == 0 then return {} end
local lease = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[2], lease, id) end
return redis.call('HMGET', KEYS[1], unpack(ids))
`
  }
).withReturnType<ReadonlyArray<string | null>>()

const enqueueScript = Redis.script(
  (deliveries: string, due: string, log: string, size: number, ...rows: ReadonlyArray<string | number>) => [deliveries, due, log, size, ...rows],
  {
    numberOfKeys: 3,
    lua: `
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  redis.call('ZADD', KEYS[3], ARGV[i + 1], ARGV[i])
end
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[1])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[3], 0, over - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
end
return 1
`
  }
).withReturnType<number>()

const updateScript = Redis.script(
  (deliveries: string, due: string, id: string, json: string, nextAt: string) => [deliveries, due, id, json, nextAt],
  {
    numberOfKeys: 2,
    lua: `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('ZREM', KEYS[2], ARGV[1]) else redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 1
`
  }
).withReturnType<number>()

const unavailable = () => Errors.storeUnavailable("The webhook store")

const decode = (json: string) => JSON.parse(json) as Webhooks.Delivery

/**
 * The store over the `Redis` service in context.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<Webhooks.WebhookStore, never, Redis.Redis> = Layer.effect(
  Webhooks.WebhookStore,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const claim = redis.eval(claimScript)
    const enqueue = redis.eval(enqueueScript)
    const update = redis.eval(updateScript)
    const send = <A>(command: string, ...args: ReadonlyArray<string>) =>
      redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    return Webhooks.WebhookStore.of({
      latch: (key, ttlMs) =>
        Effect.map(
          send<string | null>("SET", latchKey(key), "1", "NX", ...(ttlMs === undefined ? [] : ["PX", String(Math.ceil(ttlMs))])),
          (reply) => reply === "OK"
        ),
      unlatch: (key) => Effect.asVoid(send("DEL", latchKey(key))),
      enqueue: (deliveries) =>
        deliveries.length === 0 ? Effect.void : Effect.asVoid(
          enqueue(
            deliveriesKey,
            dueKey,
            logKey,
            Webhooks.LOG_SIZE,
            ...deliveries.flatMap((delivery) => [delivery.id, delivery.createdAt, JSON.stringify(delivery)])
          ).pipe(Effect.mapError(unavailable))
        ),
      claimDue: (now, leaseMs, limit) =>
        Effect.map(
          claim(deliveriesKey, dueKey, now, leaseMs, limit).pipe(Effect.mapError(unavailable)),
          (rows) => rows.flatMap((json) => json === null ? [] : [decode(json)])
        ),
      update: (delivery) =>
        Effect.asVoid(
          update(deliveriesKey, dueKey, delivery.id, JSON.stringify(delivery), delivery.status === "pending" ? String(delivery.nextAt) : "").pipe(
            Effect.mapError(unavailable)
          )
        ),
      get: (id) => Effect.map(send<string | null>("HGET", deliveriesKey, id), (json) => Option.map(Option.fromNullishOr(json), decode)),
      list: (limit, before) =>
        Effect.flatMap(
          send<ReadonlyArray<string>>("ZREVRANGEBYSCORE", logKey, before === undefined ? "+inf" : `(${before}`, "-inf", "LIMIT", "0", String(limit)),
          (ids) =>
            ids.length === 0
              ? Effect.succeed([])
              : Effect.map(send<ReadonlyArray<string | null>>("HMGET", deliveriesKey, ...ids), (rows) => rows.flatMap((json) => json === null ? [] : [decode(json)]))
        )
    })
  })
)
