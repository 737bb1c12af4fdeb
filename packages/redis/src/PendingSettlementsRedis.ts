/**
 * The Redis layer of `PendingSettlements`: one string per pending payment holding the transaction
 * sent for it, set with its TTL in one `SET ... PX`, so a retry that reaches another instance or
 * worker collects the transaction the first one sent. The key is the SHA-256 of the SDK's key (a
 * payment signature, kilobytes for an EIP-6492 wallet's) inside a hash tag: one slot per entry
 * on a Redis Cluster, and a bounded key length.
 *
 * It sends through `RedisConnection`'s raw sender: the SDK calls the store with promises, which is
 * what that sender returns.
 *
 * @since 0.1.0
 */
import { PendingSettlements } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { RedisConnection } from "./RedisConnection.ts"

/** @category constants */
export const defaultPrefix = "tollgate:pending"

/**
 * The key of the SDK's key `key`.
 *
 * @category internals
 */
export const entryKey = (prefix: string, key: string) => `${prefix}:{${createHash("sha256").update(key).digest("hex")}}`

/**
 * A store over `RedisConnection`, its keys under `prefix`, each kept `ttlMs` after it was last set.
 *
 * @category constructors
 */
export const make = (options: { readonly prefix?: string; readonly ttlMs?: number } = {}) =>
  Effect.gen(function*() {
    const { sendCommand } = yield* RedisConnection
    const prefix = options.prefix ?? defaultPrefix
    const ttlMs = String(options.ttlMs ?? PendingSettlements.TTL_MS)
    const send = (args: Array<string>) => sendCommand(args, args[1])
    return PendingSettlements.PendingSettlements.of({
      get: async (key) => {
        const txHash = await send(["GET", entryKey(prefix, key)])
        return typeof txHash === "string" ? txHash : undefined
      },
      set: async (key, txHash) => {
        await send(["SET", entryKey(prefix, key), txHash, "PX", ttlMs])
      },
      delete: async (key) => {
        await send(["DEL", entryKey(prefix, key)])
      }
    })
  })

/**
 * The Redis layer, shared by every instance pointed at the same Redis.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<PendingSettlements.PendingSettlements, never, RedisConnection> = Layer.effect(
  PendingSettlements.PendingSettlements,
  make()
)
