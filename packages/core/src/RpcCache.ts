/**
 * The RPC proxy's answer cache: JSON-RPC results by key (network, method, parameters), each with
 * a lifetime (`ttlMs`, or none for an answer that cannot change). What may be stored and for how
 * long is `RpcCachePolicy`'s decision; this service only keeps entries, bounded. The memory layer
 * holds at most `maxEntries` entries and `maxBytes` bytes of keys and values, evicting the least
 * recently used; the Redis layer (`RpcCacheRedis`) is shared by every worker and instance and
 * bounded by the same two settings.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema } from "effect"

/**
 * The `rpc.cache` section of the config file.
 *
 * @category schemas
 */
export const Config = Schema.Struct({
  /** `false` turns the cache off; default on. */
  enabled: Schema.optionalKey(Schema.Boolean),
  /** Entries kept at most (memory and Redis, each instance's memory on its own); default 100,000. */
  maxEntries: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** Bytes of keys and values kept at most (memory and Redis); default 64 MiB. */
  maxBytes: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** An answer larger than this is not stored; default 1 MiB. */
  maxEntryBytes: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** Lifetime of an answer that cannot change (Redis keys expire then; memory evicts earlier when full); default 1 day. */
  ttlMs: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  /** Lifetime of an answer that follows the head (`latest`, `eth_blockNumber`); default 0: not cached. */
  headTtlMs: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Percent taken off the credits of an answer served from the cache; default 0. */
  hitDiscountPercent: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(100)))
})

/** @category models */
export type Config = typeof Config.Type

/**
 * The settings with their defaults filled in.
 *
 * @category models
 */
export interface Settings {
  readonly enabled: boolean
  readonly maxEntries: number
  readonly maxBytes: number
  readonly maxEntryBytes: number
  readonly ttlMs: number
  readonly headTtlMs: number
  readonly hitDiscountPercent: number
}

/** @category constructors */
export const settings = (config: Config = {}): Settings => ({
  enabled: config.enabled ?? true,
  maxEntries: config.maxEntries ?? 100_000,
  maxBytes: config.maxBytes ?? 64 * 1024 * 1024,
  maxEntryBytes: config.maxEntryBytes ?? 1024 * 1024,
  ttlMs: config.ttlMs ?? 24 * 60 * 60 * 1000,
  headTtlMs: config.headTtlMs ?? 0,
  hitDiscountPercent: config.hitDiscountPercent ?? 0
})

/** @category services */
export class RpcCache extends Context.Service<RpcCache, {
  readonly settings: Settings
  /** The stored result text, or `undefined`. A store that cannot answer is a miss, never an error. */
  readonly get: (key: string) => Effect.Effect<string | undefined>
  /** Stores a result text for `ttlMs`; a store that cannot take it drops it. */
  readonly set: (key: string, value: string, ttlMs: number) => Effect.Effect<void>
}>()("@tollgate/core/RpcCache") {}

interface Entry {
  readonly value: string
  readonly bytes: number
  readonly expiresAt: number
}

/**
 * A bounded in-process cache: a `Map` kept in recency order (a read moves its entry to the end),
 * so the least recently used entry is the first one.
 *
 * @category constructors
 */
export const makeMemory = (settings: Settings) => {
  const entries = new Map<string, Entry>()
  let bytes = 0
  const drop = (key: string, entry: Entry) => {
    entries.delete(key)
    bytes -= entry.bytes
  }
  return RpcCache.of({
    settings,
    get: (key) =>
      Effect.sync(() => {
        const entry = entries.get(key)
        if (entry === undefined) return undefined
        drop(key, entry)
        if (entry.expiresAt <= Date.now()) return undefined
        entries.set(key, entry)
        bytes += entry.bytes
        return entry.value
      }),
    set: (key, value, ttlMs) =>
      Effect.sync(() => {
        // Strings are UTF-16 in memory; the count is what the cache's bound means, not an exact heap figure.
        const size = 2 * (key.length + value.length)
        if (size > settings.maxEntryBytes || size > settings.maxBytes) return
        const previous = entries.get(key)
        if (previous !== undefined) drop(key, previous)
        entries.set(key, { value, bytes: size, expiresAt: Date.now() + ttlMs })
        bytes += size
        for (const [oldest, entry] of entries) {
          if (entries.size <= settings.maxEntries && bytes <= settings.maxBytes) break
          drop(oldest, entry)
        }
      })
  })
}

/** @category layers */
export const layerMemory = (config: Config = {}): Layer.Layer<RpcCache> => Layer.sync(RpcCache, () => makeMemory(settings(config)))
