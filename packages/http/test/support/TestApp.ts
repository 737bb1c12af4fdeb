/**
 * The app as the HTTP tests build it: the metered pipeline's dependencies in memory (Auth over a
 * memory store with a fresh signing key, RateLimiter, CreditLedger, IdempotencyStore, the server's
 * own 402 bodies from the x402 module and the spec's limit tables) and accounts seeded with a key
 * and credit, so a test file states only the routes and backends it is about.
 */
import { Admission, CreditLedger, IdempotencyStore, type Money, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import type * as KeyCaps from "@tollgate/core/KeyCaps"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { Context, Effect, Layer, Scope } from "effect"
import { expect } from "vitest"
import { ServiceInfo } from "../../src/index.ts"
import * as Metered from "../../src/Metered.ts"
import * as X402Bodies from "../../src/payment/PaymentRequiredBodies.ts"

/** Runs an effect that needs nothing. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

/** One service built on its own; memory services keep their state after the build's scope closes. */
export const build = <I, S, E>(tag: Context.Key<I, S>, layer: Layer.Layer<I, E>): Promise<S> =>
  run(Effect.scoped(Effect.map(Layer.build(layer), (context) => Context.get(context, tag))))

/** A service built on its own, with the context of its build (its memory store's primitives too). */
export type Built<S, I> = S & { readonly context: Context.Context<I> }

const buildWithContext = <I, S, O>(tag: Context.Key<I, S>, layer: Layer.Layer<I | O>): Promise<Built<S, I | O>> =>
  run(Effect.scoped(Effect.map(Layer.build(layer), (context) => ({ ...Context.get(context, tag), context }))))

/** Auth with its memory store's primitives: the keys' spend caps. */
type AuthParts = Auth.Auth | KeyCaps.KeyCaps | KeyCaps.Memory

/** Auth over a memory store, signing with a key generated when the layer is built. */
export const layerAuthMemory: Layer.Layer<AuthParts> = Layer.unwrap(Effect.map(
  Jwt.generateSigningKey,
  (signingKey) => Auth.layer({ signingKey, publicOrigin: "http://localhost" }).pipe(Layer.provideMerge(AuthStore.layerMemory))
))

/** The Auth service over a memory store. */
export const authMemory = () => buildWithContext(Auth.Auth, layerAuthMemory)

/** The credit ledger in memory. */
export const ledgerMemory = () => buildWithContext(CreditLedger.CreditLedger, CreditLedger.layerMemory)

/** Where the test apps take USDC on Base: the discovery 402 advertises it. */
export const payTo = "0x00000000000000000000000000000000000000A1"

/** The x402 configuration of the test apps: the spec's minimum top-up, paid to `payTo` on Base. */
export const x402Config = X402.makeConfig({ publicOrigin: "http://localhost", payTo: { evm: payTo } })

/** The 402 bodies the server answers with (`X402Bodies.layer`), over `auth`. */
export const layerPaymentRequiredBodies = <A, E>(auth: Layer.Layer<A | Auth.Auth, E>) =>
  X402Bodies.layer.pipe(Layer.provide(X402.layer(x402Config)), Layer.provideMerge(auth))

/** A USDC entry on Base of `amount` base units, paid to `payTo`. */
const usdcOnBase = (amount: string) => ({
  scheme: "exact",
  network: X402.BASE_MAINNET,
  asset: X402.BASE_USDC,
  amount,
  payTo,
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" }
})

/**
 * The discovery 402 body the test apps answer a caller without credentials at `path`: the spec's
 * $5 minimum top-up in USDC on Base, a fresh sign-in challenge, and the two ways to authenticate.
 * With `perCall` (a call whose price was read from its body, at or above the per-call floor), the
 * call itself is offered first at that price in USDC base units, with the `payment-identifier`
 * extension.
 */
export const discoveryBody = (path: string, perCall?: { readonly usd: string; readonly baseUnits: string }) => ({
  x402Version: 2,
  error: "Payment required",
  resource: {
    url: `http://localhost${path}`,
    description: perCall === undefined
      ? "Sign in with a wallet holding prepaid credit, or top up USDC credit on Base"
      : `Pay this call (at most ${perCall.usd} USD; what it does not use stays as credit for SIWX), or sign in with a wallet holding prepaid credit`,
    mimeType: "application/json"
  },
  accepts: perCall === undefined ? [usdcOnBase("5000000")] : [usdcOnBase(perCall.baseUnits), usdcOnBase("5000000")],
  extensions: {
    "sign-in-with-x": expect.objectContaining({ info: expect.objectContaining({ nonce: expect.any(String) }) }),
    ...(perCall === undefined ? {} : { "payment-identifier": expect.objectContaining({ info: { required: false } }) })
  },
  authOptions: {
    apiKey: { header: "Authorization", getKey: "http://localhost/api-keys", docs: "http://localhost/docs/authentication" },
    x402Wallet: {
      header: "SIGN-IN-WITH-X",
      legacyHeader: "X-Sign-In-With-X",
      topUp: "http://localhost/api/v1/x402/top-up",
      docs: "http://localhost/docs/wallets"
    }
  }
})

/**
 * The discovery 402 of one of tollgate's own operations: `discoveryBody` with the bazaar discovery
 * extension describing the operation (`Bazaar`).
 */
export const operationDiscoveryBody = (path: string) => {
  const body = discoveryBody(path)
  return {
    ...body,
    extensions: {
      ...body.extensions,
      bazaar: expect.objectContaining({
        info: expect.objectContaining({ input: expect.objectContaining({ type: "http", method: "POST" }) }),
        schema: expect.any(Object)
      })
    }
  }
}

const layerAround = <E>(
  auth: Layer.Layer<AuthParts, E>,
  ledger: Layer.Layer<CreditLedger.CreditLedger | CreditLedger.Memory>
) => Layer.mergeAll(layerPaymentRequiredBodies(auth), ledger, IdempotencyStore.layerMemory)

/**
 * The metered pipeline with its admissions in memory (`Admission.layerMemory`), over the memory
 * stores provided beside it.
 */
export const layerMeteredMemory = () => Metered.layer().pipe(Layer.provide(Admission.layerMemory))

/** What the metered pipeline depends on, in memory, with the spec's limit tables. */
export const layerStoresMemory = Layer.mergeAll(
  layerAround(layerAuthMemory, CreditLedger.layerMemory),
  RateLimiter.layerMemory(),
  Metered.layerLimitsDefault
)

/**
 * The pipeline's idempotency store and 402 bodies around an Auth and a ledger the test file holds
 * itself, to seed accounts and read balances directly; the rate limiter and limit policy are the
 * test's own choice.
 */
export const layerStoresAround = (
  auth: Built<Auth.Auth["Service"], AuthParts>,
  ledger: Built<CreditLedger.CreditLedger["Service"], CreditLedger.CreditLedger | CreditLedger.Memory>
) => layerAround(Layer.succeedContext(auth.context), Layer.succeedContext(ledger.context))

/** The service info every test app answers with. */
export const layerServiceInfo = ServiceInfo.layer({ version: "test", hostName: "test-host" })

/**
 * The metered pipeline over the memory stores, with the routes' own services beside it; the stores
 * stay in the output so tests can seed accounts and read balances.
 */
export const layerMetered = <A, E, R>(services: Layer.Layer<A, E, R>) =>
  Layer.mergeAll(layerMeteredMemory(), services, layerServiceInfo).pipe(Layer.provideMerge(layerStoresMemory))

/** Builds a layer into a context that lives as long as `scope`. */
export const buildContext = <A, E>(layer: Layer.Layer<A, E>, scope: Scope.Scope): Promise<Context.Context<A>> =>
  run(Layer.build(layer).pipe(Scope.provide(scope)))

/** @category models */
export interface SeededAccount {
  readonly id: string
  readonly key: string
  /** `Bearer <key>`. */
  readonly authorization: string
  /** How much of the grant has been spent so far. */
  readonly charged: () => Promise<number>
}

let seeded = 0

/**
 * A fresh account with an INFERENCE key and `grant` of credit; `label` names the key and the
 * grant's reference after the test file.
 */
export const seedAccount = (
  context: Context.Context<Auth.Auth | CreditLedger.CreditLedger>,
  options: { readonly label: string; readonly grant: Money.Nano }
): Promise<SeededAccount> =>
  run(
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const ledger = yield* CreditLedger.CreditLedger
      const account = yield* auth.createAccount()
      const { key } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: `${options.label} tests` })
      yield* ledger.grant({ accountId: account.id, amount: options.grant, reference: `${options.label}-grant-${seeded++}` })
      const charged = () => run(Effect.map(ledger.balance(account.id), (balance) => options.grant - balance.usd))
      return { id: account.id, key, authorization: `Bearer ${key}`, charged }
    }).pipe(Effect.provide(context))
  )
