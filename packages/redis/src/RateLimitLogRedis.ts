/**
 * The Redis layer of `RateLimitLog`: one list per account, newest first, trimmed to `maxEntries`
 * and expiring `retentionMs` after the last entry; entries older than the retention are dropped on
 * read. The account id is the hash tag, beside the account's rate-limit counters.
 *
 * @since 0.1.0
 */
import { Errors, RateLimitLog } from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

const recordScript = Redis.script(
  (key: string, entry: string, maxEntries: number, retentionMs: number) => [key, entry, maxEntries, retentionMs],
  {
    numberOfKeys: 1,
    lua: Lua.read("rate-limit-log-record")
  }
)

const keyOf = (accountId: string) => `rllog:{${accountId}}`

/**
 * The log over a `Redis` service.
 *
 * @category constructors
 */
export const make = (options: RateLimitLog.Options = {}) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const maxEntries = options.maxEntries ?? RateLimitLog.defaultMaxEntries
    const retentionMs = options.retentionMs ?? RateLimitLog.defaultRetentionMs
    const record = redis.eval(recordScript)
    return RateLimitLog.RateLimitLog.of({
      record: (entry) =>
        record(keyOf(entry.accountId), JSON.stringify(entry), maxEntries, retentionMs).pipe(
          Effect.catch((error) => Effect.logWarning("rate-limit log entry lost: Redis unreachable", error))
        ),
      list: (accountId, limit = maxEntries) =>
        Effect.gen(function*() {
          const raw = yield* redis.send<ReadonlyArray<string>>("LRANGE", keyOf(accountId), "0", String(Math.max(0, limit - 1)))
          const now = yield* Clock.currentTimeMillis
          return raw
            .map((line) => JSON.parse(line) as RateLimitLog.Entry)
            .filter((entry) => entry.timestamp > now - retentionMs)
        }).pipe(
          Effect.catchTag(
            "RedisError",
            () =>
              Effect.fail(new Errors.ServiceUnavailable({ message: "Rate-limit logs are temporarily unavailable", retryAfterSeconds: 1 }))
          )
        )
    })
  })

/**
 * The log in Redis, shared by every instance.
 *
 * @category layers
 */
export const layerRedis = (options: RateLimitLog.Options = {}): Layer.Layer<RateLimitLog.RateLimitLog, never, Redis.Redis> =>
  Layer.effect(RateLimitLog.RateLimitLog, make(options))
