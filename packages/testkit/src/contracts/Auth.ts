/**
 * The contract of `Auth`: keys are JWTs checked against the store; revocation and nonce use are
 * shared. Written once; `@tollgate/core` runs it against the memory store and `@tollgate/redis`
 * against Redis and Redis Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Auth, AuthStore, Jwt, Principal } from "@tollgate/core"
import { Effect, Layer, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import * as Contract from "../Contract.ts"

/**
 * The key the backends' `Auth` signs with (`authLayer`).
 *
 * @category fixtures
 */
export const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
/** @category fixtures */
export const origin = "http://localhost:8787"

/**
 * `Auth` over a store, as every backend of `run` is built.
 *
 * @category fixtures
 */
export const authLayer = (store: Layer.Layer<AuthStore.AuthStore>) =>
  Auth.layer({ signingKey, publicOrigin: origin }).pipe(Layer.provideMerge(store))

/** The Redis client schedules on the clock, so contract tests run on the live one. */
const live = <A, E, R>(body: Effect.Effect<A, E, R>) => TestClock.withLive(body)

const siwxHeader = async (at: number, nonce: string, key = generatePrivateKey()) => {
  const account = privateKeyToAccount(key)
  const message = createSiweMessage({
    domain: "localhost:8787",
    address: account.address,
    uri: `${origin}/`,
    version: "1",
    chainId: 8453,
    nonce,
    issuedAt: new Date(at),
    expirationTime: new Date(at + 600_000),
    statement: "Sign in to use your prepaid credits."
  })
  const signature = await account.signMessage({ message })
  const payload = { address: account.address, message, signature, timestamp: at, chainId: 8453 }
  return { address: account.address, header: Buffer.from(JSON.stringify(payload)).toString("base64") }
}

