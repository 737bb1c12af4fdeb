/**
 * The Redis layer of `AuthStore`. Per account, under the account id as hash tag (one Cluster
 * slot): the account as JSON, a hash of key records, and one marker per revoked or expiring key,
 * so `keyStatus` is a single MGET on every authenticated request (`keyStanding` sends the abuse
 * guard's PTTL of the key's block with it). A revocation is a Lua script that
 * stamps the record and writes the marker together; any instance's next request reads it. Nonces
 * are claimed with `SET NX PX`, which is atomic: of two instances racing on one SIWX header, one
 * wins.
 *
 * @since 0.1.0
 */
import { type Auth, AuthStore, Errors, type KeyCaps, type SessionRevocations } from "@tollgate/core"
import { Clock, Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"
import * as KeyCapsRedis from "./KeyCapsRedis.ts"
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

/**
 * The marker of a key refused from a time on: its value is that time (ms since the epoch), and the
 * key is refused once it has come. A revocation writes 0 (earlier releases wrote 1, as good); an
 * expiry (`setExpiry`) its time. Absent: the key stands.
 *
 * @category internals
 */
export const revokedKey = (accountId: string, keyId: string) => `${prefix(accountId)}:revoked:${keyId}`
const nonceKey = (key: string) => `tollgate:auth:nonce:{${key}}`

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
}

const encodeAccount = (account: Auth.Account): string =>
  JSON.stringify({ ...account, createdAt: account.createdAt.toISOString() })

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
  const { expiresAt, revokedAt, ...raw } = JSON.parse(json) as KeyJson
  return {
    ...raw,
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
    const send = <A>(command: string, ...args: ReadonlyArray<string>) =>
      redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    const statusOf = ([account, refusedFrom]: ReadonlyArray<string | null>, now: number): AuthStore.KeyStatus => ({
      accountExists: account != null,
      revoked: refusedFrom != null && Number(refusedFrom) <= now
    })
    // Over tollgate's connection (`RedisConnection.layer`), a key's standing and its caller's block
    // are sent together and answered in one wait.
    const connection = Option.getOrUndefined(yield* Effect.serviceOption(RedisConnection))
    const keyStanding = connection === undefined ? undefined : (accountId: string, keyId: string, blockKey: string) =>
      Effect.clockWith((clock) => {
        const now = clock.currentTimeMillisUnsafe()
        const account = accountKey(accountId)
        return Effect.tryPromise({
          try: () =>
            Promise.all([
              connection.sendCommand(["MGET", account, revokedKey(accountId, keyId)], account) as Promise<ReadonlyArray<string | null>>,
              // The guard fails open: a block that cannot be read is none.
              (connection.sendCommand(["PTTL", blockKey], blockKey) as Promise<number>).catch(() => 0)
            ]),
          catch: unavailable
        }).pipe(Effect.map(([standing, blockedMs]): AuthStore.KeyStanding => ({ ...statusOf(standing, now), blockedMs: Math.max(0, blockedMs) })))
      })
    return AuthStore.AuthStore.of({
      insertAccount: (account) =>
        Effect.map(
          send<string | null>("SET", accountKey(account.id), encodeAccount(account), "NX", "GET"),
          (existing) => existing === null ? account : decodeAccount(existing)
        ),
      getAccount: (id) =>
        Effect.map(send<string | null>("GET", accountKey(id)), (json) => Option.map(Option.fromNullishOr(json), decodeAccount)),
      putKey: (record) => Effect.asVoid(send("HSET", keysKey(record.accountId), record.id, encodeKey(record))),
      listKeys: (accountId) =>
        Effect.map(
          send<ReadonlyArray<string>>("HVALS", keysKey(accountId)),
          (values) => values.map(decodeKey).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
        ),
      getKey: (accountId, keyId) =>
        Effect.map(send<string | null>("HGET", keysKey(accountId), keyId), (json) => Option.map(Option.fromNullishOr(json), decodeKey)),
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
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.map(send<ReadonlyArray<string | null>>("MGET", accountKey(accountId), revokedKey(accountId, keyId)), (standing) => statusOf(standing, now))),
      ...(keyStanding === undefined ? {} : { keyStanding }),
      claimNonce: (key, ttlMs) =>
        Effect.map(
          send<string | null>("SET", nonceKey(key), "1", "NX", "PX", String(Math.max(1, Math.ceil(ttlMs)))),
          (reply) => reply === "OK"
        )
    })
  })
)

/**
 * `AuthStore` over the `Redis` service in context, with the keys' spend caps and the portal's
 * signed-out sessions beside it (`KeyCapsRedis.layerRedis`, `SessionRevocationsRedis.layerRedis`):
 * wherever keys are stored, they are.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<
  AuthStore.AuthStore | KeyCaps.KeyCaps | SessionRevocations.SessionRevocations,
  never,
  Redis.Redis
> = Layer.mergeAll(layerAccounts, KeyCapsRedis.layerRedis, SessionRevocationsRedis.layerRedis)
