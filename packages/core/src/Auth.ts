/**
 * Who may call: `authenticate` turns the credential headers of a request into a principal, or into
 * `None` when the request carries no credentials at all (the caller then gets the x402 discovery
 * 402). A revocation is seen at once by every instance sharing the store.
 *
 * **Details**
 *
 * API keys are EdDSA-signed JWTs naming an account, a key id, a key type and a tier; wallets sign
 * in with SIWX (EIP-4361 for EVM, the Solana message for ed25519). Accounts and keys live in an
 * `AuthStore` whose layers are memory and Redis. Managing them (accounts, keys, overrides) is
 * `auth/KeyManagement.ts`, which the service includes; a contract wallet's SIWX signature is
 * checked by the `evmVerifier` it is given (`@tollgate/backends/ContractWallets`).
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { getAddress } from "viem"
import * as AbuseGuard from "./AbuseGuard.ts"
import * as KeyManagement from "./auth/KeyManagement.ts"
import { acceptsSecret, type Account, type ApiKeyRecord, AuthStore, type KeyStatus } from "./AuthStore.ts"
import {
  type Conflict,
  Forbidden,
  type InvalidRequest,
  type NotFound,
  type RateLimited,
  ServiceUnavailable,
  Unauthenticated
} from "./Errors.ts"
import * as Jwt from "./Jwt.ts"
import type * as KeyRestrictions from "./KeyRestrictions.ts"
import { ApiKeyPrincipal, type Principal, walletAccountId, WalletPrincipal } from "./Principal.ts"
import type * as RateLimitPolicy from "./RateLimitPolicy.ts"
import * as Siwx from "./Siwx.ts"

/**
 * An account, a key's metadata and a rerolled key's secrets, as the store keeps them (defined
 * there, which Auth builds on).
 *
 * @category models
 */
export type { Account, ApiKeyRecord, KeySecrets } from "./AuthStore.ts"

/**
 * What the store says of a key beyond its standing, read in the same lookup: what it may call
 * (`KeyRestrictions`; absent: anything its type allows) and the rate-limit overrides of its account
 * and of the key.
 *
 * @category models
 */
export interface KeyPolicy {
  readonly restrictions?: KeyRestrictions.Restrictions | undefined
  readonly limits?: RateLimitPolicy.StoredOverrides | undefined
}

/** @category models */
export type { CreateKey } from "./auth/KeyManagement.ts"

/**
 * A fresh SIWX challenge, as it goes into 402 bodies (`extensions["sign-in-with-x"]` and
 * `siwxChallenge`).
 *
 * @category models
 */
export interface SiwxChallenge {
  readonly info: {
    readonly domain: string
    readonly uri: string
    readonly version: string
    readonly nonce: string
    readonly issuedAt: string
    readonly expirationTime: string
    readonly statement: string
  }
  readonly supportedChains: ReadonlyArray<{ readonly chainId: string; readonly type: "eip191" | "eip1271" | "ed25519" }>
}

/**
 * A principal whose credentials are verified but whose standing in the store may still be pending
 * (see `Auth.authenticateUnconfirmed`).
 *
 * @category models
 */
export interface Unconfirmed {
  readonly principal: Principal
  /**
   * The store lookup of the key's standing, then `standing`'s verdict; it answers the key's policy,
   * read in the same lookup (`undefined`: none).
   */
  readonly confirm: Effect.Effect<KeyPolicy | undefined, Unauthenticated | ServiceUnavailable | RateLimited> | undefined
  /** What the store says of a confirmed key beyond its standing; `undefined`: nothing. */
  readonly policy?: KeyPolicy | undefined
}

/** Request headers, lower-cased names. @category models */
export type Headers = Readonly<Record<string, string | undefined>>

