/**
 * What each chat call did, kept for `GET /generation`: the model that served it, the upstream, the
 * tokens, what it cost, how long it took and whether it was cut short. A record is read only by the
 * account that made the call, so another account's id reads as unknown.
 *
 * **Details**
 *
 * An answer's id is tollgate's own (never the upstream's), so it names one call. A record is
 * written when the call's charge is known (a non-streamed answer before it is sent, a stream when
 * it ends), with the amount the ledger captures, and kept for `RETENTION_MS`. `layerMemory` is for
 * one process (records leave in the order they came once expired, or once there are
 * `MEMORY_RECORDS` of them); `@tollgate/redis` has the shared layer (one string per record,
 * expiring on its own). Both pass the contract in `@tollgate/testkit/contracts/Generations`.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"
import type * as Money from "./Money.ts"

/** @category models */
export interface Generation {
  /** The answer's id. */
  readonly id: string
  readonly accountId: string
  /** The model that served the call (with fallbacks, not always the first one asked for). */
  readonly model: string
  /** The host of the upstream that answered, or `local` for the offline echo model. */
  readonly upstream: string
  readonly promptTokens: number
  readonly completionTokens: number
  /** Prompt tokens the upstream read from its cache, billed at the cached-input price. */
  readonly cachedTokens: number
  /** What the ledger captured for the call. */
  readonly cost: Money.Nano
  /** From the call's start to its answer's end (a stream's last chunk). */
  readonly latencyMs: number
  /** The stream ended before the model finished: the client hung up or the upstream broke off. */
  readonly cutShort: boolean
  readonly createdAt: number
}

/**
 * How long a record is kept.
 *
 * @category constants
 */
export const RETENTION_MS = 7 * 24 * 60 * 60_000

/**
 * The most records the memory layer keeps: a busy process would otherwise hold a week of calls.
 *
 * @category constants
 */
export const MEMORY_RECORDS = 100_000

/** @category services */
export class Generations extends Context.Service<Generations, {
  readonly record: (generation: Generation) => Effect.Effect<void, ServiceUnavailable>
  /** The account's record of that id; `None` for an unknown id and for another account's. */
  readonly get: (accountId: string, id: string) => Effect.Effect<Option.Option<Generation>, ServiceUnavailable>
}>()("@tollgate/core/Generations") {}

/**
 * Records in process memory. They are written in time order, so the expired ones are the oldest
 * and leave from the front of the map as each new one comes.
 *
 * @category constructors
 */
export const makeMemory = Effect.sync(() => {
  const records = new Map<string, Generation>()
  const name = (accountId: string, id: string) => `${accountId}\u0000${id}`
  return Generations.of({
    record: (generation) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        for (const [key, oldest] of records) {
          if (oldest.createdAt + RETENTION_MS > now && records.size < MEMORY_RECORDS) break
          records.delete(key)
        }
        records.set(name(generation.accountId, generation.id), generation)
      }),
    get: (accountId, id) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const found = records.get(name(accountId, id))
        return found !== undefined && found.createdAt + RETENTION_MS > now ? Option.some(found) : Option.none()
      })
  })
})

/** @category layers */
export const layerMemory: Layer.Layer<Generations> = Layer.effect(Generations, makeMemory)
