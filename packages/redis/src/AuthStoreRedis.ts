/**
 * The Redis layer of `AuthStore`: accounts, keys, revocations and SIWX nonces shared by every
 * instance. `keyStatus` is a single `MGET` on every authenticated request; a revocation is seen by
 * any instance's next request; of two instances racing on one SIWX nonce, one wins.
 *
 * **Details**
 *
 * Per account, under the account id as hash tag (one Cluster slot): the account as JSON, a hash of
 * key records, one marker per revoked or expiring key, and one policy per restricted or rerolled
 * key (its restrictions and accepted secrets as JSON). `keyStanding` sends the abuse guard's `PTTL`
 * of the key's block with the `MGET`. A record and its policy are written by one script
 * (`lua/auth-put-key.lua`); a reroll's, by one that first checks the record still has the secret it
 * replaced (`lua/auth-reroll.lua`). A revocation is a script that stamps the record and writes the
 * marker together (`lua/auth-revoke.lua`). Nonces are claimed with `SET NX PX`, which is atomic.
 *
 * @since 0.1.0
 */
import {
  type AuditLog,
  type Auth,
  AuthStore,
  Errors,
  type KeyCaps,
  type KeyRestrictions,
  type RateLimitPolicy,
  type SessionRevocations
} from "@tollgate/core"
import { Clock, Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"
import * as AuditLogRedis from "./AuditLogRedis.ts"
import * as KeyCapsRedis from "./KeyCapsRedis.ts"
import * as Lua from "./Lua.ts"
import { RedisConnection } from "./RedisConnection.ts"
import * as SessionRevocationsRedis from "./SessionRevocationsRedis.ts"

const prefix = (accountId: string) => `tollgate:auth:{${accountId}}`

/**
 * The key of an account's record: it exists while the account does.
 *
 * @category internals
 */
export const accountKey = (accountId: string) => `${prefix(accountId)}:account`
const keysKey = (accountId: string) => `${prefix(accountId)}:keys`
/** The pattern of every account's hash of key records (`allKeys`). */
const ALL_KEYS = "tollgate:auth:{*}:keys"

/**
 * The marker of a key refused from a time on: its value is that time (ms since the epoch), and the
 * key is refused once it has come. A revocation writes 0 (earlier releases wrote 1, as good); an
 * expiry (`setExpiry`) its time. Absent: the key stands.
 *
 * @category internals
 */
export const revokedKey = (accountId: string, keyId: string) => `${prefix(accountId)}:revoked:${keyId}`
const nonceKey = (key: string) => `tollgate:auth:nonce:{${key}}`

/**
 * The policy of a restricted or rerolled key: `{"restrictions":…,"secrets":…}` as `keyStatus`
 * reads it. Absent: neither.
 *
 * @category internals
 */
export const policyKey = (accountId: string, keyId: string) => `${prefix(accountId)}:policy:${keyId}`

/**
 * The rate-limit override an operator set for the account (no key id) or one of its keys, as JSON
 * (`setLimits`). Absent: none.
 *
 * @category internals
 */
export const limitsKey = (accountId: string, keyId?: string) => `${prefix(accountId)}:limits${keyId === undefined ? "" : `:${keyId}`}`

const putKeyScript = Redis.script(
  (keys: string, policy: string, keyId: string, record: string, policyJson: string) => [keys, policy, keyId, record, policyJson],
  {
    numberOfKeys: 2,
    lua: Lua.read("auth-put-key")
  }
).withReturnType<number>()

const rerollScript = Redis.script(
  (
    keys: string,
    policy: string,
    keyId: string,
    record: string,
    policyJson: string,
    replaced: string
  ) => [keys, policy, keyId, record, policyJson, replaced],
  {
    numberOfKeys: 2,
    lua: Lua.read("auth-reroll")
  }
).withReturnType<number>()

interface PolicyJson {
  readonly restrictions?: KeyRestrictions.Restrictions | undefined
  readonly secrets?: Auth.KeySecrets | undefined
}

const encodePolicy = (record: Auth.ApiKeyRecord): string =>
  record.restrictions === undefined && record.secrets === undefined
    ? ""
    : JSON.stringify({ restrictions: record.restrictions, secrets: record.secrets } satisfies PolicyJson)

/** What Lua's cjson writes for an empty list is `{}`: read back as the empty list it was. */
const secretsOf = (secrets: Auth.KeySecrets | undefined): Auth.KeySecrets | undefined =>
  secrets === undefined ? undefined : { current: secrets.current, previous: Array.isArray(secrets.previous) ? secrets.previous : [] }

const revokeScript = Redis.script(
  (keys: string, marker: string, keyId: string, revokedAt: string) => [keys, marker, keyId, revokedAt],
  {
    numberOfKeys: 2,
    lua: Lua.read("auth-revoke")
  }
).withReturnType<number>()

const expiryScript = Redis.script(
  (keys: string, marker: string, keyId: string, expiresAt: string, fromMs: string) => [keys, marker, keyId, expiresAt, fromMs],
  {
    numberOfKeys: 2,
    lua: Lua.read("auth-expiry")
  }
).withReturnType<number>()

const unavailable = () => Errors.storeUnavailable("The authentication store")

interface AccountJson {
  readonly id: string
  readonly createdAt: string
  readonly description?: string
}

interface KeyJson {
  readonly id: string
  readonly accountId: string
  readonly type: Auth.ApiKeyRecord["type"]
  readonly tier: Auth.ApiKeyRecord["tier"]
  readonly description: string
  readonly createdAt: string
  readonly expiresAt?: string
  readonly revokedAt?: string
  readonly kid?: string
  readonly restrictions?: KeyRestrictions.Restrictions
  readonly secrets?: Auth.KeySecrets
}

const encodeAccount = (account: Auth.Account): string => JSON.stringify({ ...account, createdAt: account.createdAt.toISOString() })

const decodeAccount = (json: string): Auth.Account => {
  const raw = JSON.parse(json) as AccountJson
  return { ...raw, createdAt: new Date(raw.createdAt) }
}

const encodeKey = (record: Auth.ApiKeyRecord): string =>
  JSON.stringify({
    ...record,
    createdAt: record.createdAt.toISOString(),
    expiresAt: record.expiresAt?.toISOString(),
    revokedAt: record.revokedAt?.toISOString()
  })

const decodeKey = (json: string): Auth.ApiKeyRecord => {
  const { expiresAt, revokedAt, secrets, ...raw } = JSON.parse(json) as KeyJson
  const accepted = secretsOf(secrets)
  return {
    ...raw,
    ...(accepted === undefined ? {} : { secrets: accepted }),
    createdAt: new Date(raw.createdAt),
    ...(expiresAt === undefined ? {} : { expiresAt: new Date(expiresAt) }),
    ...(revokedAt === undefined ? {} : { revokedAt: new Date(revokedAt) })
  }
}

const layerAccounts: Layer.Layer<AuthStore.AuthStore, never, Redis.Redis> = Layer.effect(
  AuthStore.AuthStore,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const revoke = redis.eval(revokeScript)
    const expire = redis.eval(expiryScript)
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    const putKey = redis.eval(putKeyScript)
    const reroll = redis.eval(rerollScript)
    const overridesOf = (account: string | null | undefined, key: string | null | undefined): RateLimitPolicy.StoredOverrides | undefined =>
      account == null && key == null
        ? undefined
        : {
          account: account == null ? undefined : JSON.parse(account) as RateLimitPolicy.Override,
          key: key == null ? undefined : JSON.parse(key) as RateLimitPolicy.Override
        }
    // The account, the key's refusal marker and policy, and the account's and key's rate-limit
    // overrides: one MGET of keys in the account's slot.
    const standingKeys = (
      accountId: string,
      keyId: string
    ) => [
      accountKey(accountId),
      revokedKey(accountId, keyId),
      policyKey(accountId, keyId),
      limitsKey(accountId),
      limitsKey(accountId, keyId)
    ]
    const statusOf = (
      [account, refusedFrom, policy, accountLimits, keyLimits]: ReadonlyArray<string | null>,
      now: number
    ): AuthStore.KeyStatus => {
      const status = { accountExists: account != null, revoked: refusedFrom != null && Number(refusedFrom) <= now }
      const limits = overridesOf(accountLimits, keyLimits)
      if (policy == null) return limits === undefined ? status : { ...status, limits }
      const { restrictions, secrets } = JSON.parse(policy) as PolicyJson
      return { ...status, restrictions, secrets: secretsOf(secrets), limits }
    }
    // Over tollgate's connection (`RedisConnection.layer`), a key's standing and its caller's block
    // are sent together and answered in one wait.
    const connection = Option.getOrUndefined(yield* Effect.serviceOption(RedisConnection))
    const keyStanding = connection === undefined ?
      undefined :
      (accountId: string, keyId: string, blockKey: string) =>
        Effect.clockWith((clock) => {
          const now = clock.currentTimeMillisUnsafe()
          const account = accountKey(accountId)
          return Effect.tryPromise({
            try: () =>
              Promise.all([
                connection.sendCommand(["MGET", ...standingKeys(accountId, keyId)], account) as Promise<ReadonlyArray<string | null>>,
                // The guard fails open: a block that cannot be read is none.
                (connection.sendCommand(["PTTL", blockKey], blockKey) as Promise<number>).catch(() => 0)
              ]),
            catch: unavailable
          }).pipe(
            Effect.map(([standing, blockedMs]): AuthStore.KeyStanding => ({
              ...statusOf(standing, now),
              blockedMs: Math.max(0, blockedMs)
            }))
          )
        })
    return AuthStore.AuthStore.of({
      insertAccount: (account) =>
        Effect.map(
          send<string | null>("SET", accountKey(account.id), encodeAccount(account), "NX", "GET"),
          (existing) => existing === null ? account : decodeAccount(existing)
        ),
      getAccount: (id) =>
        Effect.map(send<string | null>("GET", accountKey(id)), (json) => Option.map(Option.fromNullishOr(json), decodeAccount)),
      putKey: (record) =>
        putKey(keysKey(record.accountId), policyKey(record.accountId, record.id), record.id, encodeKey(record), encodePolicy(record)).pipe(
          Effect.mapError(unavailable),
          Effect.asVoid
        ),
      rerollKey: (record, replaced) =>
        Effect.map(
          reroll(
            keysKey(record.accountId),
            policyKey(record.accountId, record.id),
            record.id,
            encodeKey(record),
            encodePolicy(record),
            String(replaced)
          ).pipe(
            Effect.mapError(unavailable)
          ),
          (stored) => stored === 1
        ),
      listKeys: (accountId) =>
        Effect.map(
          send<ReadonlyArray<string>>("HVALS", keysKey(accountId)),
          (values) => values.map(decodeKey).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
        ),
      getKey: (accountId, keyId) =>
        Effect.map(send<string | null>("HGET", keysKey(accountId), keyId), (json) => Option.map(Option.fromNullishOr(json), decodeKey)),
      allKeys: Effect.gen(function*() {
        const records: Array<Auth.ApiKeyRecord> = []
        let cursor = "0"
        do {
          const [next, found] = yield* send<readonly [string, ReadonlyArray<string>]>("SCAN", cursor, "MATCH", ALL_KEYS, "COUNT", "1000")
          for (const key of found) {
            for (const json of yield* send<ReadonlyArray<string>>("HVALS", key)) records.push(decodeKey(json))
          }
          cursor = next
        } while (cursor !== "0")
        return records
      }),
      setExpiry: (accountId, keyId, expiresAt) =>
        Effect.map(
          expire(
            keysKey(accountId),
            revokedKey(accountId, keyId),
            keyId,
            expiresAt?.toISOString() ?? "",
            expiresAt === undefined ? "" : String(expiresAt.getTime())
          ).pipe(Effect.mapError(unavailable)),
          (found) => found === 1
        ),
      revokeKey: (accountId, keyId, at) =>
        Effect.map(
          revoke(keysKey(accountId), revokedKey(accountId, keyId), keyId, at.toISOString()).pipe(Effect.mapError(unavailable)),
          (found) => found === 1
        ),
      keyStatus: (accountId, keyId) =>
        Effect.flatMap(
          Clock.currentTimeMillis,
          (now) =>
            Effect.map(send<ReadonlyArray<string | null>>("MGET", ...standingKeys(accountId, keyId)), (standing) => statusOf(standing, now))
        ),
      ...(keyStanding === undefined ? {} : { keyStanding }),
      setLimits: (accountId, keyId, override) =>
        Effect.asVoid(
          override === undefined
            ? send("DEL", limitsKey(accountId, keyId))
            : send("SET", limitsKey(accountId, keyId), JSON.stringify(override))
        ),
      limits: (accountId, keyId) =>
        Effect.map(
          keyId === undefined
            ? Effect.map(send<string | null>("GET", limitsKey(accountId)), (account) => [account, null] as const)
            : send<readonly [string | null, string | null]>("MGET", limitsKey(accountId), limitsKey(accountId, keyId)),
          ([account, key]) => overridesOf(account, key) ?? {}
        ),
      claimNonce: (key, ttlMs) =>
        Effect.map(
          send<string | null>("SET", nonceKey(key), "1", "NX", "PX", String(Math.max(1, Math.ceil(ttlMs)))),
          (reply) => reply === "OK"
        )
    })
  })
)

/**
 * `AuthStore` over the `Redis` service in context, with the keys' spend caps, the portal's
 * signed-out sessions and the audit log of key management beside it (`KeyCapsRedis.layerRedis`,
 * `SessionRevocationsRedis.layerRedis`, `AuditLogRedis.layerRedis`): wherever keys are stored, they are.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<
  AuthStore.AuthStore | KeyCaps.KeyCaps | SessionRevocations.SessionRevocations | AuditLog.AuditLog,
  never,
  Redis.Redis
> = Layer.mergeAll(layerAccounts, KeyCapsRedis.layerRedis, SessionRevocationsRedis.layerRedis, AuditLogRedis.layerRedis)
