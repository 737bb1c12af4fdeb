/**
 * Verifying and settling x402 payments. A top-up credits a wallet only after its payment has been
 * verified and settled here; what is credited is keyed by the `reference` returned, so a payment
 * credits at most once however often it is submitted.
 *
 * Three backends, combined by network in `layer`:
 * - local EVM: checks an EIP-3009 `transferWithAuthorization` itself (signature through viem, so
 *   EOAs, EIP-1271 contract wallets and EIP-6492 counterfactual wallets; recipient, amount, time
 *   window, nonce unused on chain and not in flight here) and settles it by sending it from a
 *   relayer key, succeeding only on a mined receipt carrying the matching `Transfer` log;
 * - local Solana: the official `@x402/svm` facilitator scheme inside an `@x402/core`
 *   `x402Facilitator`. It checks the partially signed transfer (instruction layout, mint, amount,
 *   destination account of `payTo`, that the fee payer is ours and moves no funds, the payer's
 *   signature, a simulation, which refuses an expired blockhash), co-signs as fee payer with the
 *   configured key, sends and confirms over the configured RPC URL. Tollgate keeps only what is
 *   its own: the credit reference (the transaction signature) that makes a payment count once;
 * - HTTP: a client of an x402 facilitator (`POST /verify`, `POST /settle`, `GET /supported`), for
 *   operators who prefer a hosted facilitator. Its `/supported` answer carries the Solana
 *   `feePayer` the 402 bodies must advertise.
 *
 * @since 0.1.0
 */
import { Errors, Money, X402 } from "@tollgate/core"
import { Context, Duration, Effect, Layer, Option, Redacted, Schema, Semaphore } from "effect"
import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  isAddress,
  isAddressEqual,
  parseErc6492Signature,
  parseEventLogs,
  parseSignature,
  size
} from "viem"
import { nonceManager, privateKeyToAccount } from "viem/accounts"
import type { PaymentPayload as SdkPaymentPayload, PaymentRequirements as SdkPaymentRequirements } from "@x402/core/types"

/**
 * A payment that passed verification; `payer` is the wallet that pays.
 *
 * @category models
 */
export interface Verified {
  readonly payer: string
}

/**
 * A payment whose funds have moved. `reference` identifies the payment itself (the EIP-3009
 * `(from, nonce)` or the Solana transaction signature): the ledger credits it once.
 *
 * @category models
 */
export interface Settled {
  readonly payer: string
  readonly transaction: string
  readonly network: string
  readonly reference: string
  readonly amount: Money.Nano
}

/**
 * `GET /supported`: the scheme/network pairs a facilitator handles and, for Solana, its fee payer.
 *
 * @category models
 */
export interface Supported {
  readonly kinds: ReadonlyArray<{
    readonly x402Version: number
    readonly scheme: string
    readonly network: string
    readonly extra?: Readonly<Record<string, unknown>> | undefined
  }>
}

/** @category models */
export type FacilitatorError = X402.PaymentRejected | Errors.ServiceUnavailable

/** @category services */
export class PaymentFacilitator extends Context.Service<PaymentFacilitator, {
  readonly verify: (payment: X402.MatchedPayment) => Effect.Effect<Verified, FacilitatorError>
  /** Verifies again, moves the funds, and succeeds only once they have moved. */
  readonly settle: (payment: X402.MatchedPayment) => Effect.Effect<Settled, FacilitatorError>
  readonly supported: Effect.Effect<Supported, Errors.ServiceUnavailable>
}>()("@tollgate/backends/PaymentFacilitator") {}

/**
 * The fee payer a facilitator advertises for a Solana network, if it supports it.
 *
 * @category accessors
 */
export const feePayerOf = (supported: Supported, network: string): Option.Option<string> =>
  Option.fromNullishOr(
    supported.kinds.find((kind) => kind.scheme === "exact" && kind.network === network && typeof kind.extra?.["feePayer"] === "string")
      ?.extra?.["feePayer"] as string | undefined
  )

const reject = (reason: string, message: string) => new X402.PaymentRejected({ reason, message })

const unavailable = (message: string) => new Errors.ServiceUnavailable({ message, retryAfterSeconds: 5 })