/** @category services */
export class Auth extends Context.Service<Auth, {
  /**
   * The principal of the request's credentials; `None` when it carries none. Fails with
   * RateLimited when the abuse guard has blocked the principal (see `AbuseGuard.identify`).
   */
  readonly authenticate: (
    headers: Headers
  ) => Effect.Effect<Option.Option<Principal>, Unauthenticated | ServiceUnavailable | RateLimited>
  /**
   * `authenticate` in two steps, for a caller that overlaps the store lookup with its own work: the
   * principal an API key's verified signature names, and `confirm`, which checks with the store
   * that its account exists and the key is not revoked. A wallet's credentials are checked whole
   * at once, so its `confirm` is `undefined`. Nothing may be granted to the principal before
   * `confirm` succeeds; whatever was taken meanwhile must be given back when it fails.
   */
  readonly authenticateUnconfirmed: (
    headers: Headers
  ) => Effect.Effect<Option.Option<Unconfirmed>, Unauthenticated | ServiceUnavailable | RateLimited>
  /** Fails with Forbidden unless the principal holds an ADMIN key. */
  readonly requireAdmin: (principal: Principal) => Effect.Effect<void, Forbidden>
  /** Creates an account, or returns the existing one with that id. */
  readonly createAccount: (
    input?: { readonly id?: string; readonly createdAt?: Date; readonly description?: string }
  ) => Effect.Effect<Account, InvalidRequest | ServiceUnavailable>
  readonly getAccount: (id: string) => Effect.Effect<Option.Option<Account>, ServiceUnavailable>
  /** Mints a key; the JWT is returned once and never stored. */
  readonly createKey: (
    input: KeyManagement.CreateKey
  ) => Effect.Effect<{ readonly key: string; readonly record: ApiKeyRecord }, InvalidRequest | ServiceUnavailable>
  readonly listKeys: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
  readonly revokeKey: (accountId: string, keyId: string) => Effect.Effect<void, NotFound | ServiceUnavailable>
  /** The key's metadata, if the account has it. */
  readonly getKey: (accountId: string, keyId: string) => Effect.Effect<ApiKeyRecord, NotFound | ServiceUnavailable>
  /**
   * Sets when the key stops working (`undefined`: never), from its next request on, on every
   * instance. A key minted with an expiry before c7b55fd also carries it in its signature, which
   * still ends it then (docs/operations.md, "Upgrading and rolling deploys").
   */
  readonly setKeyExpiry: (
    accountId: string,
    keyId: string,
    expiresAt: Date | undefined
  ) => Effect.Effect<ApiKeyRecord, InvalidRequest | NotFound | ServiceUnavailable>
  /**
   * Sets what the key may call (`undefined` or `{}`: whatever its type allows), from its next
   * request on, on every instance.
   */
  readonly restrictKey: (
    accountId: string,
    keyId: string,
    restrictions: KeyRestrictions.Restrictions | undefined
  ) => Effect.Effect<ApiKeyRecord, NotFound | ServiceUnavailable>
  /**
   * Issues a new secret for the key, signed with the current signing key: same id, description,
   * type, tier, cap and restrictions. The secrets issued before stay valid for `graceMs` more (0:
   * refused from now on). A revoked key cannot be rerolled. Concurrent rerolls of one key are
   * serialised by the store: one issues the new secret, the others fail with Conflict and issue
   * nothing.
   */
  readonly rerollKey: (
    accountId: string,
    keyId: string,
    graceMs: number
  ) => Effect.Effect<{ readonly key: string; readonly record: ApiKeyRecord }, Conflict | InvalidRequest | NotFound | ServiceUnavailable>
  /**
   * Sets the rate-limit override of the account (`keyId` undefined) or of one of its keys
   * (`undefined`: removed), kept in the store and read with the key's standing, so every instance
   * enforces it from the next call on. A wallet's account (`wallet:evm:<address, lower-cased>`,
   * `wallet:solana:<address>`) needs no record: it is the wallet's whether or not it made a key.
   */
  readonly setLimits: (
    accountId: string,
    keyId: string | undefined,
    override: RateLimitPolicy.Override | undefined
  ) => Effect.Effect<void, InvalidRequest | NotFound | ServiceUnavailable>
  /**
   * The rate-limit overrides the store keeps for the account and the key (`setLimits`); with no
   * key, the account's alone (what a wallet's call reads).
   */
  readonly storedLimits: (
    accountId: string,
    keyId: string | undefined
  ) => Effect.Effect<RateLimitPolicy.StoredOverrides, ServiceUnavailable>
  /** Changes the key's description; the account must have the key. */
  readonly describeKey: (
    accountId: string,
    keyId: string,
    description: string
  ) => Effect.Effect<ApiKeyRecord, NotFound | ServiceUnavailable>
  /** A fresh challenge for 402 bodies. */
  readonly siwxChallenge: Effect.Effect<SiwxChallenge>
  /** The `kid` new keys are signed with, then those of the earlier signing keys still verified. */
  readonly signingKeyIds: readonly [signing: string, ...previous: Array<string>]
  /**
   * Every account's keys whose secret the signing key `kid` signed, or, with `undefined`, the keys
   * minted before signing keys were named (all signed by the one signing key of that time). What an
   * operator re-issues after a signing key leaked. A walk of the whole store.
   */
  readonly keysSignedBy: (kid: string | undefined) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
}>()("@tollgate/core/Auth") {}

