/**
 * The 402 bodies the spec defines for wallets: form 2, the discovery body for a caller without
 * credentials, and form 3, an authenticated wallet with too little balance, each as the
 * `PaymentRequired` error the pipeline answers, with the same object in `PAYMENT-REQUIRED` for the
 * official client. The challenge comes from `Auth.siwxChallenge`, the amounts from the caller. And
 * the top-up guide, what the top-up link of those bodies answers to `GET`.
 *
 * @since 0.1.0
 */
import type { SiwxChallenge } from "../Auth.ts"
import * as Errors from "../Errors.ts"
import * as Money from "../Money.ts"
import { type Config, paymentsEnabled, topUpUrl } from "./Config.ts"
import { endpointRequirements, perCallOffered, requirements } from "./Offers.ts"
import {
  type Correction,
  encodeHeader,
  headers,
  PAYMENT_IDENTIFIER,
  paymentIdentifierDeclaration,
  type PaymentRequirements,
  resourceUrl,
  VERSION
} from "./Wire.ts"

const docsUrl = (config: Config) => config.docsUrl ?? `${config.publicOrigin}/docs/wallets`

/** How to pay with an API key instead: the header, where to get a key, its docs. */
const apiKeyOption = (config: Config) => ({
  header: "Authorization",
  getKey: config.getKeyUrl ?? `${config.publicOrigin}/api-keys`,
  docs: `${config.publicOrigin}/docs/authentication`
})

/** The three steps of a top-up, as the insufficient-balance body and the top-up guide state them. */
const topUpSteps = (config: Config): readonly [string, string, string] => [
  `POST ${topUpUrl(config)} without a payment header to get the payment requirements`,
  "Sign a USDC payment for exactly one entry of accepts (EIP-3009 on Base, a transfer on Solana)",
  `POST ${topUpUrl(config)} again with the payment in the PAYMENT-SIGNATURE header`
]

/**
 * What `GET` on the top-up link answers: how to buy credit here (its steps and what the minimum
 * top-up accepts), or, on a server that takes no wallet payments (dev mode before `x402.payTo`
 * and a settler are set), that it does not and how to pay instead. The link every 402 gives
 * (`authOptions.x402Wallet.topUp`) then always leads somewhere a caller can act on.
 *
 * @category models
 */
export interface TopUpGuide {
  readonly enabled: boolean
  readonly description: string
  readonly method: "POST"
  readonly url: string
  readonly minimumTopUpUsd: number
  readonly steps: ReadonlyArray<string>
  readonly accepts: ReadonlyArray<PaymentRequirements>
  readonly apiKey: { readonly header: string; readonly getKey: string; readonly docs: string }
  readonly docs: string
}

/** @category constructors */
export const topUpGuide = (config: Config): TopUpGuide => {
  const enabled = paymentsEnabled(config)
  return {
    enabled,
    description: enabled
      ? `Buy prepaid USDC credit for a wallet (at least ${Money.formatUsd(config.minimumTopUp)} USD), then sign in with SIWX to spend it`
      : "This server takes no wallet payments yet: its operator sets x402.payTo and a settler to turn them on. " +
        "Until then, call with an API key (Authorization: Bearer)",
    method: "POST",
    url: topUpUrl(config),
    minimumTopUpUsd: Money.toUsdNumber(config.minimumTopUp),
    steps: enabled ? topUpSteps(config) : [],
    accepts: enabled ? requirements(config, config.minimumTopUp) : [],
    apiKey: apiKeyOption(config),
    docs: docsUrl(config)
  }
}

/**
 * `PaymentRequirements` as the PaymentRequired object of form 2 carries them.
 *
 * @category models
 */
export interface PaymentRequired {
  readonly x402Version: 2
  readonly error: string
  readonly resource: { readonly url: string; readonly description: string; readonly mimeType: string }
  readonly accepts: ReadonlyArray<PaymentRequirements>
  readonly extensions: {
    readonly "sign-in-with-x": SiwxChallenge
    readonly "payment-identifier"?: typeof paymentIdentifierDeclaration
    readonly bazaar?: Readonly<Record<string, unknown>>
  }
}

/**
 * Form 2: PaymentRequired plus the two ways to authenticate.
 *
 * @category models
 */
export interface DiscoveryBody extends PaymentRequired {
  readonly authOptions: {
    readonly apiKey: { readonly header: string; readonly getKey: string; readonly docs: string }
    readonly x402Wallet: { readonly header: string; readonly legacyHeader: string; readonly topUp: string; readonly docs: string }
  }
}

/**
 * Form 3: an authenticated wallet whose balance does not cover the call.
 *
 * @category models
 */
