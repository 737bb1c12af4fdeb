/**
 * Accounts and API keys as operators and customers manage them: accounts made, keys minted (signed
 * with the current signing key), listed, revoked, rerolled, given an expiry, restrictions or a
 * description, and the rate-limit overrides kept in the store. Part of the `Auth` service, which
 * adds authentication; written apart because none of it is on a paid call's path.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Option } from "effect"
import { isAddress } from "viem"
import { type ApiKeyRecord, AuthStore, type KeySecrets } from "../AuthStore.ts"
import { Conflict, InvalidRequest, NotFound } from "../Errors.ts"
import * as Jwt from "../Jwt.ts"
import * as KeyRestrictions from "../KeyRestrictions.ts"
import { isWalletAccountId, type KeyType, type Tier, walletAccountId } from "../Principal.ts"
import type * as RateLimitPolicy from "../RateLimitPolicy.ts"
import * as Siwx from "../Siwx.ts"

/** @category models */
export interface CreateKey {
  readonly accountId: string
  readonly type: KeyType
  readonly tier?: Tier
  readonly description: string
  readonly expiresAt?: Date
  readonly restrictions?: KeyRestrictions.Restrictions
}

const ACCOUNT_ID = /^[A-Za-z0-9_.:-]{1,128}$/

const randomId = (prefix: string) => `${prefix}_${Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString("hex")}`

/** The account id a wallet's calls run as (`walletAccountId`) for the address in `accountId`; `undefined` when it names none. */
const canonicalWalletAccountId = (accountId: string): string | undefined => {
  const [, family, address = "", ...rest] = accountId.split(":")
  if (rest.length > 0) return undefined
  if (family === "evm" && isAddress(address, { strict: false })) return walletAccountId("evm", address)
  if (family === "solana" && Siwx.SOLANA_ADDRESS.test(address)) return walletAccountId("solana", address)
  return undefined
}

/**
 * The account and key operations of `Auth` over the `AuthStore` in context, minting with
 * `signingKey`.
 *
 * @category constructors
 */
