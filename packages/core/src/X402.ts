/**
 * The x402 v2 wire format as tollgate speaks it: the payment requirements of a USDC top-up on Base
 * and Solana, the two 402 bodies the spec defines for wallets (form 2, the discovery body for a
 * caller without credentials, and form 3, an authenticated wallet with too little balance), the
 * `PAYMENT-REQUIRED` / `PAYMENT-SIGNATURE` / `PAYMENT-RESPONSE` header codecs (those of
 * `@x402/core/http`) and the matching of a client's `accepted` against requirements rebuilt for
 * its request. Everything here is pure: the challenge comes from
 * `Auth.siwxChallenge`, the amounts from the caller, the addresses from `Config`.
 *
 * @since 0.1.0
 */
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader, encodePaymentResponseHeader } from "@x402/core/http"
import { safeBase64Encode } from "@x402/core/utils"
import bs58 from "bs58"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import { getAddress, isAddress } from "viem"
import type { SiwxChallenge } from "./Auth.ts"
import * as BatchSettlement from "./BatchSettlement.ts"
import * as Errors from "./Errors.ts"
import * as Money from "./Money.ts"
import type { ChainFamily } from "./Principal.ts"

/**
 * The x402 protocol version tollgate emits. A number: the official client looks schemes up by it.
 *
 * @category constants
 */
export const VERSION = 2

/** @category constants */
export const BASE_MAINNET = "eip155:8453"
/** @category constants */
export const SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
/** USDC on Base mainnet, EIP-712 domain `USD Coin` / `2`. @category constants */
export const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
/** @category constants */
export const SOLANA_USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"

/**
 * Request headers, lower-cased. `PAYMENT-SIGNATURE` is current; `X-402-Payment` and `X-PAYMENT`
 * are legacy names still accepted.
 *
 * @category constants
 */
export const headers = {
  paymentRequired: "payment-required",
  paymentSignature: "payment-signature",
  legacyPayment: ["x-402-payment", "x-payment"],
  paymentResponse: "payment-response",
  signIn: "sign-in-with-x",
  legacySignIn: "x-sign-in-with-x"
} as const

/**
 * The EVM option: an EIP-3009 token (USDC) on one chain. `eip712` is the token's EIP-712 domain,
 * which the client needs to sign.
 *
 * @category models
 */
export interface EvmOption {
  /** CAIP-2, `eip155:<chainId>`. */
  readonly network: string
  readonly asset: string
  readonly payTo: string
  readonly eip712: { readonly name: string; readonly version: string }
  /**
   * Present when a facilitator here settles the `upto` scheme (a Permit2 permit for at most the
   * quote, settled at the actual charge): the `extra` its entries carry, the Permit2 transfer
   * method and the facilitator address the payer's permit names (`@x402/evm/upto/server`).
   */
  readonly upto?: { readonly extra: Readonly<Record<string, unknown>> } | undefined
  /**
   * Present when a facilitator here settles `batch-settlement` (deposits, claims): calls below
   * `minimumPerCall` are offered a voucher on a payment channel, on these terms.
   */
  readonly batchSettlement?: BatchSettlement.Offer | undefined
}

/**
 * The Solana option: an SPL mint. `feePayer` is the facilitator's fee-paying address, taken from
 * its `/supported` answer.
 *
 * @category models
 */
export interface SolanaOption {
  readonly network: string
  readonly asset: string
  readonly payTo: string
  readonly feePayer: string
}

/**
 * Where wallets pay and how the 402 bodies describe the service.
 *
 * @category models
 */
export interface Config {
  /** The origin clients address, e.g. `https://api.example.com`: SIWX binds to it. */
  readonly publicOrigin: string
  /** Absent when no EVM receiver is configured (a production server without `x402.payTo`). */
  readonly evm?: EvmOption
  /** Absent when no Solana facilitator is configured; the top-up then offers Base only. */
  readonly solana?: SolanaOption
  readonly minimumTopUp: Money.Nano
  /**
   * The cheapest call a 402 offers to be paid on its own: a call priced lower is not worth its
   * settlement's gas, so its 402 offers only the top-up (then SIWX).
   */
  readonly minimumPerCall: Money.Nano
  readonly maxTimeoutSeconds: number
  /** Where an API key is obtained; defaults to `<publicOrigin>/api-keys`. */
  readonly getKeyUrl?: string
  /** Wallet documentation; defaults to `<publicOrigin>/docs/wallets`. */
  readonly docsUrl?: string
}