export interface InsufficientBalanceBody {
  readonly error: "Payment required"
  readonly code: "PAYMENT_REQUIRED"
  readonly reason: "insufficient_balance"
  readonly message: string
  readonly currentBalanceUsd: number
  readonly minimumBalanceUsd: number
  readonly description: string
  readonly suggestedTopUpUsd: number
  readonly minimumTopUpUsd: number
  readonly supportedTokens: ReadonlyArray<string>
  readonly supportedChains: ReadonlyArray<string>
  /** Absent when the server takes no Base payments. */
  readonly topUpInstructions?: {
    readonly step1: string
    readonly step2: string
    readonly step3: string
    readonly receiverWallet: string
    readonly tokenAddress: string
    readonly tokenDecimals: number
    readonly network: string
    readonly minimumAmountUsd: number
  }
  readonly siwxChallenge: SiwxChallenge
}

/**
 * What the discovery 402 asks for: the ways to pay this server offers, and no top-up when wallet
 * payments are not configured (its `accepts` is empty then).
 */
const defaultDescription = (config: Config): string => {
  const chains = [...(config.evm === undefined ? [] : ["Base"]), ...(config.solana === undefined ? [] : ["Solana"])]
  return !paymentsEnabled(config)
    ? "Send an API key (Authorization: Bearer); wallet top-ups are not configured on this server"
    : `Sign in with a wallet holding prepaid credit, or top up USDC credit on ${chains.join(" or ")}`
}

const endpointDescription = (config: Config, price: Money.Nano | undefined, settlesActual = false): string => {
  if (!paymentsEnabled(config)) return defaultDescription(config)
  if (perCallOffered(config, price) && settlesActual && config.evm?.upto !== undefined) {
    return `Pay this call: upto ${Money.formatUsd(price)} USD with a Permit2 permit, of which what the call uses is settled, ` +
      "or exact at that amount, whose unused part stays as credit for SIWX; or sign in with a wallet holding prepaid credit"
  }
  if (perCallOffered(config, price)) {
    return `Pay this call (at most ${Money.formatUsd(price)} USD; what it does not use stays as credit for SIWX), ` +
      "or sign in with a wallet holding prepaid credit"
  }
  if (price === undefined) return defaultDescription(config)
  if (config.evm?.batchSettlement !== undefined && price > 0) {
    return `Pay this call (${Money.formatUsd(price)} USD) with a batch-settlement voucher on a USDC payment channel, claimed ` +
      "in batches; or top up USDC credit (a payment sent here is credited too), then sign in with SIWX"
  }
  return `This call (${Money.formatUsd(price)} USD) is below the ${Money.formatUsd(config.minimumPerCall)} USD paid per call: ` +
    "top up USDC credit (a payment sent here is credited too), then sign in with SIWX"
}

/** The entries of the correction's scheme with its fields added to their `extra`. */
const corrected = (
  entries: ReadonlyArray<PaymentRequirements>,
  correction: Correction | undefined
): ReadonlyArray<PaymentRequirements> =>
  correction === undefined
    ? entries
    : entries.map((entry) => entry.scheme === correction.scheme ? { ...entry, extra: { ...entry.extra, ...correction.extra } } : entry)

/**
 * Form 2, the discovery body: a 402 for `resource` (named without its query, see `resourceUrl`)
 * with the top-up requirements of `amount`, or else the requirements of a metered endpoint whose
 * call costs at most `price` (`endpointRequirements`), a fresh SIWX
 * challenge and both authentication options.
 *
 * @category constructors
 */
export const discoveryBody = (config: Config, input: {
  readonly resource: { readonly url: string; readonly description?: string; readonly mimeType?: string }
  readonly challenge: SiwxChallenge
  readonly amount?: Money.Nano
  /** The call's worst-case price, on a metered endpoint: see `endpointRequirements`. */
  readonly price?: Money.Nano
  /** The call's charge is known from its outcome: its 402 offers `upto` too. */
  readonly settlesActual?: boolean
  /** The endpoint's bazaar discovery extension (`@x402/extensions/bazaar`), in `extensions.bazaar`. */
  readonly bazaar?: Readonly<Record<string, unknown>> | undefined
  readonly error?: string
  /** Added to the `extra` of the entries of its scheme, for the refused payment's client. */
  readonly correction?: Correction | undefined
}): DiscoveryBody => ({
  x402Version: VERSION,
  error: input.error ?? "Payment required",
  resource: {
    url: resourceUrl(input.resource.url),
    description: input.resource.description ?? endpointDescription(config, input.price, input.settlesActual === true),
    mimeType: input.resource.mimeType ?? "application/json"
  },
  accepts: corrected(
    input.amount !== undefined
      ? requirements(config, input.amount)
      : endpointRequirements(config, input.price, input.settlesActual === true),
    input.correction
  ),
  extensions: {
    "sign-in-with-x": input.challenge,
    ...(input.price === undefined ? {} : { [PAYMENT_IDENTIFIER]: paymentIdentifierDeclaration }),
    ...(input.bazaar === undefined ? {} : { bazaar: input.bazaar })
  },
  authOptions: {
    apiKey: apiKeyOption(config),
    x402Wallet: {
      header: "SIGN-IN-WITH-X",
      legacyHeader: "X-Sign-In-With-X",
      topUp: topUpUrl(config),
      docs: docsUrl(config)
    }
  }
})

