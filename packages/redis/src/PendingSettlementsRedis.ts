/**
 * The Redis layer of `PendingSettlements`: one string per pending payment holding the transaction
 * sent for it, so a retry that reaches another instance or worker collects the transaction the
 * first one sent.
 *
 * **Details**
 *
 * Each entry is set with its TTL in one `SET ... PX`. The key is the SHA-256 of the SDK's key (a
 * payment signature, kilobytes for an EIP-6492 wallet's) inside a hash tag: one slot per entry on a
 * Redis Cluster, and a bounded key length.
 *
 * It sends through `RedisConnection`'s raw sender: the SDK calls the store with promises, which is
 * what that sender returns. With `replicaAcknowledgment` (`TOLLGATE_REDIS_WAIT_REPLICAS`), an entry
 * is answered as set once that many replicas have it, as a ledger credit is: losing it in a
 * failover costs the same, a payment whose money moved and that is never credited.
 *
 * @since 0.1.0
 */
import { PendingSettlements } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { RedisConnection, type ReplicaAcknowledgment, waitForReplicas } from "./RedisConnection.ts"

/** @category constants */
export const defaultPrefix = "tollgate:pending"

/**
 * The key of the SDK's key `key`.
 *
 * @category internals
 */
export const entryKey = (prefix: string, key: string) => `${prefix}:{${createHash("sha256").update(key).digest("hex")}}`

/** @category models */
export interface Options {
  readonly prefix?: string
  readonly ttlMs?: number
  readonly replicaAcknowledgment?: ReplicaAcknowledgment | undefined
}

/**
 * A store over `RedisConnection`, its keys under `prefix`, each kept `ttlMs` after it was last set.
 *
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const connection = yield* RedisConnection
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const prefix = options.prefix ?? defaultPrefix
    const ttlMs = String(options.ttlMs ?? PendingSettlements.TTL_MS)
    const acknowledgment = options.replicaAcknowledgment
    const send = (args: Array<string>) => connection.sendCommand(args, args[1])
    // Like a credit's, the entry stands on the master when the replicas do not confirm it in time:
    // the wait is logged, never taken for a failed write.
    const replicated = async (name: string) => {
      if (acknowledgment === undefined) return
      const acknowledged = await waitForReplicas(connection, name, acknowledgment).catch(() => 0)
      if (acknowledged < acknowledgment.replicas) {
        runFork(Effect.logWarning(
          `a pending settlement is on the Redis master but on ${acknowledged} of ${acknowledgment.replicas} replicas after ${acknowledgment.timeoutMs} ms`
        ))
      }
    }
    return PendingSettlements.PendingSettlements.of({
      get: async (key) => {
        const txHash = await send(["GET", entryKey(prefix, key)])
        return typeof txHash === "string" ? txHash : undefined
      },
      set: async (key, txHash) => {
        const name = entryKey(prefix, key)
        await send(["SET", name, txHash, "PX", ttlMs])
        await replicated(name)
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
export const layerRedis = (options: Options = {}): Layer.Layer<PendingSettlements.PendingSettlements, never, RedisConnection> =>
  Layer.effect(PendingSettlements.PendingSettlements, make(options))