const amountOf = (requirements: X402.PaymentRequirements) =>
  Effect.fromResult(Money.fromUsdcUnits(requirements.amount)).pipe(
    Effect.mapError(() => reject("invalid_amount", `Amount ${requirements.amount} is not a USDC amount`))
  )

const Hex32 = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{64}$/u))
const Uint = Schema.String.check(Schema.isPattern(/^\d{1,78}$/u))
const AddressString = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/u))

/**
 * The `exact` EVM payload: an EIP-3009 authorization (numbers as decimal strings) and its signature.
 *
 * @category schemas
 */
export const ExactEvmPayload = Schema.Struct({
  signature: Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]*$/u)),
  authorization: Schema.Struct({
    from: AddressString,
    to: AddressString,
    value: Uint,
    validAfter: Uint,
    validBefore: Uint,
    nonce: Hex32
  })
})

/**
 * The credit reference of an EIP-3009 payment: one per `(chain, token, from, nonce)`, which is
 * exactly what the token itself lets be used once.
 *
 * @category constructors
 */
export const evmReference = (network: string, asset: string, from: string, nonce: string): string =>
  `x402:${network}:${asset.toLowerCase()}:${from.toLowerCase()}:${nonce.toLowerCase()}`

/** @category constructors */
export const solanaReference = (network: string, signature: string): string => `x402:${network}:${signature}`

const eip3009Abi = [
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "v", type: "uint8" },
      { name: "r", type: "bytes32" },
      { name: "s", type: "bytes32" }
    ],
    outputs: []
  },
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "signature", type: "bytes" }
    ],
    outputs: []
  },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [{ name: "authorizer", type: "address" }, { name: "nonce", type: "bytes32" }],
    outputs: [{ type: "bool" }]
  },
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ type: "uint256" }]
  },
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256", indexed: false }
    ]
  }
] as const

/**
 * The EIP-712 types of an EIP-3009 `transferWithAuthorization`, as wallets sign them.
 *
 * @category constants
 */
export const authorizationTypes = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" }
  ]
} as const

/**
 * The local EVM backend's settings. `chains` maps each CAIP-2 network to its RPC URL; the relayer
 * pays the gas of every settlement and needs ETH on each chain, never USDC.
 *
 * @category models
 */
export interface LocalEvmOptions {
  readonly chains: Readonly<Record<string, { readonly rpcUrl: string }>>
  readonly relayerKey: Redacted.Redacted<Hex>
  /** Factories trusted to deploy EIP-6492 counterfactual wallets before settling. Default none. */
  readonly eip6492AllowedFactories?: ReadonlyArray<Address>
  /** Gas limit of a settlement; fixed so a failing transfer is mined as a revert, not guessed at. */
  readonly settlementGas?: bigint
  readonly pollingIntervalMs?: number
  readonly receiptTimeout?: Duration.Input
}

/** @category models */
export type Backend = PaymentFacilitator["Service"]

/**
 * The local EVM backend: verification and settlement of EIP-3009 payments through viem.
 *
 * @category constructors
 */