/**
 * The most a `PAYMENT-REQUIRED` header may take with the bazaar extension in it. Proxies commonly
 * refuse header lines over 8 KiB; an operation whose discovery schemas would push the header
 * past this keeps its bazaar extension in the body (and `GET /.well-known/x402`) only.
 */
const PAYMENT_REQUIRED_HEADER_BUDGET = 8_000

/** `PAYMENT-REQUIRED` for `required`: with its bazaar extension while the header stays within its budget. */
const paymentRequiredHeader = (required: { readonly extensions?: Readonly<Record<string, unknown>> }): string => {
  const whole = encodeHeader(required)
  if (whole.length <= PAYMENT_REQUIRED_HEADER_BUDGET || required.extensions?.["bazaar"] === undefined) return whole
  const { bazaar: _bazaar, ...extensions } = required.extensions
  return encodeHeader({ ...required, extensions })
}

/**
 * The 402 of form 2 as an error: the body, and the same object in `PAYMENT-REQUIRED` so the
 * official v2 client (which reads only the header) can pay it.
 *
 * @category constructors
 */
export const discovery = (config: Config, input: Parameters<typeof discoveryBody>[1]): Errors.PaymentRequired => {
  const body = discoveryBody(config, input)
  return new Errors.PaymentRequired({
    body,
    headers: {
      [headers.paymentRequired]: paymentRequiredHeader(body),
      "cache-control": "no-store"
    }
  })
}

/**
 * Form 3 as an error: `balance` does not cover `required`. The suggested top-up covers the
 * shortfall, rounded up to a whole dollar and never below the minimum top-up. On a metered
 * endpoint (`resource`), `PAYMENT-REQUIRED` offers that endpoint's requirements too, so a client
 * that signed in first (the official payment wrapper around the SIWX one) pays the call when the
 * credit runs out.
 *
 * @category constructors
 */
export const insufficientBalance = (config: Config, input: {
  readonly balance: Money.Nano
  readonly required: Money.Nano
  readonly challenge: SiwxChallenge
  readonly resource?: { readonly url: string }
  /** As `discoveryBody`'s. */
  readonly settlesActual?: boolean
  /** As `discoveryBody`'s. */
  readonly bazaar?: Readonly<Record<string, unknown>> | undefined
}): Errors.PaymentRequired => {
  const shortfall = Math.max(0, input.required - input.balance)
  const suggested = Math.max(
    Money.toUsdNumber(config.minimumTopUp),
    Math.ceil(shortfall / Money.NANO_PER_USD)
  )
  const minimumTopUpUsd = Money.toUsdNumber(config.minimumTopUp)
  const [step1, step2, step3] = topUpSteps(config)
  const body: InsufficientBalanceBody = {
    error: "Payment required",
    code: "PAYMENT_REQUIRED",
    reason: "insufficient_balance",
    message: `Insufficient balance: ${Money.formatUsd(input.balance)} USD available, ${Money.formatUsd(input.required)} USD required`,
    currentBalanceUsd: Money.toUsdNumber(input.balance),
    minimumBalanceUsd: Money.toUsdNumber(input.required),
    description: paymentsEnabled(config)
      ? "Top up USDC credit for this wallet, then retry the request signed in with the same wallet"
      : "This server takes no wallet top-ups: the wallet's credit comes from its operator, or use an API key",
    suggestedTopUpUsd: suggested,
    minimumTopUpUsd,
    supportedTokens: ["USDC"],
    supportedChains: [...(config.evm === undefined ? [] : ["base"]), ...(config.solana === undefined ? [] : ["solana"])],
    ...(config.evm === undefined ? {} : {
      topUpInstructions: {
        step1,
        step2,
        step3,
        receiverWallet: config.evm.payTo,
        tokenAddress: config.evm.asset,
        tokenDecimals: Money.USDC_DECIMALS,
        network: "base",
        minimumAmountUsd: minimumTopUpUsd
      }
    }),
    siwxChallenge: input.challenge
  }
  if (input.resource === undefined || !paymentsEnabled(config)) {
    return new Errors.PaymentRequired({ body, headers: { "cache-control": "no-store" } })
  }
  const required: PaymentRequired = {
    x402Version: VERSION,
    error: "insufficient_balance",
    resource: {
      url: resourceUrl(input.resource.url),
      description: endpointDescription(config, input.required, input.settlesActual === true),
      mimeType: "application/json"
    },
    accepts: endpointRequirements(config, input.required, input.settlesActual === true),
    extensions: {
      "sign-in-with-x": input.challenge,
      [PAYMENT_IDENTIFIER]: paymentIdentifierDeclaration,
      ...(input.bazaar === undefined ? {} : { bazaar: input.bazaar })
    }
  }
  return new Errors.PaymentRequired({
    body,
    headers: {
      [headers.paymentRequired]: paymentRequiredHeader(required),
      "cache-control": "no-store"
    }
  })
}
