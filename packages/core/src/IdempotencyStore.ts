/**
 * `Idempotency-Key` records: (principal, key) -> the fingerprint of the body, the state of the
 * request, and once done, the stored response, for 24 hours. A replay with the same body gets the
 * stored response byte for byte and is not charged; a different body is refused; concurrent
 * duplicates reach the upstream once.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/**
 * How long a key lives, counted from its first claim.
 *
 * @category constants
 */
export const TTL_MS = 24 * 60 * 60 * 1000

/**
 * How long a claim may stay in flight before another request with the same key and body may take
 * it over: a process that died mid-request must not lock its key for a day.
 *
 * @category constants
 */
export const LEASE_MS = 2 * 60 * 1000

/**
 * What an `Idempotency-Key` header may be.
 *
 * @category constants
 */
export const KEY_PATTERN = /^[A-Za-z0-9_-]{1,255}$/

/** @category models */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body, base64. */
  readonly body: string
}

/**
 * The outcome of a claim: this request owns the key (`Claimed`), the key is done and its response
 * is replayed (`Replay`), another request with the same key is still running (`InFlight`), or the
 * key was used with a different body (`Mismatch`).
 *
 * @category models
 */
export type Claim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Replay"; readonly response: StoredResponse }
  | { readonly _tag: "InFlight" }
  | { readonly _tag: "Mismatch" }

/** @category services */
export class IdempotencyStore extends Context.Service<IdempotencyStore, {
  readonly claim: (scope: string, key: string, fingerprint: string) => Effect.Effect<Claim, ServiceUnavailable>
  /** Stores the response of a claimed key for its remaining lifetime. */
  readonly complete: (scope: string, key: string, response: StoredResponse) => Effect.Effect<void, ServiceUnavailable>
  /** Frees a claimed key whose request failed before reaching the upstream (the key is not burnt). */
  readonly abandon: (scope: string, key: string) => Effect.Effect<void, ServiceUnavailable>
}>()("@tollgate/core/IdempotencyStore") {}

interface Entry {
  readonly fingerprint: string
  readonly expiresAt: number
  claimedAt: number
  response: StoredResponse | undefined
}

/**
 * The memory store's `complete` and `abandon` as plain functions, for a caller that runs them
 * inside its own synchronous step with other stores' (see `Admission.layerMemory`). Their twin on
 * Redis is `@tollgate/redis` `src/lua/record.lua`.
 *
 * @category store
 */
export class Memory extends Context.Service<Memory, {
  readonly complete: (scope: string, key: string, response: StoredResponse) => void
  readonly abandon: (scope: string, key: string) => void
}>()("@tollgate/core/IdempotencyStore/Memory") {}

/**
 * An in-memory store for one process. Every entry lives the same 24 h, so the map's insertion
 * order is its expiry order and expired entries are dropped from the front.
 *
 * @category constructors
 */
export const makeMemory = (options: { readonly ttlMs?: number; readonly leaseMs?: number } = {}) =>
  Effect.map(makeMemoryContext(options), Context.get(IdempotencyStore))

const makeMemoryContext = (options: { readonly ttlMs?: number; readonly leaseMs?: number }) =>
  Effect.sync(() => {
    const ttlMs = options.ttlMs ?? TTL_MS
    const leaseMs = options.leaseMs ?? LEASE_MS
    const entries = new Map<string, Entry>()
    const id = (scope: string, key: string) => `${scope}\u0000${key}`
    const sweep = (now: number) => {
      for (const [name, entry] of entries) {
        if (entry.expiresAt > now) return
        entries.delete(name)
      }
    }
    const complete = (scope: string, key: string, response: StoredResponse) => {
      const entry = entries.get(id(scope, key))
      if (entry !== undefined && entry.response === undefined) entry.response = response
    }
    const abandon = (scope: string, key: string) => {
      const name = id(scope, key)
      if (entries.get(name)?.response === undefined) entries.delete(name)
    }
    const store = IdempotencyStore.of({
      claim: (scope, key, fingerprint) =>
        Effect.map(Clock.currentTimeMillis, (now): Claim => {
          sweep(now)
          const name = id(scope, key)
          const entry = entries.get(name)
          if (entry === undefined) {
            entries.set(name, { fingerprint, expiresAt: now + ttlMs, claimedAt: now, response: undefined })
            return { _tag: "Claimed" }
          }
          if (entry.fingerprint !== fingerprint) return { _tag: "Mismatch" }
          if (entry.response !== undefined) return { _tag: "Replay", response: entry.response }
          if (now - entry.claimedAt < leaseMs) return { _tag: "InFlight" }
          entry.claimedAt = now
          return { _tag: "Claimed" }
        }),
      complete: (scope, key, response) => Effect.sync(() => complete(scope, key, response)),
      abandon: (scope, key) => Effect.sync(() => abandon(scope, key))
    })
    return Context.make(IdempotencyStore, store).pipe(Context.add(Memory, Memory.of({ complete, abandon })))
  })

/**
 * The in-memory layer: one process, lost on restart.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore | Memory> = Layer.effectContext(makeMemoryContext({}))