export const makeLocalEvm = Effect.fn("PaymentFacilitator.makeLocalEvm")(function*(options: LocalEvmOptions) {
  const account = privateKeyToAccount(Redacted.value(options.relayerKey), { nonceManager })
  const pollingInterval = options.pollingIntervalMs ?? 1_000
  const allowedFactories = options.eip6492AllowedFactories ?? []
  const gas = options.settlementGas ?? 300_000n
  const receiptTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.receiptTimeout ?? "2 minutes"))
  const submissions = yield* Semaphore.make(1)
  const inFlight = new Set<string>()

  const clients = new Map(Object.entries(options.chains).flatMap(([network, { rpcUrl }]) => {
    const match = /^eip155:(\d+)$/.exec(network)
    if (match === null) return []
    const chain = defineChain({
      id: Number(match[1]),
      name: network,
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } }
    })
    const transport = http(rpcUrl)
    return [[network, {
      chain,
      public: createPublicClient({ chain, transport, pollingInterval }),
      wallet: createWalletClient({ chain, transport, account, pollingInterval })
    }]] as const
  }))

  const rpc = <A>(what: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: () => unavailable(`The chain could not be reached (${what})`) })

  const check = Effect.fn("PaymentFacilitator.local.verify")(function*(payment: X402.MatchedPayment) {
    const { requirements } = payment
    if (requirements.scheme !== "exact" || payment.payload.accepted.scheme !== "exact") {
      return yield* reject("invalid_exact_evm_scheme", "Only the exact scheme is supported")
    }
    const client = clients.get(requirements.network)
    if (client === undefined) return yield* reject("unsupported_network", `Network ${requirements.network} is not settled here`)
    const name = requirements.extra?.["name"]
    const version = requirements.extra?.["version"]
    if (typeof name !== "string" || typeof version !== "string") {
      return yield* reject("invalid_exact_evm_missing_eip712_domain", "The requirement lacks the token's EIP-712 domain")
    }
    const { authorization, signature } = yield* Schema.decodeUnknownEffect(ExactEvmPayload)(payment.payload.payload).pipe(
      Effect.mapError(() => reject("invalid_exact_evm_payload", "The payload is not an EIP-3009 authorization"))
    )
    if (!isAddress(requirements.asset) || !isAddress(requirements.payTo)) {
      return yield* reject("invalid_exact_evm_payload", "The requirement's asset or recipient is not an address")
    }
    const from = getAddress(authorization.from)
    const asset = getAddress(requirements.asset)
    const value = BigInt(authorization.value)
    const nonce = authorization.nonce as Hex
    if (!isAddressEqual(authorization.to as Address, requirements.payTo)) {
      return yield* reject("invalid_exact_evm_recipient_mismatch", "The authorization pays another recipient")
    }
    if (value !== BigInt(requirements.amount)) {
      return yield* reject("invalid_exact_evm_payload_authorization_value_mismatch", "The authorized amount differs from the requirement")
    }
    const now = BigInt(Math.floor(Date.now() / 1000))
    if (BigInt(authorization.validBefore) < now + 6n) {
      return yield* reject("invalid_exact_evm_payload_authorization_valid_before", "The authorization has expired")
    }
    if (BigInt(authorization.validAfter) > now) {
      return yield* reject("invalid_exact_evm_payload_authorization_valid_after", "The authorization is not valid yet")
    }
    const code = yield* rpc("getCode", () => client.public.getCode({ address: from }))
    const wrapped = parseErc6492Signature(signature as Hex)
    const deploy = wrapped.address !== undefined && (code === undefined || code === "0x")
      ? { factory: wrapped.address, data: wrapped.data ?? "0x" }
      : undefined
    if (deploy !== undefined && !allowedFactories.some((factory) => isAddressEqual(factory, deploy.factory))) {
      return yield* reject("eip6492_factory_not_allowed", "The wallet's deploying factory is not allowed")
    }
    const message = {
      from,
      to: getAddress(authorization.to),
      value,
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce
    }
    const valid = yield* Effect.promise(() =>
      client.public.verifyTypedData({
        address: from,
        domain: { name, version, chainId: client.chain.id, verifyingContract: asset },
        types: authorizationTypes,
        primaryType: "TransferWithAuthorization",
        message,
        signature: signature as Hex
      }).catch(() => false)
    )
    if (!valid) return yield* reject("invalid_exact_evm_signature", "The signature does not match the payer")
    const reference = evmReference(requirements.network, asset, from, nonce)
    if (inFlight.has(reference)) {
      return yield* reject("invalid_exact_evm_nonce_already_used", "This authorization is already being settled")
    }
    const used = yield* Effect.tryPromise({
      try: () => client.public.readContract({ address: asset, abi: eip3009Abi, functionName: "authorizationState", args: [from, nonce] }),
      catch: () => reject("invalid_exact_evm_eip3009_not_supported", "The asset does not support EIP-3009")
    })
    if (used) return yield* reject("invalid_exact_evm_nonce_already_used", "This authorization was already used")
    const balance = yield* rpc("balanceOf", () =>
      client.public.readContract({ address: asset, abi: eip3009Abi, functionName: "balanceOf", args: [from] }))
    if (balance < value) return yield* reject("invalid_exact_evm_insufficient_balance", "The payer's balance is too low")
    return { client, asset, from, message, signature: (deploy === undefined ? signature : wrapped.signature) as Hex, deploy, hasCode: code !== undefined && code !== "0x", reference }
  })

  const submit = Effect.fn("PaymentFacilitator.local.submit")(function*(checked: Effect.Success<ReturnType<typeof check>>) {
    const { client, message } = checked
    const send = (f: () => Promise<Hex>) =>
      submissions.withPermits(1)(rpc("sendTransaction", f)).pipe(
        Effect.flatMap((hash) =>
          rpc("waitForTransactionReceipt", () => client.public.waitForTransactionReceipt({ hash, pollingInterval, timeout: receiptTimeoutMs }))
        )
      )
    if (checked.deploy !== undefined) {
      const { deploy } = checked
      const receipt = yield* send(() => client.wallet.sendTransaction({ to: deploy.factory, data: deploy.data, gas: 1_000_000n }))
      if (receipt.status !== "success") return yield* reject("settlement_failed", "The payer's wallet could not be deployed")
    }
    const args = [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce] as const
    const signatureParts = size(checked.signature) === 65 && !checked.hasCode && checked.deploy === undefined
      ? parseSignature(checked.signature)
      : undefined
    const receipt = yield* send(() =>
      signatureParts === undefined
        ? client.wallet.writeContract({
          address: checked.asset,
          abi: eip3009Abi,
          functionName: "transferWithAuthorization",
          args: [...args, checked.signature],
          gas
        })
        : client.wallet.writeContract({
          address: checked.asset,
          abi: eip3009Abi,
          functionName: "transferWithAuthorization",
          args: [...args, Number(signatureParts.v ?? BigInt(signatureParts.yParity + 27)), signatureParts.r, signatureParts.s],
          gas
        })
    )
    if (receipt.status !== "success") {
      return yield* reject("settlement_reverted", `The transfer reverted on chain (${receipt.transactionHash})`)
    }
    const moved = parseEventLogs({ abi: eip3009Abi, logs: receipt.logs, eventName: "Transfer" }).some((log) =>
      isAddressEqual(log.address, checked.asset) && isAddressEqual(log.args.from, message.from) &&
      isAddressEqual(log.args.to, message.to) && log.args.value === message.value
    )
    if (!moved) return yield* reject("settlement_transfer_missing", `The transaction moved no matching USDC (${receipt.transactionHash})`)
    return receipt.transactionHash
  })

  return PaymentFacilitator.of({
    verify: (payment) => Effect.map(check(payment), ({ from }) => ({ payer: from })),
    settle: Effect.fn("PaymentFacilitator.local.settle")(function*(payment: X402.MatchedPayment) {
      const checked = yield* check(payment)
      const amount = yield* amountOf(payment.requirements)
      if (inFlight.has(checked.reference)) {
        return yield* reject("invalid_exact_evm_nonce_already_used", "This authorization is already being settled")
      }
      inFlight.add(checked.reference)
      const transaction = yield* submit(checked).pipe(Effect.ensuring(Effect.sync(() => inFlight.delete(checked.reference))))
      return { payer: checked.from, transaction, network: payment.requirements.network, reference: checked.reference, amount }
    }),
    supported: Effect.succeed({
      kinds: [...clients.keys()].map((network) => ({ x402Version: 2, scheme: "exact", network }))
    })
  })
})

