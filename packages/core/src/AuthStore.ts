/**
 * Where Auth keeps its state: accounts, key metadata, revocations and used SIWX nonces. The store
 * offers narrow primitives (insert-if-absent, one-round-trip key status, claim-a-nonce-once) and
 * Auth composes them, so the memory layer here and the Redis layer in `@tollgate/redis` share
 * every rule. A revocation written through one instance is what every other instance reads next.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import * as AuditLog from "./AuditLog.ts"
import type { ServiceUnavailable } from "./Errors.ts"
import * as KeyCaps from "./KeyCaps.ts"
import type * as KeyRestrictions from "./KeyRestrictions.ts"
import type { KeyType, Tier } from "./Principal.ts"
import type * as RateLimitPolicy from "./RateLimitPolicy.ts"
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
  /**
   * The signing key that signed the key's secret (`Jwt.VerifyingKey.kid`), so the keys of a leaked
   * signing key can be listed; absent on keys minted before signing keys were named.
   */
  readonly kid?: string
  /** What the key may call; absent: whatever its type allows. */
  readonly restrictions?: KeyRestrictions.Restrictions
  /** Which of its secrets the key accepts, once rerolled (`Auth.rerollKey`); absent: only its first. */
  readonly secrets?: KeySecrets
}

/**
 * The secrets of a rerolled key: the one last issued, and earlier ones still accepted until the end
 * of the grace period their reroll gave them.
 *
 * @category models
 */
export interface KeySecrets {
  /** The number of the secret last issued (`Jwt.Claims.secret`); the first is 0. */
  readonly current: number
  /** Earlier secrets still accepted, each until `until` (ms since the epoch). */
  readonly previous: ReadonlyArray<{ readonly secret: number; readonly until: number }>
}

/**
 * Whether a key whose accepted secrets are `secrets` (absent: only the first) accepts `secret` at `now`.
 *
 * @category predicates
 */
export const acceptsSecret = (secrets: KeySecrets | undefined, secret: number, now: number): boolean =>
  secrets === undefined
    ? secret === 0
    : secret === secrets.current || secrets.previous.some((earlier) => earlier.secret === secret && now < earlier.until)

/**
 * What `authenticate` needs to know about a verified key, in one lookup.
 *
 * @category models
 */
export interface KeyStatus {
  readonly accountExists: boolean
  /** Revoked, or past the expiry the store holds for it (`setExpiry`). */
  readonly revoked: boolean
  /** What the key may call, when it is restricted (`ApiKeyRecord.restrictions`). */
  readonly restrictions?: KeyRestrictions.Restrictions | undefined
  /** Which of the key's secrets are accepted, once it was rerolled (`ApiKeyRecord.secrets`). */
  readonly secrets?: KeySecrets | undefined
  /** The rate-limit overrides the store keeps for the key's account and for the key (`setLimits`). */
  readonly limits?: RateLimitPolicy.StoredOverrides | undefined
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
  /**
   * Stores the key's record; its restrictions and accepted secrets go where `keyStatus` reads them,
   * in the same step. A key already stored keeps its secrets and its revocation as stored (only
   * `rerollKey` and `revokeKey` change them), so a change made from a record read before a reroll
   * or a revocation cannot undo it.
   */
  readonly putKey: (record: ApiKeyRecord) => Effect.Effect<void, ServiceUnavailable>
  /**
   * Stores a rerolled key's record (`putKey`), but only while the stored record's current secret
   * is still `replaced` (a key never rerolled: 0) and the key is not revoked; false otherwise, and
   * nothing is written. Of concurrent rerolls of one key that read the same record, one is stored.
   */
  readonly rerollKey: (record: ApiKeyRecord, replaced: number) => Effect.Effect<boolean, ServiceUnavailable>
  readonly listKeys: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
  readonly getKey: (accountId: string, keyId: string) => Effect.Effect<Option.Option<ApiKeyRecord>, ServiceUnavailable>
  /**
   * Every account's keys: what the operator lists the keys of a signing key from (`Auth.keysSignedBy`).
   * A walk of the whole store, never run for a request.
   */
  readonly allKeys: Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
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
  /**
   * Sets the rate-limit override of the account (`keyId` undefined) or of one of its keys
   * (`undefined`: removed), read by `keyStatus` from the next call on, on every instance.
   */
  readonly setLimits: (
    accountId: string,
    keyId: string | undefined,
    override: RateLimitPolicy.Override | undefined
  ) => Effect.Effect<void, ServiceUnavailable>
  /** The rate-limit overrides of the account and of the key, as `setLimits` left them. */
  readonly limits: (accountId: string, keyId: string | undefined) => Effect.Effect<RateLimitPolicy.StoredOverrides, ServiceUnavailable>
  /** True the first time `key` is claimed within `ttlMs`, false afterwards. Atomic. */
  readonly claimNonce: (key: string, ttlMs: number) => Effect.Effect<boolean, ServiceUnavailable>
}>()("@tollgate/core/AuthStore") {}

