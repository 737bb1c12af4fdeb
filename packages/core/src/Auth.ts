/**
 * Who may call. API keys are EdDSA-signed JWTs naming an account, a key id, a key type and a tier;
 * wallets sign in with SIWX (EIP-4361 for EVM, the Solana message for ed25519). `authenticate`
 * turns the credential headers of a request into a principal, or into `None` when the request
 * carries no credentials at all (the caller then gets the x402 discovery 402). Accounts and keys
 * live in an `AuthStore` whose layers are memory and Redis, so a revocation is seen at once by
 * every instance sharing the store.
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Option } from "effect"
import type { Forbidden, InvalidRequest, NotFound, ServiceUnavailable, Unauthenticated } from "./Errors.ts"
import type { KeyType, Principal, Tier } from "./Principal.ts"

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

/** @category models */
export interface CreateKey {
  readonly accountId: string
  readonly type: KeyType
  readonly tier?: Tier
  readonly description: string
  readonly expiresAt?: Date
}

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

/** Request headers, lower-cased names. @category models */
export type Headers = Readonly<Record<string, string | undefined>>

/** @category services */
export class Auth extends Context.Service<Auth, {
  /** The principal of the request's credentials; `None` when it carries none. */
  readonly authenticate: (headers: Headers) => Effect.Effect<Option.Option<Principal>, Unauthenticated | ServiceUnavailable>
  /** Fails with Forbidden unless the principal holds an ADMIN key. */
  readonly requireAdmin: (principal: Principal) => Effect.Effect<void, Forbidden>
  readonly createAccount: (input?: { readonly id?: string; readonly createdAt?: Date; readonly description?: string }) => Effect.Effect<Account, ServiceUnavailable>
  readonly getAccount: (id: string) => Effect.Effect<Option.Option<Account>, ServiceUnavailable>
  /** Mints a key; the JWT is returned once and never stored. */
  readonly createKey: (input: CreateKey) => Effect.Effect<{ readonly key: string; readonly record: ApiKeyRecord }, InvalidRequest | ServiceUnavailable>
  readonly listKeys: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, ServiceUnavailable>
  readonly revokeKey: (accountId: string, keyId: string) => Effect.Effect<void, NotFound | ServiceUnavailable>
  /** A fresh challenge for 402 bodies. */
  readonly siwxChallenge: Effect.Effect<SiwxChallenge>
}>()("@tollgate/core/Auth") {}