/**
 * The HTTP facilitator client's settings. `headers` are sent with every call (a hosted
 * facilitator's API key).
 *
 * @category models
 */
export interface HttpOptions {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  readonly timeout?: Duration.Input
}

const VerifyResponse = Schema.Struct({
  isValid: Schema.Boolean,
  invalidReason: Schema.optionalKey(Schema.String),
  invalidMessage: Schema.optionalKey(Schema.String),
  payer: Schema.optionalKey(Schema.String)
})

const SettleResponse = Schema.Struct({
  success: Schema.Boolean,
  errorReason: Schema.optionalKey(Schema.String),
  errorMessage: Schema.optionalKey(Schema.String),
  payer: Schema.optionalKey(Schema.String),
  transaction: Schema.String,
  network: Schema.String
})

const SupportedResponse = Schema.Struct({
  kinds: Schema.Array(Schema.Struct({
    x402Version: Schema.Number,
    scheme: Schema.String,
    network: Schema.String,
    extra: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
  }))
})

/**
 * A client of an x402 facilitator over HTTP.
 *
 * @category constructors
 */
export const makeHttp = (options: HttpOptions): Backend => {
  const base = options.url.replace(/\/+$/, "")
  const timeout = options.timeout ?? "90 seconds"
  const call = <S extends Schema.Top>(
    path: string,
    schema: S,
    body: unknown,
    accepts: (status: number, json: unknown) => boolean
  ): Effect.Effect<S["Type"], Errors.ServiceUnavailable, S["DecodingServices"]> =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(`${base}${path}`, {
          method: body === undefined ? "GET" : "POST",
          headers: { ...options.headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          signal,
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        const json: unknown = await response.json().catch(() => undefined)
        if (!accepts(response.status, json)) throw new Error(`${path} answered ${response.status}`)
        return json
      },
      catch: () => unavailable(`The payment facilitator did not answer ${path}`)
    }).pipe(
      Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail(unavailable(`The payment facilitator timed out on ${path}`)) }),
      Effect.flatMap((json) =>
        Schema.decodeUnknownEffect(schema)(json).pipe(
          Effect.mapError(() => unavailable(`The payment facilitator answered ${path} with an unexpected body`))
        )
      )
    )
  const requestBody = (payment: X402.MatchedPayment) => ({
    x402Version: 2,
    paymentPayload: payment.payload,
    paymentRequirements: payment.requirements
  })
  // A 4xx carrying a verdict is a verdict (the official client throws it as VerifyError/SettleError).
  const hasField = (field: string) => (status: number, json: unknown) =>
    (status >= 200 && status < 300) ||
    (status >= 400 && status < 500 && typeof json === "object" && json !== null && field in json)

  const verify = Effect.fn("PaymentFacilitator.http.verify")(function*(payment: X402.MatchedPayment) {
    const answer = yield* call("/verify", VerifyResponse, requestBody(payment), hasField("isValid"))
    if (!answer.isValid) {
      return yield* reject(answer.invalidReason ?? "invalid_payment", answer.invalidMessage ?? "The facilitator refused the payment")
    }
    return { payer: answer.payer ?? "" }
  })

  const settle = Effect.fn("PaymentFacilitator.http.settle")(function*(payment: X402.MatchedPayment) {
    const amount = yield* amountOf(payment.requirements)
    const answer = yield* call("/settle", SettleResponse, requestBody(payment), hasField("success"))
    if (!answer.success || answer.transaction === "") {
      return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The facilitator could not settle the payment")
    }
    const network = payment.requirements.network
    const evm = Schema.decodeUnknownOption(ExactEvmPayload)(payment.payload.payload)
    const reference = network.startsWith("eip155:") && Option.isSome(evm)
      ? evmReference(network, payment.requirements.asset, evm.value.authorization.from, evm.value.authorization.nonce)
      : solanaReference(network, answer.transaction)
    const payer = answer.payer ?? (Option.isSome(evm) ? evm.value.authorization.from : "")
    if (payer === "") return yield* unavailable("The payment facilitator did not name the payer")
    return { payer, transaction: answer.transaction, network, reference, amount }
  })

  return PaymentFacilitator.of({
    verify,
    settle,
    supported: call("/supported", SupportedResponse, undefined, (status) => status >= 200 && status < 300)
  })
}