/**
 * The default `minimumPerCall`, 0.001 USD: a Base settlement costs the relayer a few hundredths of
 * a cent of gas, so calls below a tenth of a cent (RPC) are paid from credit only.
 *
 * @category constants
 */
export const DEFAULT_MINIMUM_PER_CALL: Money.Nano = Money.unsafeNano(Money.NANO_PER_USD / 1000)

/**
 * Base and Solana mainnet USDC with a 5 USD minimum and the official server's 300 s timeout.
 *
 * @category constructors
 */
export const makeConfig = (options: {
  readonly publicOrigin: string
  /**
   * Absent: wallet payments are off (no `accepts`, the top-up answers 503). A network whose
   * receiver is absent is not offered (a server with nothing to settle Base payments leaves `evm` out).
   */
  readonly payTo?: { readonly evm?: string | undefined; readonly solana?: string | undefined } | undefined
  /** From the facilitator's `/supported` (see `PaymentFacilitator.feePayerOf`). */
  readonly solanaFeePayer?: string | undefined
  readonly evm?: Partial<EvmOption>
  readonly solana?: Partial<Omit<SolanaOption, "payTo" | "feePayer">>
  readonly minimumTopUp?: Money.Nano
  readonly minimumPerCall?: Money.Nano
  readonly maxTimeoutSeconds?: number
  readonly getKeyUrl?: string
  readonly docsUrl?: string
}): Config => ({
  publicOrigin: options.publicOrigin.replace(/\/+$/, ""),
  ...(options.payTo?.evm === undefined ? {} : {
    evm: {
      network: BASE_MAINNET,
      asset: BASE_USDC,
      eip712: { name: "USD Coin", version: "2" },
      ...options.evm,
      payTo: options.payTo.evm
    }
  }),
  ...(options.payTo?.solana !== undefined && options.solanaFeePayer !== undefined
    ? {
      solana: {
        network: SOLANA_MAINNET,
        asset: SOLANA_USDC,
        ...options.solana,
        payTo: options.payTo.solana,
        feePayer: options.solanaFeePayer
      }
    }
    : {}),
  minimumTopUp: options.minimumTopUp ?? Money.usd(5),
  minimumPerCall: options.minimumPerCall ?? DEFAULT_MINIMUM_PER_CALL,
  maxTimeoutSeconds: options.maxTimeoutSeconds ?? 300,
  ...(options.getKeyUrl !== undefined ? { getKeyUrl: options.getKeyUrl } : {}),
  ...(options.docsUrl !== undefined ? { docsUrl: options.docsUrl } : {})
})

/**
 * Whether wallets can pay this server at all: some receiver is configured.
 *
 * @category predicates
 */
export const paymentsEnabled = (config: Config): boolean => config.evm !== undefined || config.solana !== undefined

/**
 * The x402 configuration as a service, for the pipeline and the top-up routes.
 *
 * @category services
 */
export class X402Config extends Context.Service<X402Config, Config>()("@tollgate/core/X402Config") {}

/** @category layers */
export const layer = (config: Config): Layer.Layer<X402Config> => Layer.succeed(X402Config, config)

/** @category schemas */
export const ResourceInfo = Schema.Struct({
  url: Schema.String,
  description: Schema.optionalKey(Schema.String),
  mimeType: Schema.optionalKey(Schema.String)
})

/** @category models */
export type ResourceInfo = typeof ResourceInfo.Type