export const make = Effect.fn("KeyManagement.make")(function*(signingKey: Jwt.SigningKey) {
  const store = yield* AuthStore
  const now = Clock.currentTimeMillis

  const createAccount = Effect.fn("Auth.createAccount")(function*(
    input: { readonly id?: string; readonly createdAt?: Date; readonly description?: string } = {}
  ) {
    if (input.id !== undefined && !ACCOUNT_ID.test(input.id)) {
      return yield* new InvalidRequest({ message: "Account ids are 1-128 characters of A-Z a-z 0-9 _ . : -" })
    }
    const createdAt = input.createdAt ?? new Date(yield* now)
    return yield* store.insertAccount({
      id: input.id ?? randomId("acct"),
      createdAt,
      ...(input.description === undefined ? {} : { description: input.description })
    })
  })

  const createKey = Effect.fn("Auth.createKey")(function*(input: CreateKey) {
    const at = yield* now
    if (Option.isNone(yield* store.getAccount(input.accountId))) {
      if (!isWalletAccountId(input.accountId)) return yield* new InvalidRequest({ message: "Unknown account" })
      // Sign-in stores nothing for a wallet (see `authenticate`): its account is recorded when its
      // first key is made, which the caller allows only to a wallet that holds credit.
      yield* store.insertAccount({ id: input.accountId, createdAt: new Date(at) })
    }
    if (input.expiresAt !== undefined && input.expiresAt.getTime() <= at) {
      return yield* new InvalidRequest({ message: "expiresAt must be in the future" })
    }
    const record: ApiKeyRecord = {
      id: randomId("key"),
      accountId: input.accountId,
      type: input.type,
      tier: input.tier ?? "default",
      description: input.description,
      createdAt: new Date(at),
      kid: signingKey.kid,
      ...(input.expiresAt === undefined ? {} : { expiresAt: input.expiresAt }),
      ...(KeyRestrictions.isRestricted(input.restrictions) ? { restrictions: input.restrictions } : {})
    }
    // The expiry is the store's, not the signature's, so that it can be changed or removed later.
    const key = yield* Jwt.sign(signingKey, {
      accountId: record.accountId,
      keyId: record.id,
      type: record.type,
      tier: record.tier,
      issuedAt: record.createdAt
    })
    yield* store.putKey(record)
    if (record.expiresAt !== undefined) yield* store.setExpiry(record.accountId, record.id, record.expiresAt)
    return { key, record }
  })

  const revokeKey = Effect.fn("Auth.revokeKey")(function*(accountId: string, keyId: string) {
    const found = yield* store.revokeKey(accountId, keyId, new Date(yield* now))
    if (!found) return yield* new NotFound({ message: "No API key with this id" })
  })

  const getKey = (accountId: string, keyId: string) =>
    Effect.flatMap(
      store.getKey(accountId, keyId),
      (found) => Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(new NotFound({ message: "No API key with this id" }))
    )

  const setKeyExpiry = Effect.fn("Auth.setKeyExpiry")(function*(accountId: string, keyId: string, expiresAt: Date | undefined) {
    if (expiresAt !== undefined && expiresAt.getTime() <= (yield* now)) {
      return yield* new InvalidRequest({ message: "expiresAt must be in the future" })
    }
    yield* getKey(accountId, keyId)
    yield* store.setExpiry(accountId, keyId, expiresAt)
    return yield* getKey(accountId, keyId)
  })

  const restrictKey = Effect.fn("Auth.restrictKey")(
    function*(accountId: string, keyId: string, restrictions: KeyRestrictions.Restrictions | undefined) {
      const { restrictions: _, ...rest } = yield* getKey(accountId, keyId)
      const record: ApiKeyRecord = KeyRestrictions.isRestricted(restrictions) ? { ...rest, restrictions } : rest
      yield* store.putKey(record)
      return record
    }
  )

  const rerollKey = Effect.fn("Auth.rerollKey")(function*(accountId: string, keyId: string, graceMs: number) {
    const found = yield* getKey(accountId, keyId)
    if (found.revokedAt !== undefined) return yield* new InvalidRequest({ message: "A revoked API key cannot be rerolled" })
    if (!Number.isSafeInteger(graceMs) || graceMs < 0)
      return yield* new InvalidRequest({ message: "The grace period must be a whole number of milliseconds, 0 or more" })
    const at = yield* now
    const current = found.secrets?.current ?? 0
    // Earlier secrets whose grace has ended are forgotten; the one replaced now is kept for its grace.
    const previous = (found.secrets?.previous ?? []).filter((earlier) => earlier.until > at)
    const secrets: KeySecrets = {
      current: current + 1,
      previous: graceMs === 0 ? previous : [...previous, { secret: current, until: at + graceMs }]
    }
    const record: ApiKeyRecord = { ...found, kid: signingKey.kid, secrets }
    const key = yield* Jwt.sign(signingKey, {
      accountId,
      keyId,
      type: record.type,
      tier: record.tier,
      issuedAt: new Date(at),
      secret: secrets.current
    })
    // Stored only if no other reroll (or revocation) came between: two rerolls that read the same
    // record would issue the same secret, and the grace asked by one would be lost by the other.
    if (!(yield* store.rerollKey(record, current))) {
      if ((yield* getKey(accountId, keyId)).revokedAt !== undefined)
        return yield* new InvalidRequest({ message: "A revoked API key cannot be rerolled" })
      return yield* new Conflict({
        message: "This API key was rerolled by another request at the same time; its secret from that reroll stands"
      })
    }
    return { key, record }
  })

  const setLimits = Effect.fn("Auth.setLimits")(
    function*(accountId: string, keyId: string | undefined, override: RateLimitPolicy.Override | undefined) {
      if (keyId !== undefined) yield* getKey(accountId, keyId)
      else if (isWalletAccountId(accountId)) {
        // The id the pipeline gives the wallet's calls, or the override would govern none of them.
        if (canonicalWalletAccountId(accountId) !== accountId) {
          return yield* new InvalidRequest({
            message: "A wallet's account id is wallet:evm:<address, lower-cased> or wallet:solana:<address>"
          })
        }
      } else if (Option.isNone(yield* store.getAccount(accountId))) return yield* new NotFound({ message: "No account with this id" })
      yield* store.setLimits(accountId, keyId, override)
    }
  )

  const describeKey = Effect.fn("Auth.describeKey")(function*(accountId: string, keyId: string, description: string) {
    const record = { ...(yield* getKey(accountId, keyId)), description }
    yield* store.putKey(record)
    return record
  })

  return {
    createAccount,
    getAccount: store.getAccount,
    createKey,
    listKeys: store.listKeys,
    revokeKey,
    getKey,
    setKeyExpiry,
    restrictKey,
    rerollKey,
    setLimits,
    storedLimits: store.limits,
    describeKey,
    keysSignedBy: (kid: string | undefined) => Effect.map(store.allKeys, (records) => records.filter((record) => record.kid === kid))
  }
})