/**
 * The local Solana backend's settings. `networks` maps each CAIP-2 Solana network to its RPC URL;
 * the fee payer (a 64-byte ed25519 secret key, as `solana-keygen` writes it) signs every
 * settlement as fee payer and needs SOL on each network, never USDC.
 *
 * @category models
 */
export interface LocalSvmOptions {
  readonly networks: Readonly<Record<string, { readonly rpcUrl: string }>>
  readonly feePayerKey: Redacted.Redacted<Uint8Array>
}

/**
 * The local Solana backend: `@x402/svm`'s `ExactSvmScheme` facilitator, co-signing with the
 * configured fee payer over the configured RPC URLs.
 *
 * @category constructors
 */
export const makeLocalSvm = Effect.fn("PaymentFacilitator.makeLocalSvm")(function*(options: LocalSvmOptions) {
  // Loaded only when Solana is settled here: the Solana stack adds about 200 ms to every start
  // (measured on the reference machine) that a server without it should not pay.
  const [{ createKeyPairSignerFromBytes, createSolanaRpc, mainnet }, { x402Facilitator }, { toFacilitatorSvmSigner }, { ExactSvmScheme }] =
    yield* Effect.promise(() =>
      Promise.all([import("@solana/kit"), import("@x402/core/facilitator"), import("@x402/svm"), import("@x402/svm/exact/facilitator")])
    )
  const keyPair = yield* Effect.tryPromise({
    try: () => createKeyPairSignerFromBytes(Redacted.value(options.feePayerKey)),
    catch: () => unavailable("The Solana fee payer key is not a 64-byte ed25519 key pair")
  })
  const rpcs = Object.fromEntries(
    Object.entries(options.networks).map(([network, { rpcUrl }]) => [network, createSolanaRpc(mainnet(rpcUrl))])
  )
  const facilitator = new x402Facilitator().register(
    Object.keys(options.networks) as Array<`${string}:${string}`>,
    new ExactSvmScheme(toFacilitatorSvmSigner(keyPair, rpcs))
  )
  // The SDK's types are mutable copies of tollgate's readonly ones.
  const sdk = (payment: X402.MatchedPayment) =>
    [payment.payload as unknown as SdkPaymentPayload, payment.requirements as unknown as SdkPaymentRequirements] as const
  const call = <A>(what: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: () => unavailable(`The Solana facilitator failed (${what})`) })

  return PaymentFacilitator.of({
    verify: Effect.fn("PaymentFacilitator.svm.verify")(function*(payment: X402.MatchedPayment) {
      const answer = yield* call("verify", () => facilitator.verify(...sdk(payment)))
      if (!answer.isValid) {
        return yield* reject(answer.invalidReason ?? "invalid_payment", answer.invalidMessage ?? "The Solana payment is not valid")
      }
      return { payer: answer.payer ?? "" }
    }),
    settle: Effect.fn("PaymentFacilitator.svm.settle")(function*(payment: X402.MatchedPayment) {
      const amount = yield* amountOf(payment.requirements)
      const answer = yield* call("settle", () => facilitator.settle(...sdk(payment)))
      if (answer.errorReason === "settlement_pending") {
        return yield* unavailable("The Solana transaction was sent but is not confirmed yet; retry the same payment")
      }
      if (!answer.success || answer.transaction === "" || answer.payer === undefined || answer.payer === "") {
        return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The Solana payment could not be settled")
      }
      const network = payment.requirements.network
      return { payer: answer.payer, transaction: answer.transaction, network, reference: solanaReference(network, answer.transaction), amount }
    }),
    supported: Effect.sync(() => facilitator.getSupported() as Supported)
  })
})