/** @category schemas */
export const PaymentRequirements = Schema.Struct({
  scheme: Schema.String,
  network: Schema.String,
  asset: Schema.String,
  amount: Schema.String,
  payTo: Schema.String,
  maxTimeoutSeconds: Schema.Number,
  extra: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/** @category models */
export type PaymentRequirements = typeof PaymentRequirements.Type

/**
 * What a client sends in `PAYMENT-SIGNATURE`: the requirement it chose, verbatim, and the
 * scheme's payload (for exact EVM, an EIP-3009 authorization and its signature; for Solana, a
 * partially signed transaction).
 *
 * @category schemas
 */
export const PaymentPayload = Schema.Struct({
  x402Version: Schema.Literal(2),
  resource: Schema.optionalKey(ResourceInfo),
  accepted: PaymentRequirements,
  payload: Schema.Record(Schema.String, Schema.Unknown),
  extensions: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/** @category models */
export type PaymentPayload = typeof PaymentPayload.Type

/**
 * The v1 payload of legacy clients: the scheme and a legacy network name instead of `accepted`.
 *
 * @category schemas
 */
export const PaymentPayloadV1 = Schema.Struct({
  x402Version: Schema.Literal(1),
  scheme: Schema.String,
  network: Schema.String,
  payload: Schema.Record(Schema.String, Schema.Unknown)
})

/** @category models */
export interface SettleResponse {
  readonly success: boolean
  readonly transaction: string
  readonly network: string
  readonly payer?: string
  /** `upto`: the base units settled, the call's actual charge. */
  readonly amount?: string
  readonly errorReason?: string
  readonly errorMessage?: string
  /** `batch-settlement`: the call's charge and the channel's state (`BatchSettlement.responseExtra`). */
  readonly extra?: Readonly<Record<string, unknown>>
}

/**
 * The `payment-identifier` extension (`@x402/extensions`): a client may name its payment with an
 * id of 16 to 128 letters, digits, `_` and `-`, and a retry carrying the same id is answered from
 * the first attempt. Declared as optional on every metered endpoint's 402.
 *
 * @category constants
 */
export const PAYMENT_IDENTIFIER = "payment-identifier"

/** The declaration, as `declarePaymentIdentifierExtension(false)` writes it. */
const paymentIdentifierDeclaration = {
  info: { required: false },
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { required: { type: "boolean" }, id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" } },
    required: ["required"]
  }
} as const

/**
 * The id a payment names itself with (`extensions["payment-identifier"].info.id`), when valid.
 *
 * @category accessors
 */
export const paymentIdentifier = (payload: PaymentPayload): Option.Option<string> => {
  const extension = payload.extensions?.[PAYMENT_IDENTIFIER] as { readonly info?: { readonly id?: unknown } } | undefined
  const id = extension?.info?.id
  return typeof id === "string" && /^[a-zA-Z0-9_-]{16,128}$/.test(id) ? Option.some(id) : Option.none()
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

/** @category paths */
export const topUpPath = "/api/v1/x402/top-up"

/** @category accessors */
export const topUpUrl = (config: Config): string => `${config.publicOrigin}${topUpPath}`

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
 * The two `accepts` entries for paying `amount`: Base USDC (EIP-712 domain in `extra`) and Solana
 * USDC (`feePayer` in `extra`), amounts in 6-decimal base units rounded up.
 *
 * @category constructors
 */
export const requirements = (config: Config, amount: Money.Nano): ReadonlyArray<PaymentRequirements> => {
  const units = Money.toUsdcUnits(amount)
  const evm: ReadonlyArray<PaymentRequirements> = config.evm === undefined ? [] : [{
    scheme: "exact",
    network: config.evm.network,
    asset: config.evm.asset,
    amount: units,
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { name: config.evm.eip712.name, version: config.evm.eip712.version }
  }]
  if (config.solana === undefined) return evm
  return [...evm, {
    scheme: "exact",
    network: config.solana.network,
    asset: config.solana.asset,
    amount: units,
    payTo: config.solana.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { feePayer: config.solana.feePayer }
  }]
}

/**
 * What a metered endpoint accepts: the call paid on its own at `price` (its worst-case quote; what
 * the call does not use stays as credit), unless that is below `minimumPerCall`, then a voucher on
 * a payment channel (`batch-settlement`, where Base is settled here) and the minimum top-up, which
 * a payment sent to the endpoint credits too. Per-call entries come first because the official
 * client pays the first entry it can.
 *
 * @category constructors
 */
export const endpointRequirements = (
  config: Config,
  price: Money.Nano | undefined,
  settlesActual = false
): ReadonlyArray<PaymentRequirements> => {
  const topUp = requirements(config, config.minimumTopUp)
  if (!perCallOffered(config, price)) return price === undefined || price <= 0 ? topUp : [...batchSettlementRequirements(config, price), ...topUp]
  const perCall = requirements(config, price)
  const upto = settlesActual ? uptoRequirements(config, price) : []
  return [
    ...upto,
    ...perCall,
    ...topUp.filter((entry) => !perCall.some((own) => own.network === entry.network && own.amount === entry.amount))
  ]
}

/**
 * The `batch-settlement` entry of a call below the per-call floor: a voucher for the channel's
 * cumulative charge plus `price`, rounded up to a base unit (what the call is charged may be less:
 * its charge in nano-USD is added to the channel's, see `PaymentChannels`). Base only, and only
 * when a facilitator here settles the scheme (`EvmOption.batchSettlement`).
 *
 * @category constructors
 */
export const batchSettlementRequirements = (config: Config, price: Money.Nano): ReadonlyArray<PaymentRequirements> =>
  config.evm?.batchSettlement === undefined ? [] : [{
    scheme: BatchSettlement.SCHEME,
    network: config.evm.network,
    asset: config.evm.asset,
    amount: Money.toUsdcUnits(price),
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: BatchSettlement.extra(config.evm.batchSettlement, config.evm.eip712)
  }]

/**
 * The `upto` entry of a call whose charge is known only from its outcome: a Permit2 permit for at
 * most `price`, of which the facilitator settles the actual charge after the call. Base only, and
 * only when a facilitator here settles `upto` (`EvmOption.upto`). It comes before `exact` in a 402:
 * a client that can sign either pays what the call used, and a client that knows only `exact`
 * (the official client drops schemes it has not registered) pays the worst case, keeping the rest
 * as credit.
 *
 * @category constructors
 */
export const uptoRequirements = (config: Config, price: Money.Nano): ReadonlyArray<PaymentRequirements> =>
  config.evm?.upto === undefined ? [] : [{
    scheme: "upto",
    network: config.evm.network,
    asset: config.evm.asset,
    amount: Money.toUsdcUnits(price),
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { name: config.evm.eip712.name, version: config.evm.eip712.version, ...config.evm.upto.extra }
  }]

/**
 * Whether a call of `price` may be paid on its own (it is at least `minimumPerCall`).
 *
 * @category predicates
 */
export const perCallOffered = (config: Config, price: Money.Nano | undefined): price is Money.Nano =>
  price !== undefined && price > 0 && price >= config.minimumPerCall

/**
 * Standard base64 (with padding) of the UTF-8 JSON, the encoding of every x402 header, as
 * `@x402/core` writes it.
 *
 * @category encoding
 */
export const encodeHeader = (value: unknown): string => safeBase64Encode(JSON.stringify(value))

/**
 * The `PAYMENT-RESPONSE` header of a settlement, encoded by `@x402/core`.
 *
 * @category encoding
 */
export const encodePaymentResponse = (response: SettleResponse): string =>
  encodePaymentResponseHeader(response as Parameters<typeof encodePaymentResponseHeader>[0])

/**
 * Decodes an x402 header with `@x402/core`'s decoder (strict standard base64, then JSON); `None`
 * when it is not one. The empty string, which that decoder would read as nothing, is none too.
 *
 * @category encoding
 */
export const decodeHeader = (value: string): Option.Option<unknown> => {
  const trimmed = value.trim()
  if (trimmed.length === 0 || trimmed.length % 4 !== 0) return Option.none()
  try {
    return Option.some(decodePaymentSignatureHeader(trimmed) as unknown)
  } catch {
    return Option.none()
  }
}

/**
 * A resource URL without its query string or fragment: a 402 names the resource, not the request,
 * and a long query copied into `PAYMENT-REQUIRED` (base64, so a third larger) would make a header
 * block node and undici clients refuse to read.
 *
 * @category constructors
 */
export const resourceUrl = (url: string): string => {
  const end = url.search(/[?#]/)
  return end < 0 ? url : url.slice(0, end)
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
}): DiscoveryBody => ({
  x402Version: VERSION,
  error: input.error ?? "Payment required",
  resource: {
    url: resourceUrl(input.resource.url),
    description: input.resource.description ?? endpointDescription(config, input.price, input.settlesActual === true),
    mimeType: input.resource.mimeType ?? "application/json"
  },
  accepts: input.amount !== undefined
    ? requirements(config, input.amount)
    : endpointRequirements(config, input.price, input.settlesActual === true),
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
  const encode = (value: unknown) => encodePaymentRequiredHeader(value as Parameters<typeof encodePaymentRequiredHeader>[0])
  const whole = encode(required)
  if (whole.length <= PAYMENT_REQUIRED_HEADER_BUDGET || required.extensions?.["bazaar"] === undefined) return whole
  const { bazaar: _bazaar, ...extensions } = required.extensions
  return encode({ ...required, extensions })
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
    message: `Insufficient balance: ${Money.formatUsd(input.balance)} USD available, ${
      Money.formatUsd(input.required)
    } USD required`,
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
    resource: { url: resourceUrl(input.resource.url), description: endpointDescription(config, input.required, input.settlesActual === true), mimeType: "application/json" },
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

const LEGACY_NETWORKS: Readonly<Record<string, string>> = {
  base: BASE_MAINNET,
  "base-sepolia": "eip155:84532",
  solana: SOLANA_MAINNET,
  "solana-devnet": "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
}

const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v)

const extraMatches = (server: PaymentRequirements["extra"], client: PaymentRequirements["extra"]) =>
  Object.entries(server ?? {}).every(([key, value]) => canonicalJson(client?.[key]) === canonicalJson(value))

/**
 * The requirement `accepted` chose: equal in every field but `extra`, where every server key must
 * be present and equal and the client may add keys (the official server's rule). Written here
 * because `@x402/core` exposes its matcher only as a method of `x402ResourceServer`, which would
 * need every scheme's server package registered just to compare two objects.
 *
 * @category matching
 */
export const findMatching = (
  candidates: ReadonlyArray<PaymentRequirements>,
  accepted: PaymentRequirements
): Option.Option<PaymentRequirements> =>
  Option.fromNullishOr(candidates.find((candidate) =>
    candidate.scheme === accepted.scheme &&
    candidate.network === accepted.network &&
    candidate.asset === accepted.asset &&
    candidate.amount === accepted.amount &&
    candidate.payTo === accepted.payTo &&
    candidate.maxTimeoutSeconds === accepted.maxTimeoutSeconds &&
    extraMatches(candidate.extra, accepted.extra)
  ))

/**
 * A payment and the requirement it pays.
 *
 * @category models
 */
export interface MatchedPayment {
  readonly payload: PaymentPayload
  readonly requirements: PaymentRequirements
}

/** Why a payment header was refused; the reason goes into the fresh 402's `error`. @category errors */
export class PaymentRejected extends Data.TaggedError("PaymentRejected")<{
  readonly reason: string
  readonly message: string
}> {}

/**
 * The payment header of a request (current name first, then the legacy ones), if any.
 *
 * @category accessors
 */
export const paymentHeader = (requestHeaders: Readonly<Record<string, string | undefined>>): Option.Option<string> =>
  Option.fromNullishOr(
    [headers.paymentSignature, ...headers.legacyPayment].map((name) => requestHeaders[name]).find((v) => v !== undefined)
  )

/**
 * Decodes a payment header and matches it against `candidates`, the requirements rebuilt for the
 * request. A v1 payload (legacy clients) matches the candidate of its scheme and network.
 *
 * @category matching
 */
export const decodePayment = Effect.fn("X402.decodePayment")(function*(
  header: string,
  candidates: ReadonlyArray<PaymentRequirements>
) {
  const json = yield* Effect.fromOption(decodeHeader(header)).pipe(
    Effect.mapError(() => new PaymentRejected({ reason: "invalid_payload", message: "The payment header is not base64 JSON" }))
  )
  const v1 = Schema.decodeUnknownOption(PaymentPayloadV1)(json)
  if (Option.isSome(v1)) {
    const network = LEGACY_NETWORKS[v1.value.network] ?? v1.value.network
    const match = candidates.find((c) => c.scheme === v1.value.scheme && c.network === network)
    if (match === undefined) {
      return yield* new PaymentRejected({ reason: "No matching payment requirements", message: "No requirement matches the payment" })
    }
    const payload: PaymentPayload = { x402Version: 2, accepted: match, payload: v1.value.payload }
    return { payload, requirements: match } satisfies MatchedPayment
  }
  const payload = yield* Schema.decodeUnknownEffect(PaymentPayload)(json).pipe(
    Effect.mapError(() => new PaymentRejected({ reason: "invalid_payload", message: "The payment payload is malformed" }))
  )
  const match = findMatching(candidates, payload.accepted)
  if (Option.isNone(match)) {
    return yield* new PaymentRejected({
      reason: "No matching payment requirements",
      message: "The accepted requirement does not match this request's requirements"
    })
  }
  return { payload, requirements: match.value } satisfies MatchedPayment
})

/**
 * A wallet address as a path parameter: EVM hex (a mixed-case address must carry a valid EIP-55
 * checksum) or a Solana base58 public key of 32 bytes. `None` when it is neither.
 *
 * @category constructors
 */
export const parseWalletAddress = (
  text: string
): Option.Option<{ readonly family: ChainFamily; readonly address: string }> => {
  if (text.startsWith("0x")) {
    return isAddress(text) ? Option.some({ family: "evm", address: getAddress(text) }) : Option.none()
  }
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(text)) return Option.none()
  try {
    return bs58.decode(text).length === 32 ? Option.some({ family: "solana", address: text }) : Option.none()
  } catch {
    return Option.none()
  }
}

/**
 * The chain family of a CAIP-2 network.
 *
 * @category accessors
 */
export const familyOf = (network: string): ChainFamily => (network.startsWith("solana:") ? "solana" : "evm")
