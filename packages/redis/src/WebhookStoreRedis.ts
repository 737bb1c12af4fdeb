/**
 * The Redis layer of `Webhooks.WebhookStore`: deliveries survive a restart, every instance sends
 * from the same queue, and two instances polling together never send one delivery twice at once.
 *
 * **Details**
 *
 * Under the hash tag `{webhooks}` (one Cluster slot): a hash of the deliveries as JSON by id, a
 * sorted set of the pending ones by when they are due, another of all of them by creation (the log,
 * trimmed to `Webhooks.LOG_SIZE`), and one key per set latch. A claim is a script
 * (`lua/webhook-claim.lua`) that leases the due deliveries by moving their due time past the lease.
 *
 * @since 0.1.0
 */
import { Errors, Webhooks } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

const PREFIX = "tollgate:{webhooks}"
const deliveriesKey = `${PREFIX}:deliveries`
const dueKey = `${PREFIX}:due`
const logKey = `${PREFIX}:log`
const latchKey = (key: string) => `${PREFIX}:latch:${key}`

const claimScript = Redis.script(
  (deliveries: string, due: string, now: number, leaseMs: number, limit: number) => [deliveries, due, now, leaseMs, limit],
  {
    numberOfKeys: 2,
    lua: Lua.read("webhook-claim")
  }
).withReturnType<ReadonlyArray<string | null>>()

const enqueueScript = Redis.script(
  (
    deliveries: string,
    due: string,
    log: string,
    size: number,
    ...rows: ReadonlyArray<string | number>
  ) => [deliveries, due, log, size, ...rows],
  {
    numberOfKeys: 3,
    lua: Lua.read("webhook-enqueue")
  }
).withReturnType<number>()

const updateScript = Redis.script(
  (deliveries: string, due: string, id: string, json: string, nextAt: string) => [deliveries, due, id, json, nextAt],
  {
    numberOfKeys: 2,
    lua: Lua.read("webhook-update")
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
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
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
          update(deliveriesKey, dueKey, delivery.id, JSON.stringify(delivery), delivery.status === "pending" ? String(delivery.nextAt) : "")
            .pipe(
              Effect.mapError(unavailable)
            )
        ),
      get: (id) => Effect.map(send<string | null>("HGET", deliveriesKey, id), (json) => Option.map(Option.fromNullishOr(json), decode)),
      list: (limit, before) =>
        Effect.flatMap(
          send<ReadonlyArray<string>>(
            "ZREVRANGEBYSCORE",
            logKey,
            before === undefined ? "+inf" : `(${before}`,
            "-inf",
            "LIMIT",
            "0",
            String(limit)
          ),
          (ids) =>
            ids.length === 0
              ? Effect.succeed([])
              : Effect.map(
                send<ReadonlyArray<string | null>>("HMGET", deliveriesKey, ...ids),
                (rows) => rows.flatMap((json) => json === null ? [] : [decode(json)])
              )
        )
    })
  })
)
