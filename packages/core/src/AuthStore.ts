/**
 * Where Auth keeps its state: accounts, key metadata, revocations and used SIWX nonces. The store
 * offers narrow primitives (insert-if-absent, one-round-trip key status, claim-a-nonce-once) and
 * Auth composes them, so the memory layer here and the Redis layer in `@tollgate/redis` share
 * every rule. A revocation written through one instance is what every other instance reads next.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"
import * as KeyCaps from "./KeyCaps.ts"
import type { KeyType, Tier } from "./Principal.ts"
import * as SessionRevocations from "./SessionRevocations.ts"

/** @category models */
export interface Account {
  readonly id: string
  readonly createdAt: Date
  readonly description?: string
}

/**
 * The metadata of a key: everything but the secret, which is shown once at creation.
 *
 * @category models
 */
export interface ApiKeyRecord {
  readonly id: string
  readonly accountId: string
  readonly type: KeyType
  readonly tier: Tier
  readonly description: string
  readonly createdAt: Date
  readonly expiresAt?: Date
  readonly revokedAt?: Date
}

/**
 * What `authenticate` needs to know about a verified key, in one lookup.
 *
 * @category models
 */
export interface KeyStatus {
  readonly accountExists: boolean
  /** Revoked, or past the expiry the store holds for it (`setExpiry`). */
  readonly revoked: boolean
}

/**
 * A key's standing and the abuse guard's block of its caller, read together (`keyStanding`).
 *
 * @category models
 */
export interface KeyStanding extends KeyStatus {
  /** What is left of the caller's block, in milliseconds; 0 when it is not blocked. */
  readonly blockedMs: number
}

/** @category services */
export class AuthStore extends Context.Service<AuthStore, {
  /** Stores the account unless one with its id exists; returns the stored one. */
  readonly insertAccount: (account: Account) => Effect.Effect<Account, ServiceUnavailable>
  readonly getAccount: (id: string) => Effect.Effect<Option.Option<Account>, ServiceUnavailable>
  readonly putKey: (record: ApiKeyRecord) => Effect.Effect<void, ServiceUnavailable>
  readonly listKeys: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
  readonly getKey: (accountId: string, keyId: string) => Effect.Effect<Option.Option<ApiKeyRecord>, ServiceUnavailable>
  /**
   * Sets the key's expiry (`undefined`: none), enforced by `keyStatus` from the next request on;
   * false when the account has no such key. A revoked key stays revoked.
   */
  readonly setExpiry: (accountId: string, keyId: string, expiresAt: Date | undefined) => Effect.Effect<boolean, ServiceUnavailable>
  /** Marks the key revoked at `at`; false when the account has no such key. */
  readonly revokeKey: (accountId: string, keyId: string, at: Date) => Effect.Effect<boolean, ServiceUnavailable>
  readonly keyStatus: (accountId: string, keyId: string) => Effect.Effect<KeyStatus, ServiceUnavailable>
  /**
   * `keyStatus` and the abuse guard's block under `blockKey` (`AbuseGuard.blockKey`) in one round
   * trip, for a store that can read the guard's blocks (both on Redis): a key's whole check costs
   * one wait instead of two. A block that cannot be read counts as none, as the guard fails open.
   */
  readonly keyStanding?: (accountId: string, keyId: string, blockKey: string) => Effect.Effect<KeyStanding, ServiceUnavailable>
  /** True the first time `key` is claimed within `ttlMs`, false afterwards. Atomic. */
  readonly claimNonce: (key: string, ttlMs: number) => Effect.Effect<boolean, ServiceUnavailable>
}>()("@tollgate/core/AuthStore") {}

/**
 * The memory store's `keyStatus` as a plain function, for a caller that checks a key's standing
 * inside its own synchronous step with other stores' (see `Admission.layerMemory`).
 *
 * @category store
 */
export class Memory extends Context.Service<Memory, {
  readonly keyStatus: (accountId: string, keyId: string, now: number) => KeyStatus
}>()("@tollgate/core/AuthStore/Memory") {}

const layerAccounts: Layer.Layer<AuthStore | Memory> = Layer.syncContext(() => {
  const accounts = new Map<string, Account>()
  const keys = new Map<string, Map<string, ApiKeyRecord>>()
  const nonces = new Map<string, number>()
  const keysOf = (accountId: string) => {
    let map = keys.get(accountId)
    if (map === undefined) {
      map = new Map()
      keys.set(accountId, map)
    }
    return map
  }
  const sweepNonces = (now: number) => {
    for (const [key, expiresAt] of nonces) if (expiresAt <= now) nonces.delete(key)
  }
  const keyStatus = (accountId: string, keyId: string, now: number): KeyStatus => {
    const record = keys.get(accountId)?.get(keyId)
    return {
      accountExists: accounts.has(accountId),
      revoked: record?.revokedAt !== undefined || (record?.expiresAt !== undefined && record.expiresAt.getTime() <= now)
    }
  }
  const store = AuthStore.of({
    insertAccount: (account) =>
      Effect.sync(() => {
        const existing = accounts.get(account.id)
        if (existing !== undefined) return existing
        accounts.set(account.id, account)
        return account
      }),
    getAccount: (id) => Effect.sync(() => Option.fromNullishOr(accounts.get(id))),
    putKey: (record) => Effect.sync(() => void keysOf(record.accountId).set(record.id, record)),
    listKeys: (accountId) => Effect.sync(() => [...(keys.get(accountId)?.values() ?? [])]),
    getKey: (accountId, keyId) => Effect.sync(() => Option.fromNullishOr(keys.get(accountId)?.get(keyId))),
    setExpiry: (accountId, keyId, expiresAt) =>
      Effect.sync(() => {
        const map = keys.get(accountId)
        const record = map?.get(keyId)
        if (map === undefined || record === undefined) return false
        const { expiresAt: _, ...rest } = record
        map.set(keyId, expiresAt === undefined ? rest : { ...rest, expiresAt })
        return true
      }),
    revokeKey: (accountId, keyId, at) =>
      Effect.sync(() => {
        const map = keys.get(accountId)
        const record = map?.get(keyId)
        if (map === undefined || record === undefined) return false
        if (record.revokedAt === undefined) map.set(keyId, { ...record, revokedAt: at })
        return true
      }),
    keyStatus: (accountId, keyId) => Effect.map(Clock.currentTimeMillis, (now) => keyStatus(accountId, keyId, now)),
    claimNonce: (key, ttlMs) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (nonces.size > 10_000) sweepNonces(now)
        const expiresAt = nonces.get(key)
        if (expiresAt !== undefined && expiresAt > now) return false
        nonces.set(key, now + ttlMs)
        return true
      })
  })
  return Context.make(AuthStore, store).pipe(Context.add(Memory, Memory.of({ keyStatus })))
})

/**
 * A process-local store (dev mode, tests, single-instance deployments), with its key lookup as
 * `Memory`, and the keys' spend caps and the portal's signed-out sessions beside it
 * (`KeyCaps.layerMemory`, `SessionRevocations.layerMemory`): wherever keys are stored, they are.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<
  AuthStore | Memory | KeyCaps.KeyCaps | KeyCaps.Memory | SessionRevocations.SessionRevocations
> = Layer.mergeAll(layerAccounts, KeyCaps.layerMemory, SessionRevocations.layerMemory)