const tagOf = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.result(effect), (result) => Result.isFailure(result) ? result.failure._tag : "success")

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<Auth.Auth | AuthStore.AuthStore, E>>) =>
  Contract.contract(
    "Auth contract: keys are JWTs checked against the store; revocation and nonce use are shared",
    backends,
    (it) => {
      it.effect("a minted key authenticates as its account, key id, type and tier", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const { key, record } = yield* auth.createKey({ accountId: account.id, type: "ADMIN", tier: "partner", description: "ops" })
          const principal = yield* auth.authenticate({ authorization: `Bearer ${key}` })
          assert.deepStrictEqual(
            principal,
            Option.some(new Principal.ApiKeyPrincipal({ accountId: account.id, keyId: record.id, keyType: "ADMIN", tier: "partner" }))
          )
        })))

      it.effect("no credentials at all is None, not a failure", () =>
        Effect.gen(function*() {
          const auth = yield* Auth.Auth
          assert.isTrue(Option.isNone(yield* auth.authenticate({})))
        }))

      it.effect("a malformed Authorization header or a token that is not ours is Unauthenticated", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const other = yield* Jwt.generateSigningKey
          const foreign = yield* Jwt.sign(other, {
            accountId: "acct_x",
            keyId: "key_x",
            type: "ADMIN",
            tier: "default",
            issuedAt: new Date()
          })
          for (const authorization of ["Basic abc", "Bearer", "Bearer not.a.jwt", `Bearer ${foreign}`]) {
            assert.strictEqual(yield* tagOf(auth.authenticate({ authorization })), "Unauthenticated")
          }
        })))

      it.effect("a revoked key is refused at once; its metadata shows when it was revoked", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const { key, record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "ci" })
          yield* auth.revokeKey(account.id, record.id)
          assert.strictEqual(yield* tagOf(auth.authenticate({ authorization: `Bearer ${key}` })), "Unauthenticated")
          const [listed] = yield* auth.listKeys(account.id)
          assert.strictEqual(listed?.id, record.id)
          assert.instanceOf(listed?.revokedAt, Date)
          assert.notProperty(listed, "key")
        })))

      it.effect("revoking a key the account does not hold is NotFound", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const a = yield* auth.createAccount()
          const b = yield* auth.createAccount()
          const { record } = yield* auth.createKey({ accountId: a.id, type: "INFERENCE", description: "" })
          assert.strictEqual(yield* tagOf(auth.revokeKey(b.id, record.id)), "NotFound")
          assert.strictEqual(yield* tagOf(auth.revokeKey(a.id, "key_missing")), "NotFound")
        })))

      it.effect("an expired key is refused; expiresAt must be in the future", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const { record } = yield* auth.createKey({
            accountId: account.id,
            type: "INFERENCE",
            description: "short",
            expiresAt: new Date(Date.now() + 60_000)
          })
          const key = yield* Jwt.sign(signingKey, {
            accountId: account.id,
            keyId: record.id,
            type: "INFERENCE",
            tier: "default",
            issuedAt: new Date(Date.now() - 120_000),
            expiresAt: new Date(Date.now() - 1_000)
          })
          assert.strictEqual(yield* tagOf(auth.authenticate({ authorization: `Bearer ${key}` })), "Unauthenticated")
          const past = auth.createKey({ accountId: account.id, type: "INFERENCE", description: "", expiresAt: new Date(0) })
          assert.strictEqual(yield* tagOf(past), "InvalidRequest")
        })))

      it.effect("a key's expiry lives in the store: set, it refuses the key from that time on; removed, the key works again; a revoked key stays revoked", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const minted = yield* auth.createKey({
            accountId: account.id,
            type: "INFERENCE",
            description: "",
            expiresAt: new Date(Date.now() + 60_000)
          })
          const header = { authorization: `Bearer ${minted.key}` }
          assert.strictEqual(yield* tagOf(auth.authenticate(header)), "success")
          yield* auth.setKeyExpiry(account.id, minted.record.id, new Date(Date.now() + 100))
          yield* Effect.sleep("150 millis")
          assert.strictEqual(yield* tagOf(auth.authenticate(header)), "Unauthenticated")
          const cleared = yield* auth.setKeyExpiry(account.id, minted.record.id, undefined)
          assert.isUndefined(cleared.expiresAt)
          assert.strictEqual(yield* tagOf(auth.authenticate(header)), "success")
          assert.strictEqual(yield* tagOf(auth.setKeyExpiry(account.id, minted.record.id, new Date(0))), "InvalidRequest")
          assert.strictEqual(yield* tagOf(auth.setKeyExpiry(account.id, "key_missing", undefined)), "NotFound")
          yield* auth.revokeKey(account.id, minted.record.id)
          yield* auth.setKeyExpiry(account.id, minted.record.id, undefined)
          assert.strictEqual(yield* tagOf(auth.authenticate(header)), "Unauthenticated")
        })))

      it.effect("a key signed with our key for an account that does not exist is refused", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const token = yield* Jwt.sign(signingKey, {
            accountId: "acct_ghost",
            keyId: "key_ghost",
            type: "ADMIN",
            tier: "default",
            issuedAt: new Date()
          })
          assert.strictEqual(yield* tagOf(auth.authenticate({ authorization: `Bearer ${token}` })), "Unauthenticated")
        })))

      it.effect("creating an account with an existing id returns the existing one", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const id = `acct_fixed_${Date.now()}`
          const first = yield* auth.createAccount({ id, createdAt: new Date("2026-01-01T00:00:00Z") })
          const second = yield* auth.createAccount({ id })
          assert.deepStrictEqual(second, first)
          assert.deepStrictEqual(yield* auth.getAccount(id), Option.some(first))
          assert.strictEqual(yield* tagOf(auth.createAccount({ id: "bad id{}" })), "InvalidRequest")
        })))

      it.effect("a key's record names the signing key that signed it, and the keys of a signing key are listed across accounts", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const [one, two] = [yield* auth.createAccount(), yield* auth.createAccount()]
          const a = yield* auth.createKey({ accountId: one.id, type: "ADMIN", description: "" })
          const b = yield* auth.createKey({ accountId: two.id, type: "INFERENCE", description: "" })
          assert.strictEqual(a.record.kid, signingKey.kid)
          assert.strictEqual((yield* auth.getKey(two.id, b.record.id)).kid, signingKey.kid)
          assert.deepStrictEqual(auth.signingKeyIds, [signingKey.kid])
          const listed = (yield* auth.keysSignedBy(signingKey.kid)).filter((record) =>
            record.accountId === one.id || record.accountId === two.id
          )
          assert.deepStrictEqual(listed.map((record) => record.id).sort(), [a.record.id, b.record.id].sort())
          assert.deepStrictEqual(yield* auth.keysSignedBy("another-kid"), [])
        })))

      it.effect("a key's restrictions are stored with it, shown with its metadata, replaced whole and lifted", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const store = yield* AuthStore.AuthStore
          const account = yield* auth.createAccount()
          const restrictions = { networks: ["ethereum-mainnet"], ips: ["10.9.9.0/24"] }
          const { record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "", restrictions })
          assert.deepStrictEqual((yield* auth.getKey(account.id, record.id)).restrictions, restrictions)
          assert.deepStrictEqual((yield* store.keyStatus(account.id, record.id)).restrictions, restrictions)
          yield* auth.restrictKey(account.id, record.id, { models: ["house-*"] })
          assert.deepStrictEqual((yield* store.keyStatus(account.id, record.id)).restrictions, { models: ["house-*"] })
          // A description change writes the record again: the restrictions stay with it.
          yield* auth.describeKey(account.id, record.id, "renamed")
          assert.deepStrictEqual((yield* auth.listKeys(account.id))[0]?.restrictions, { models: ["house-*"] })
          yield* auth.restrictKey(account.id, record.id, {})
          assert.isUndefined((yield* auth.getKey(account.id, record.id)).restrictions)
          assert.isUndefined((yield* store.keyStatus(account.id, record.id)).restrictions)
        })))

      it.effect("a rerolled key keeps its id and restrictions; its new secret works, the old one for its grace period only", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const restrictions = { networks: ["ethereum-mainnet"] }
          const first = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "agent", restrictions })
          const second = yield* auth.rerollKey(account.id, first.record.id, 60_000)
          assert.deepStrictEqual([second.record.id, second.record.description, second.record.restrictions], [
            first.record.id,
            "agent",
            restrictions
          ])
          const works = (key: string) => tagOf(auth.authenticate({ authorization: `Bearer ${key}` }))
          assert.deepStrictEqual([yield* works(first.key), yield* works(second.key)], ["success", "success"])
          const third = yield* auth.rerollKey(account.id, first.record.id, 0)
          assert.deepStrictEqual(
            [yield* works(first.key), yield* works(second.key), yield* works(third.key)],
            ["success", "Unauthenticated", "success"],
            "a reroll with no grace ends the secret it replaces at once; an earlier grace runs on"
          )
          yield* auth.revokeKey(account.id, first.record.id)
          assert.strictEqual(yield* works(third.key), "Unauthenticated")
          assert.strictEqual(yield* tagOf(auth.rerollKey(account.id, first.record.id, 0)), "InvalidRequest")
          assert.strictEqual(yield* tagOf(auth.rerollKey(account.id, "key_missing", 0)), "NotFound")
        })))

      it.effect("concurrent rerolls of one key are serialised: of five at once one issues the new secret and the others Conflict; the old secret keeps its grace", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const first = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "agent" })
          const rerolls = yield* Effect.all(
            Array.from({ length: 5 }, () => Effect.result(auth.rerollKey(account.id, first.record.id, 60_000))),
            { concurrency: "unbounded" }
          )
          const issued = rerolls.filter(Result.isSuccess).map((result) => result.success)
          assert.strictEqual(issued.length, 1)
          assert.deepStrictEqual(rerolls.filter(Result.isFailure).map((result) => result.failure._tag), [
            "Conflict",
            "Conflict",
            "Conflict",
            "Conflict"
          ])
          const works = (key: string) => tagOf(auth.authenticate({ authorization: `Bearer ${key}` }))
          assert.deepStrictEqual([yield* works(first.key), yield* works(issued[0]!.key)], ["success", "success"])
          assert.deepStrictEqual((yield* auth.getKey(account.id, first.record.id)).secrets, issued[0]!.record.secrets)
          // The next reroll, after them, replaces the one secret issued; with no grace it ends at once.
          const next = yield* auth.rerollKey(account.id, first.record.id, 0)
          assert.deepStrictEqual([yield* works(first.key), yield* works(issued[0]!.key), yield* works(next.key)], [
            "success",
            "Unauthenticated",
            "success"
          ])
        })))

      it.effect("concurrent rerolls with no grace leave one working secret, the one reroll that was stored issued; the old secret is refused at once", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const account = yield* auth.createAccount()
          const first = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "agent" })
          const rerolls = yield* Effect.all(
            Array.from({ length: 5 }, () => Effect.result(auth.rerollKey(account.id, first.record.id, 0))),
            { concurrency: "unbounded" }
          )
          const works = (key: string) => tagOf(auth.authenticate({ authorization: `Bearer ${key}` }))
          const keys = rerolls.filter(Result.isSuccess).map((result) => result.success.key)
          const working: Array<string> = []
          for (const key of keys) if ((yield* works(key)) === "success") working.push(key)
          assert.strictEqual(working.length, 1)
          assert.strictEqual(yield* works(first.key), "Unauthenticated")
        })))

      it.effect("a reroll that meets a revocation issues nothing: the revoked key stays revoked", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const store = yield* AuthStore.AuthStore
          const account = yield* auth.createAccount()
          const { record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "" })
          yield* auth.revokeKey(account.id, record.id)
          // What a reroll that read the key before the revocation would store.
          assert.isFalse(yield* store.rerollKey({ ...record, secrets: { current: 1, previous: [] } }, 0))
          const stored = yield* auth.getKey(account.id, record.id)
          assert.isDefined(stored.revokedAt)
          assert.isUndefined(stored.secrets)
        })))

      it.effect("a change made from a record read before a reroll or a revocation does not undo it", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const store = yield* AuthStore.AuthStore
          const account = yield* auth.createAccount()
          const first = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "agent" })
          const read = yield* auth.getKey(account.id, first.record.id)
          const rerolled = yield* auth.rerollKey(account.id, first.record.id, 0)
          // What a description or restriction change that read the key before the reroll writes.
          yield* store.putKey({ ...read, description: "renamed", restrictions: { networks: ["ethereum-mainnet"] } })
          const works = (key: string) => tagOf(auth.authenticate({ authorization: `Bearer ${key}` }))
          assert.deepStrictEqual([yield* works(first.key), yield* works(rerolled.key)], ["Unauthenticated", "success"])
          const stored = yield* auth.getKey(account.id, first.record.id)
          assert.deepStrictEqual([stored.description, stored.restrictions, stored.secrets], [
            "renamed",
            { networks: ["ethereum-mainnet"] },
            rerolled.record.secrets
          ])
          assert.deepStrictEqual((yield* store.keyStatus(account.id, first.record.id)).restrictions, { networks: ["ethereum-mainnet"] })
          const before = yield* auth.getKey(account.id, first.record.id)
          yield* auth.revokeKey(account.id, first.record.id)
          yield* store.putKey({ ...before, description: "after" })
          const revoked = yield* auth.getKey(account.id, first.record.id)
          assert.deepStrictEqual([revoked.description, revoked.revokedAt !== undefined], ["after", true])
        })))

      it.effect("a wallet's account keeps a rate-limit override without a record, under the id its calls run as", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const address = privateKeyToAccount(generatePrivateKey()).address
          const accountId = Principal.walletAccountId("evm", address)
          yield* auth.setLimits(accountId, undefined, { "text:M": { requests: 1 } })
          assert.deepStrictEqual(yield* auth.storedLimits(accountId, undefined), { account: { "text:M": { requests: 1 } }, key: undefined })
          assert.isTrue(Option.isNone(yield* auth.getAccount(accountId)))
          assert.strictEqual(
            yield* tagOf(auth.setLimits(`wallet:evm:${address}`, undefined, {})),
            "InvalidRequest",
            "a checksummed address is not the id its calls run as"
          )
          assert.strictEqual(yield* tagOf(auth.setLimits("wallet:evm:0x1234", undefined, {})), "InvalidRequest")
          yield* auth.setLimits(accountId, undefined, undefined)
          assert.deepStrictEqual(yield* auth.storedLimits(accountId, undefined), {})
        })))

      it.effect("rate-limit overrides of an account and of a key are kept in the store and read with the key's standing", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const store = yield* AuthStore.AuthStore
          const account = yield* auth.createAccount()
          const { record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "" })
          assert.isUndefined((yield* store.keyStatus(account.id, record.id)).limits)
          yield* auth.setLimits(account.id, undefined, { "text:M": { requests: 1 } })
          yield* auth.setLimits(account.id, record.id, { rpc: { requests: 2, credits: 100 } })
          const expected = { account: { "text:M": { requests: 1 } }, key: { rpc: { requests: 2, credits: 100 } } }
          assert.deepStrictEqual((yield* store.keyStatus(account.id, record.id)).limits, expected)
          assert.deepStrictEqual(yield* store.limits(account.id, record.id), expected)
          yield* auth.setLimits(account.id, record.id, undefined)
          assert.deepStrictEqual((yield* store.keyStatus(account.id, record.id)).limits, {
            account: { "text:M": { requests: 1 } },
            key: undefined
          })
          assert.strictEqual(yield* tagOf(auth.setLimits("acct_missing", undefined, {})), "NotFound")
          assert.strictEqual(yield* tagOf(auth.setLimits(account.id, "key_missing", {})), "NotFound")
        })))

      it.effect("a wallet signs in as the account of (family, address), and nothing is stored for it (any number of wallets cost nothing to make)", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const { address, header } = yield* Effect.promise(() => siwxHeader(Date.now(), "a1b2c3d4e5f60718"))
          const principal = yield* auth.authenticate({ "sign-in-with-x": header })
          const accountId = Principal.walletAccountId("evm", address)
          assert.deepStrictEqual(
            principal,
            Option.some(new Principal.WalletPrincipal({ accountId, address, family: "evm", chainId: "eip155:8453" }))
          )
          assert.isTrue(Option.isNone(yield* auth.getAccount(accountId)))
        })))

      it.effect("a replayed SIWX header is refused under the default nonce policy, the legacy name too", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const { header } = yield* Effect.promise(() => siwxHeader(Date.now(), "0f1e2d3c4b5a6978"))
          assert.isTrue(Option.isSome(yield* auth.authenticate({ "x-sign-in-with-x": header })))
          assert.strictEqual(yield* tagOf(auth.authenticate({ "sign-in-with-x": header })), "Unauthenticated")
        })))

      it.effect("an expired SIWX message is refused", () =>
        live(Effect.gen(function*() {
          const auth = yield* Auth.Auth
          const { header } = yield* Effect.promise(() => siwxHeader(Date.now() - 601_000, "ffffeeeeddddcccc"))
          assert.strictEqual(yield* tagOf(auth.authenticate({ "sign-in-with-x": header })), "Unauthenticated")
        })))
    }
  )
