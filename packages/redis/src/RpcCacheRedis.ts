/**
 * The Redis layer of `RpcCache`, shared by every worker and instance, and bounded as the memory
 * layer is: at most `maxEntries` entries and `maxBytes` bytes of keys and values. The cache never
 * fails a call: a Redis that cannot answer is a miss, and a write it refuses is dropped.
 *
 * **Details**
 *
 * Each answer is a string key `<prefix>:<sha256 of network, method and parameters>` written with
 * `SET ... PX`, so it expires after its lifetime (`ttlMs` for a final answer, `headTtlMs` for one
 * that follows the head). A write is one script (`lua/rpc-cache-set.lua`) that also keeps an index
 * of the entries by expiry and their sizes, and drops the entries closest to their expiry until
 * both bounds hold. A read stays one `GET`: unlike the memory layer, which drops the least recently
 * read entry, Redis drops the one written longest ago among answers of the same lifetime, so that a
 * hit costs no write. Every key carries one hash tag, so on a Redis Cluster the cache sits on one
 * slot. An answer larger than `maxEntryBytes` is not written.
 *
 * @since 0.1.0
 */
import { RpcCache } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Crypto from "node:crypto"
import * as Lua from "./Lua.ts"

/** @category constants */
export const defaultPrefix = "tollgate:rpc:cache:{rpc-cache}"

const setScript = Redis.script(
  (entry: string, index: string, sizes: string, total: string, value: string, ttlMs: number, maxEntries: number, maxBytes: number) => [
    entry,
    index,
    sizes,
    total,
    value,
    ttlMs,
    maxEntries,
    maxBytes
  ],
  { numberOfKeys: 4, lua: Lua.read("rpc-cache-set") }
)

/**
 * A cache over the `Redis` service, its keys under `prefix` (which holds the hash tag).
 *
 * @category constructors
 */
export const make = (settings: RpcCache.Settings, prefix: string = defaultPrefix) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const write = redis.eval(setScript)
    // One-shot `hash`: every read names its key, and a `Hash` object per read cost three times as much.
    const cacheKey = (key: string) => `${prefix}:${Crypto.hash("sha256", key, "base64url")}`
    const [index, sizes, total] = [`${prefix}#index`, `${prefix}#sizes`, `${prefix}#bytes`]
    return RpcCache.RpcCache.of({
      settings,
      get: (key) =>
        redis.send<string | null>("GET", cacheKey(key)).pipe(
          Effect.map((value) => value ?? undefined),
          Effect.catch((error) => Effect.as(Effect.logWarning("RPC cache read failed", { cause: error.message }), undefined))
        ),
      set: (key, value, ttlMs) => {
        const entry = cacheKey(key)
        const size = Buffer.byteLength(entry) + Buffer.byteLength(value)
        if (size > settings.maxEntryBytes || size > settings.maxBytes) return Effect.void
        return write(entry, index, sizes, total, value, ttlMs, settings.maxEntries, settings.maxBytes).pipe(
          Effect.asVoid,
          Effect.catch((error) => Effect.logWarning("RPC cache write failed", { cause: error.message }))
        )
      }
    })
  })

/** @category layers */
export const layerRedis = (config: RpcCache.Config = {}, prefix?: string): Layer.Layer<RpcCache.RpcCache, never, Redis.Redis> =>
  Layer.effect(RpcCache.RpcCache, make(RpcCache.settings(config), prefix))