/**
 * Whether a SIWX message may be used more than once: `single-use` (the default) accepts each
 * (wallet, nonce) once within the message's lifetime, so a captured header cannot be replayed;
 * `reusable` accepts it for as long as the message is valid.
 *
 * @category models
 */
export type NoncePolicy = "single-use" | "reusable"

/** @category options */
export interface Options {
  /** The key new API keys are signed with; it verifies them too. */
  readonly signingKey: Jwt.SigningKey
  /** Earlier signing keys, kept to verify the API keys they signed until the operator drops them. */
  readonly previousKeys?: ReadonlyArray<Jwt.VerifyingKey> | undefined
  /** The origin clients address, e.g. `https://api.example.com` or `http://localhost:8787`. */
  readonly publicOrigin: string
  /**
   * Checks the signatures of contract wallets (EIP-1271, EIP-6492) on chain
   * (`@tollgate/backends/ContractWallets`); without it, SIWX takes only keys' signatures.
   */
  readonly evmVerifier?: Siwx.EvmVerifier | undefined
  /** Accepted CAIP-2 chains; default Base and Solana mainnet. */
  readonly chains?: ReadonlyArray<string> | undefined
  readonly noncePolicy?: NoncePolicy | undefined
  /** Longest accepted SIWX lifetime; default 10 minutes. */
  readonly maxLifetimeMs?: number | undefined
  /** Allowance for wallet clocks running ahead; default 30 seconds. */
  readonly clockSkewMs?: number | undefined
  readonly statement?: string | undefined
}

const invalidKey = new Unauthenticated({ message: "Invalid or expired API key" })
const invalidWallet = new Unauthenticated({ message: "Invalid or expired sign-in-with-x credentials" })
const badAuthorization = new Unauthenticated({ message: "Authorization must be 'Bearer <API key>'" })

const BEARER = /^Bearer +(\S+)$/i

/**
 * Whether a request carries credentials at all, valid or not: an `Authorization` or a SIWX header.
 * A request without any is answered the discovery 402 on metered routes, and judged by its address
 * by the abuse guard.
 *
 * @category predicates
 */
export const hasCredentials = (headers: Headers): boolean =>
  headers["authorization"] !== undefined || headers["x-api-key"] !== undefined || headers["sign-in-with-x"] !== undefined ||
  headers["x-sign-in-with-x"] !== undefined

/**
 * The request's bearer credentials: `Authorization`, or an `x-api-key` header (how Anthropic's SDK
 * and the agents built on it send a key) read as `Bearer <key>`.
 */
const authorizationOf = (headers: Headers): string | undefined => {
  const authorization = headers["authorization"]
  if (authorization !== undefined) return authorization
  const key = headers["x-api-key"]
  return key === undefined ? undefined : `Bearer ${key}`
}

/** How many verified API keys `authenticate` remembers. */
const VERIFIED_TOKENS = 10_000

/**
 * The Auth service over an `AuthStore`.
 *
 * @category constructors
 */
