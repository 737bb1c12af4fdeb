/**
 * The Redis layer of `RpcCache`, shared by every worker and instance: one string key per answer,
 * `tollgate:rpc:cache:<sha256 of network, method and parameters>`, written with `SET ... PX` so
 * every entry expires (a final answer after `ttlMs`, one that follows the head after
 * `headTtlMs`). An answer larger than `maxEntryBytes` is not written. The total is bounded by
 * those lifetimes and by the server's `maxmemory` policy (`volatile-lru` evicts these keys first,
 * since every one of them has a lifetime). A Redis that cannot answer is a miss, and a write it
 * refuses is dropped: the cache never fails a call.
 *
 * @since 0.1.0
 */
import { RpcCache } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Crypto from "node:crypto"

const cacheKey = (key: string) => `tollgate:rpc:cache:${Crypto.createHash("sha256").update(key).digest("base64url")}`

/** @category layers */
export const layerRedis = (config: RpcCache.Config = {}): Layer.Layer<RpcCache.RpcCache, never, Redis.Redis> =>
  Layer.effect(
    RpcCache.RpcCache,
    Effect.gen(function*() {
      const redis = yield* Redis.Redis
      const settings = RpcCache.settings(config)
      return RpcCache.RpcCache.of({
        settings,
        get: (key) =>
          redis.send<string | null>("GET", cacheKey(key)).pipe(
            Effect.map((value) => value ?? undefined),
            Effect.catch((error) => Effect.as(Effect.logWarning("RPC cache read failed", { cause: error.message }), undefined))
          ),
        set: (key, value, ttlMs) =>
          Buffer.byteLength(value) > settings.maxEntryBytes
            ? Effect.void
            : redis.send("SET", cacheKey(key), value, "PX", String(ttlMs)).pipe(
              Effect.asVoid,
              Effect.catch((error) => Effect.logWarning("RPC cache write failed", { cause: error.message }))
            )
      })
    })
  )