const layerAccounts: Layer.Layer<AuthStore> = Layer.sync(AuthStore, () => {
  const accounts = new Map<string, Account>()
  const keys = new Map<string, Map<string, ApiKeyRecord>>()
  const nonces = new Map<string, number>()
  const accountLimits = new Map<string, RateLimitPolicy.Override>()
  const keyLimits = new Map<string, RateLimitPolicy.Override>()
  const limitsOf = (accountId: string, keyId: string | undefined): RateLimitPolicy.StoredOverrides | undefined => {
    const account = accountLimits.get(accountId)
    const key = keyId === undefined ? undefined : keyLimits.get(`${accountId}\n${keyId}`)
    return account === undefined && key === undefined ? undefined : { account, key }
  }
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
      revoked: record?.revokedAt !== undefined || (record?.expiresAt !== undefined && record.expiresAt.getTime() <= now),
      restrictions: record?.restrictions,
      secrets: record?.secrets,
      limits: limitsOf(accountId, keyId)
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
    // Its Redis twin, auth-put-key.lua, writes the record and its policy in one step.
    putKey: (record) =>
      Effect.sync(() => {
        const map = keysOf(record.accountId)
        const stored = map.get(record.id)
        if (stored === undefined) return void map.set(record.id, record)
        const { revokedAt: _revokedAt, secrets: _secrets, ...rest } = record
        map.set(record.id, {
          ...rest,
          ...(stored.secrets === undefined ? {} : { secrets: stored.secrets }),
          ...(stored.revokedAt === undefined ? {} : { revokedAt: stored.revokedAt })
        })
      }),
    // Its Redis twin, auth-reroll.lua, compares and writes in one step.
    rerollKey: (record, replaced) =>
      Effect.sync(() => {
        const stored = keys.get(record.accountId)?.get(record.id)
        if (stored === undefined || stored.revokedAt !== undefined || (stored.secrets?.current ?? 0) !== replaced) return false
        keysOf(record.accountId).set(record.id, record)
        return true
      }),
    listKeys: (accountId) => Effect.sync(() => [...(keys.get(accountId)?.values() ?? [])]),
    getKey: (accountId, keyId) => Effect.sync(() => Option.fromNullishOr(keys.get(accountId)?.get(keyId))),
    allKeys: Effect.sync(() => [...keys.values()].flatMap((map) => [...map.values()])),
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
    setLimits: (accountId, keyId, override) =>
      Effect.sync(() => {
        const [map, id] = keyId === undefined ? [accountLimits, accountId] : [keyLimits, `${accountId}\n${keyId}`]
        if (override === undefined) map.delete(id)
        else map.set(id, override)
      }),
    limits: (accountId, keyId) => Effect.sync(() => limitsOf(accountId, keyId) ?? {}),
    claimNonce: (key, ttlMs) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (nonces.size > 10_000) sweepNonces(now)
        const expiresAt = nonces.get(key)
        if (expiresAt !== undefined && expiresAt > now) return false
        nonces.set(key, now + ttlMs)
        return true
      })
  })
  return store
})

/**
 * A process-local store (dev mode, tests, single-instance deployments), with the keys' spend caps,
 * the portal's sign-outs and the audit log of key management beside it (`KeyCaps.layerMemory`,
 * `SessionRevocations.layerMemory`, `AuditLog.layerMemory`): wherever keys are stored, they are.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<
  AuthStore | KeyCaps.KeyCaps | KeyCaps.Memory | SessionRevocations.SessionRevocations | AuditLog.AuditLog
> = Layer.mergeAll(layerAccounts, KeyCaps.layerMemory, SessionRevocations.layerMemory, AuditLog.layerMemory)