export const make = Effect.fn("Auth.make")(function*(options: Options) {
  const store = yield* AuthStore
  const origin = new URL(options.publicOrigin)
  const maxLifetimeMs = options.maxLifetimeMs ?? 600_000
  const clockSkewMs = options.clockSkewMs ?? 30_000
  const noncePolicy = options.noncePolicy ?? "single-use"
  const chains = options.chains ?? [Siwx.BASE_MAINNET, Siwx.SOLANA_MAINNET]
  const policy: Siwx.Policy = { origin: origin.origin, chains, maxLifetimeMs, clockSkewMs }
  const statement = options.statement ?? "Sign in to use your prepaid credits."
  const evmVerifier = Option.fromNullishOr(options.evmVerifier)

  const now = Clock.currentTimeMillis
  const verifyingKeys: ReadonlyArray<Jwt.VerifyingKey> = [options.signingKey, ...(options.previousKeys ?? [])]

  /**
   * Whether the store's standing of a key refuses the secret `secret` of it: no account, revoked or
   * expired, or a secret its rerolls no longer accept. A key never rerolled needs no clock.
   */
  const refuses = (status: KeyStatus, secret: number, clock: Clock.Clock): boolean =>
    !status.accountExists || status.revoked ||
    (status.secrets === undefined ? secret !== 0 : !acceptsSecret(status.secrets, secret, clock.currentTimeMillisUnsafe()))

  /** The standing read is the policy too, when the key has one: nothing is allocated per call. */
  const policyOf = (status: KeyStatus): KeyPolicy | undefined =>
    status.restrictions === undefined && status.limits === undefined ? undefined : status

  const standing =
    (principal: ApiKeyPrincipal, secret: number) => (status: KeyStatus): Effect.Effect<void, Unauthenticated | RateLimited> =>
      Effect.clockWith((clock): Effect.Effect<void, Unauthenticated | RateLimited> =>
        refuses(status, secret, clock) ? Effect.fail(invalidKey) : AbuseGuard.identify(principal)
      )

  // Where the store can read the abuse guard's blocks (both on Redis), a key's standing and its
  // block are read in one round trip (`AuthStore.keyStanding`) rather than one after the other.
  const blockKeyOf = Option.getOrUndefined(yield* Effect.serviceOption(AbuseGuard.AbuseGuard))?.blockKey

  /** The store lookup of the key's standing (with its block, where read together), then the verdict. */
  const confirmation = (
    principal: ApiKeyPrincipal,
    secret: number,
    verdict: ReturnType<typeof standing>
  ): Effect.Effect<KeyPolicy | undefined, Unauthenticated | ServiceUnavailable | RateLimited> => {
    const { accountId, keyId } = principal
    const keyStanding = store.keyStanding
    if (keyStanding === undefined || blockKeyOf === undefined) {
      return Effect.suspend(() =>
        Effect.flatMap(store.keyStatus(accountId, keyId), (status) => Effect.as(verdict(status), policyOf(status)))
      )
    }
    const blockKey = blockKeyOf(AbuseGuard.principalCaller(principal))
    return Effect.suspend(() =>
      Effect.flatMap(
        keyStanding(accountId, keyId, blockKey),
        (found) =>
          Effect.clockWith((clock): Effect.Effect<KeyPolicy | undefined, Unauthenticated | RateLimited> => {
            if (refuses(found, secret, clock)) return Effect.fail(invalidKey)
            const identified: Effect.Effect<void, RateLimited> = AbuseGuard.identifyRead(principal, found.blockedMs)
            const policy = policyOf(found)
            return policy === undefined ? identified as Effect.Effect<undefined, RateLimited> : Effect.as(identified, policy)
          })
      )
    )
  }

  /**
   * What a verified key authenticates as. It depends on the key's claims alone, so it is made
   * once per key and shared by every request that presents it.
   */
  const unconfirmedKey = (claims: Jwt.Claims): Effect.Effect<Option.Option<Unconfirmed>> => {
    const { accountId, keyId, tier, type } = claims
    const principal = new ApiKeyPrincipal({ accountId, keyId, keyType: type, tier })
    const secret = claims.secret ?? 0
    const verdict = standing(principal, secret)
    return Effect.succeed(Option.some<Unconfirmed>({
      principal,
      confirm: confirmation(principal, secret, verdict)
    }))
  }

  interface VerifiedKey {
    readonly expiresAt: number | undefined
    readonly unconfirmed: Effect.Effect<Option.Option<Unconfirmed>>
  }

  /**
   * Keys whose signature verified, by the `Authorization` header that carried them: an Ed25519
   * verification costs far more than the rest of a request, so a key is verified once and the
   * header's next requests find what it authenticates as (bounded, oldest out first). The expiry
   * is checked on every use, the same way `Jwt.verify` checks it; revocation and the account are
   * the store's, checked by the caller every time.
   */
  const verified = new Map<string, VerifiedKey>()

  const verifyKey = (authorization: string, at: number): Effect.Effect<Option.Option<Unconfirmed>, Unauthenticated> => {
    const match = BEARER.exec(authorization.trim())
    if (match === null) return Effect.fail(badAuthorization)
    return Effect.matchEffect(Jwt.verify(verifyingKeys, match[1]!, new Date(at)), {
      onFailure: (error) => Effect.andThen(Effect.logDebug("API key refused", error.reason), Effect.fail(invalidKey)),
      onSuccess: (claims) => {
        const unconfirmed = unconfirmedKey(claims)
        if (verified.size >= VERIFIED_TOKENS) verified.delete(verified.keys().next().value!)
        verified.set(authorization, { expiresAt: claims.expiresAt?.getTime(), unconfirmed })
        return unconfirmed
      }
    })
  }

  const authenticateWallet = Effect.fn("Auth.authenticateWallet")(function*(header: string) {
    const at = yield* now
    const checked = Result.flatMap(
      Siwx.decodeHeader(header),
      (credential) => Result.map(Siwx.validate(credential, policy, at), (expiresAt) => ({ credential, expiresAt }))
    )
    if (Result.isFailure(checked)) {
      yield* Effect.logDebug("SIWX refused", checked.failure.reason)
      return yield* invalidWallet
    }
    const { credential, expiresAt } = checked.success
    const verified = yield* Siwx.verifySignature(credential, evmVerifier).pipe(
      Effect.tapError((error) => Effect.logWarning("SIWX chain verifier failed", error.cause)),
      Effect.mapError(() => new ServiceUnavailable({ message: "Wallet signature verification is unavailable", retryAfterSeconds: 1 }))
    )
    if (!verified) return yield* invalidWallet
    const address = credential.family === "evm" ? getAddress(credential.fields.address) : credential.fields.address
    const accountId = walletAccountId(credential.family, address)
    if (noncePolicy === "single-use") {
      const fresh = yield* store.claimNonce(`${accountId}:${credential.fields.nonce}`, expiresAt - at + clockSkewMs)
      if (!fresh) return yield* invalidWallet
    }
    // A wallet's account is its address: nothing is stored for it at sign-in, so wallets that
    // never hold credit (any number of them can be made for free) leave no record behind; its
    // balance lives in the ledger once it is credited.
    return new WalletPrincipal({ accountId, address, family: credential.family, chainId: credential.fields.chainId })
  })

  const noCredentials = Effect.succeed(Option.none<Unconfirmed>())

  // No generator and, for a key seen before, no allocation: this runs on every paid request.
  const authenticateUnconfirmed = (
    headers: Headers
  ): Effect.Effect<Option.Option<Unconfirmed>, Unauthenticated | ServiceUnavailable | RateLimited> => {
    const authorization = authorizationOf(headers)
    if (authorization !== undefined) {
      return Effect.clockWith((clock) => {
        const at = clock.currentTimeMillisUnsafe()
        const known = verified.get(authorization)
        if (known === undefined) return verifyKey(authorization, at)
        if (known.expiresAt === undefined || at < known.expiresAt) return known.unconfirmed
        verified.delete(authorization)
        return verifyKey(authorization, at)
      })
    }
    const siwx = headers["sign-in-with-x"] ?? headers["x-sign-in-with-x"]
    if (siwx === undefined) return noCredentials
    return Effect.flatMap(
      authenticateWallet(siwx),
      (principal) => Effect.as(AbuseGuard.identify(principal), Option.some<Unconfirmed>({ principal, confirm: undefined }))
    )
  }

  const authenticate = (headers: Headers) =>
    Effect.flatMap(authenticateUnconfirmed(headers), (found) => {
      if (Option.isNone(found)) return Effect.succeed(Option.none<Principal>())
      const { confirm, principal } = found.value
      return confirm === undefined ? Effect.succeed(Option.some(principal)) : Effect.as(confirm, Option.some(principal))
    })

  const siwxChallenge = Effect.map(now, (at): SiwxChallenge => ({
    info: {
      domain: origin.host,
      // The public origin with the path tollgate is mounted under, if any: the page a wallet signs in to.
      uri: `${origin.href.replace(/\/+$/u, "")}/`,
      version: "1",
      // The spec's nonce is a 16-character hex string: 8 random bytes.
      nonce: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex"),
      issuedAt: new Date(at).toISOString(),
      expirationTime: new Date(at + maxLifetimeMs).toISOString(),
      statement
    },
    supportedChains: chains.flatMap((chainId): SiwxChallenge["supportedChains"] =>
      chainId.startsWith("solana:")
        ? [{ chainId, type: "ed25519" as const }]
        : Option.isSome(evmVerifier)
        ? [{ chainId, type: "eip191" as const }, { chainId, type: "eip1271" as const }]
        : [{ chainId, type: "eip191" as const }]
    )
  }))

  return Auth.of({
    authenticate,
    authenticateUnconfirmed,
    requireAdmin: (principal) =>
      principal._tag === "ApiKey" && principal.keyType === "ADMIN"
        ? Effect.void
        : Effect.fail(new Forbidden({ message: "This operation requires an ADMIN API key" })),
    ...(yield* KeyManagement.make(options.signingKey)),
    siwxChallenge,
    signingKeyIds: [options.signingKey.kid, ...(options.previousKeys ?? []).map((key) => key.kid)]
  })
})

/**
 * Auth over the `AuthStore` in context (memory or Redis).
 *
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Auth, never, AuthStore> => Layer.effect(Auth, make(options))