/**
 * Routes each payment by network: the first local backend that supports it serves it (local EVM,
 * then local Solana); any other network goes to the HTTP facilitator, when there is one.
 * `supported` is the union.
 *
 * @category constructors
 */
export const combine = (locals: ReadonlyArray<Backend | undefined>, remote: Backend | undefined): Backend => {
  const present = locals.filter((backend): backend is Backend => backend !== undefined)
  const pick = (network: string) => Effect.gen(function*() {
    for (const backend of present) {
      const supported = yield* backend.supported
      if (supported.kinds.some((kind) => kind.network === network)) return backend
    }
    if (remote !== undefined) return remote
    return yield* reject("unsupported_network", `Network ${network} is not supported`)
  })
  const all = remote === undefined ? present : [...present, remote]
  return PaymentFacilitator.of({
    verify: (payment) => Effect.flatMap(pick(payment.requirements.network), (backend) => backend.verify(payment)),
    settle: (payment) => Effect.flatMap(pick(payment.requirements.network), (backend) => backend.settle(payment)),
    supported: Effect.map(Effect.forEach(all, (backend) => backend.supported), (each) => ({ kinds: each.flatMap((s) => s.kinds) }))
  })
}

/**
 * The facilitator of a deployment: local EVM settlement when `local` is given, local Solana
 * settlement when `svm` is given, the HTTP facilitator when `http` is given, each network served
 * by the first that supports it.
 *
 * @category layers
 */
export const layer = (options: {
  readonly local?: LocalEvmOptions
  readonly svm?: LocalSvmOptions
  readonly http?: HttpOptions
}): Layer.Layer<PaymentFacilitator, Errors.ServiceUnavailable> =>
  Layer.effect(
    PaymentFacilitator,
    Effect.gen(function*() {
      const local = options.local === undefined ? undefined : yield* makeLocalEvm(options.local)
      const svm = options.svm === undefined ? undefined : yield* makeLocalSvm(options.svm)
      const remote = options.http === undefined ? undefined : makeHttp(options.http)
      return combine([local, svm], remote)
    })
  )
