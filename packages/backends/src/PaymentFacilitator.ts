/**
 * Verifying and settling x402 payments. A top-up credits a wallet only after its payment has been
 * verified and settled here; what is credited is keyed by the `reference` returned, so a payment
 * credits at most once however often it is submitted.
 *
 * Three backends, combined by network in `layer`:
 * - local EVM: the official `@x402/evm` facilitator schemes (`ExactEvmScheme`, and `UptoEvmScheme`
 *   for the `upto` payments of calls priced by their outcome, see `settleActual`) inside an
 *   `@x402/core` `x402Facilitator`, one scheme per configured chain, sending from the relayer key.
 *   It checks the EIP-3009 authorization (recipient, amount, time window, the signature of a key,
 *   an EIP-1271 contract wallet, or an EIP-6492 counterfactual wallet of an allowed factory) and
 *   simulates the transfer, which refuses a used nonce, a short balance or a blacklisted payer
 *   before the relayer pays for a revert; settling simulates once more, sends (after deploying an
 *   EIP-6492 wallet) and succeeds only on a mined receipt with the matching `Transfer` log.
 *   Tollgate keeps what is its own: the credit reference `(network, token, from, nonce)`, the guard
 *   that settles one authorization once at a time here, the relayer's sends one at a time, and the
 *   refusal reasons its clients already know (`settlement_reverted` for a transfer that fails);
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
 * Both local backends keep a transaction sent but not confirmed in time in a pending settlements
 * store (`@x402/core`'s `PendingSettlementStore`, `@tollgate/core/PendingSettlements`): the top-up
 * answers 503, and the retried payment, whose money has already moved, is accepted and collects
 * that transaction. Several processes must share the store (Redis), or a retry reaching another
 * one is refused while the payer has paid.
 *
 * @since 0.1.0
 */
import { Errors, Money, X402 } from "@tollgate/core"
import { Context, Duration, Effect, Layer, Option, Redacted, Schedule, Schema, Semaphore } from "effect"
import {
  type Address,
  BaseError,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  HttpRequestError,
  publicActions,
  TimeoutError
} from "viem"
import { nonceManager, privateKeyToAccount } from "viem/accounts"
import type { PendingSettlementStore } from "@x402/core/facilitator"
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
  /**
   * Settles `amount` (at most the permitted maximum) of an `upto` payment, once the call's actual
   * charge is known; `Settled.amount` is that amount, rounded up to a USDC base unit. Nothing
   * moves for 0 (an empty `transaction`).
   */
  readonly settleActual: (payment: X402.MatchedPayment, amount: Money.Nano) => Effect.Effect<Settled, FacilitatorError>
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

// The SDK's types are mutable copies of tollgate's readonly ones.
const toSdk = (payment: X402.MatchedPayment) =>
  [payment.payload as unknown as SdkPaymentPayload, payment.requirements as unknown as SdkPaymentRequirements] as const

/**
 * The `upto` EVM payload: a Permit2 `PermitWitnessTransferFrom` for the x402 upto proxy, whose
 * witness names the recipient and the facilitator allowed to settle it, and its signature.
 *
 * @category schemas
 */
export const UptoEvmPayload = Schema.Struct({
  signature: Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]*$/u)),
  permit2Authorization: Schema.Struct({
    from: AddressString,
    permitted: Schema.Struct({ token: AddressString, amount: Uint }),
    spender: AddressString,
    nonce: Uint,
    deadline: Uint,
    witness: Schema.Struct({ to: AddressString, facilitator: AddressString, validAfter: Uint })
  })
})

/**
 * The reference of an `upto` permit: one per `(chain, token, from, Permit2 nonce)`, which Permit2
 * lets be used once.
 *
 * @category constructors
 */
export const uptoReference = (network: string, asset: string, from: string, nonce: string): string =>
  `x402-upto:${network}:${asset.toLowerCase()}:${from.toLowerCase()}:${nonce}`

/** @category constructors */
export const solanaReference = (network: string, signature: string): string => `x402:${network}:${signature}`

/**
 * The refusal reasons of the `@x402/evm` facilitator that tollgate names its own way. A transfer
 * that fails on chain is `settlement_reverted` to tollgate's clients, who matched on that reason
 * before the SDK settled EVM payments here; the SDK says `..._simulation_failed` when its
 * simulation shows the failure (nothing sent, no gas spent) and `..._transaction_failed` when a
 * sent transaction reverts. The message tells which. Every other SDK reason is passed through.
 */
const SETTLEMENT_REVERTED = "settlement_reverted"
const SIMULATION_FAILED = "invalid_exact_evm_transaction_simulation_failed"
const TRANSACTION_FAILED = "invalid_exact_evm_transaction_failed"
const NONCE_ALREADY_USED = "invalid_exact_evm_nonce_already_used"

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
  readonly pollingIntervalMs?: number
  /** How long a sent settlement waits for its receipt before the top-up answers 503 (retry). */
  readonly receiptTimeout?: Duration.Input
  /**
   * Where a settlement whose receipt was late is remembered until the payment is sent again. The
   * default, the SDK's in-memory store, serves one process: several instances or workers must
   * share one (`PendingSettlementsRedis`), or a retry that reaches another process is refused
   * while the payer's money has moved.
   */
  readonly pendingSettlements?: PendingSettlementStore
}

/** @category models */
export type Backend = PaymentFacilitator["Service"]

/**
 * The `extra` of the `upto` entries this server's 402s offer when the local EVM backend settles
 * them (`X402.EvmOption.upto`): what `@x402/evm/upto/server` adds for a facilitator whose address is
 * the relayer's (the Permit2 transfer method, and the facilitator the payer's permit must name,
 * since only it may settle the permit).
 *
 * @category constructors
 */
export const uptoExtra = (relayerKey: Redacted.Redacted<Hex>, network: string): Effect.Effect<Readonly<Record<string, unknown>>> =>
  Effect.promise(async () => {
    const { UptoEvmScheme } = await import("@x402/evm/upto/server")
    const facilitatorAddress = privateKeyToAccount(Redacted.value(relayerKey)).address
    const enhanced = await new UptoEvmScheme().enhancePaymentRequirements(
      { scheme: "upto", network: network as `${string}:${string}`, asset: "", amount: "0", payTo: "", maxTimeoutSeconds: 0, extra: {} },
      { x402Version: 2, scheme: "upto", network: network as `${string}:${string}`, extra: { facilitatorAddress } },
      []
    )
    return enhanced.extra ?? {}
  })

/**
 * A pending settlements store as a backend uses it: the SDK scheme gets `store`, which remembers
 * a sent transaction it failed to record (Redis unreachable). The SDK then answers as if the
 * transfer had failed, though its money moves once it lands; `recordAgain`, after such a
 * settlement, keeps trying to record it for a few seconds (a Redis restart or failover) and tells
 * the backend to answer 503, so the retry collects it. It logs the transaction at error level if
 * it never could.
 */
const pendingSettlementsOf = (pending: PendingSettlementStore) => {
  const unrecorded = new Map<string, string>()
  const store: PendingSettlementStore = {
    get: (key) => pending.get(key),
    set: (key, txHash) =>
      pending.set(key, txHash).catch((error: unknown) => {
        unrecorded.set(key, txHash)
        throw error
      }),
    delete: (key) => pending.delete(key)
  }
  const isPending = (key: string) =>
    Effect.tryPromise({
      try: async () => (await pending.get(key)) !== undefined,
      catch: () => unavailable("The store of pending settlements could not be reached")
    })
  const recordAgain = (key: string, payment: { readonly payer: string; readonly network: string }) =>
    Effect.gen(function*() {
      const sent = unrecorded.get(key)
      if (sent === undefined) return false
      unrecorded.delete(key)
      yield* Effect.tryPromise(() => pending.set(key, sent)).pipe(
        Effect.retry({ schedule: Schedule.spaced("500 millis"), times: 10 }),
        Effect.catch(() =>
          Effect.logError("A settlement was sent but could not be recorded for its retry; credit it by hand once it lands", {
            ...payment,
            transaction: sent
          })
        )
      )
      return true
    })
  return { store, isPending, recordAgain }
}

const stillPending = () => unavailable("The transfer was sent but is not confirmed yet; retry the same payment")

// A failure to reach the node at all, as opposed to a call the chain answered (a revert).
const isUnreachable = (error: unknown) =>
  error instanceof BaseError && error.walk((cause) => cause instanceof HttpRequestError || cause instanceof TimeoutError) !== null

/**
 * The local EVM backend: `@x402/evm`'s `ExactEvmScheme` facilitator, one per configured chain,
 * signing with the relayer key.
 *
 * @category constructors
 */
export const makeLocalEvm = Effect.fn("PaymentFacilitator.makeLocalEvm")(function*(options: LocalEvmOptions) {
  // Loaded only when EVM payments are settled here, as the Solana stack is (about 30 ms of start
  // on top of viem, measured on the reference machine).
  const [{ InMemoryPendingSettlementStore, x402Facilitator }, { toFacilitatorEvmSigner }, { ExactEvmScheme }, { UptoEvmScheme }] = yield* Effect
    .promise(() =>
      Promise.all([
        import("@x402/core/facilitator"),
        import("@x402/evm"),
        import("@x402/evm/exact/facilitator"),
        import("@x402/evm/upto/facilitator")
      ])
    )
  const account = privateKeyToAccount(Redacted.value(options.relayerKey), { nonceManager })
  const pollingInterval = options.pollingIntervalMs ?? 1_000
  const confirmationTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.receiptTimeout ?? "2 minutes"))
  // The relayer sends one transaction at a time: a send that fails (its gas estimate reverts, say)
  // resets viem's nonce manager before the next send takes a nonce, so no nonce is left unused.
  const submissions = yield* Semaphore.make(1)
  const oneAtATime = <A>(send: () => Promise<A>) =>
    Effect.runPromise(submissions.withPermits(1)(Effect.tryPromise({ try: send, catch: (error) => error })))
  // Reads that never reached the node. The SDK turns a failed read into a verdict (a wallet whose
  // code cannot be read has an "invalid signature"); a refusal reached while one happened is a 503.
  let unreachable = 0
  const counted = (error: unknown) => {
    if (isUnreachable(error)) unreachable++
    throw error
  }
  // A transaction the SDK sent whose receipt was late, by payment signature: the retried payment
  // collects that receipt instead of sending again. `verify` reads the very store the scheme writes.
  const pending = pendingSettlementsOf(options.pendingSettlements ?? new InMemoryPendingSettlementStore())
  const inFlight = new Set<string>()
  const facilitator = new x402Facilitator()
  for (const [network, { rpcUrl }] of Object.entries(options.chains)) {
    const match = /^eip155:(\d+)$/.exec(network)
    if (match === null) continue
    const chain = defineChain({
      id: Number(match[1]),
      name: network,
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } }
    })
    const client = createWalletClient({ chain, transport: http(rpcUrl), account, pollingInterval }).extend(publicActions)
    const signer = toFacilitatorEvmSigner({
      address: account.address,
      // A code read that cannot reach the node is counted and answered as "no code": the SDK starts
      // some of these reads without awaiting them on every path, so a rejection could go unhandled.
      getCode: (args) =>
        client.getCode(args).catch((error: unknown) => {
          if (!isUnreachable(error)) throw error
          unreachable++
          return undefined
        }),
      readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]).catch(counted),
      verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]).catch(counted),
      writeContract: (args) => oneAtATime(() => client.writeContract(args as Parameters<typeof client.writeContract>[0])),
      sendTransaction: (args) => oneAtATime(() => client.sendTransaction(args)),
      waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args)
    }, { confirmationTimeoutMs })
    facilitator.register(
      network as `${string}:${string}`,
      new ExactEvmScheme(signer, {
        eip6492AllowedFactories: [...(options.eip6492AllowedFactories ?? [])],
        // Settlement simulates again right before sending: an authorization used (or a payer
        // blacklisted) since `verify` is refused without the relayer paying for a revert.
        simulateInSettle: true,
        pendingSettlementStore: pending.store
      })
    )
    // `upto`: the payer's Permit2 permit names this relayer as the one facilitator allowed to
    // settle it; settling simulates the proxy's transfer again before sending.
    facilitator.register(network as `${string}:${string}`, new UptoEvmScheme(signer, { pendingSettlementStore: pending.store }))
  }
  const networks = new Set(facilitator.getSupported().kinds.map((kind) => kind.network))

  const call = <A>(what: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: () => unavailable(`The chain could not be reached (${what})`) })

  const authorizationOf = (payment: X402.MatchedPayment) =>
    Effect.gen(function*() {
      const { requirements } = payment
      if (!networks.has(requirements.network)) {
        return yield* reject("unsupported_network", `Network ${requirements.network} is not settled here`)
      }
      // An EIP-3009 authorization, the payload tollgate's requirements ask for; its `(from, nonce)`
      // is the credit reference.
      const { authorization, signature } = yield* Schema.decodeUnknownEffect(ExactEvmPayload)(payment.payload.payload).pipe(
        Effect.mapError(() => reject("invalid_exact_evm_payload", "The payload is not an EIP-3009 authorization"))
      )
      return {
        payer: getAddress(authorization.from),
        signature,
        reference: evmReference(requirements.network, requirements.asset, authorization.from, authorization.nonce)
      }
    })

  const refusal = (reason: string | undefined, message: string | undefined) =>
    reason === SIMULATION_FAILED
      ? reject(SETTLEMENT_REVERTED, "The transfer would fail on chain, as its simulation shows; nothing was sent and no gas was spent")
      : reject(reason ?? "invalid_payment", message ?? `The payment was refused (${reason ?? "no reason given"})`)

  const alreadySettling = reject(NONCE_ALREADY_USED, "This authorization is already being settled")

  const permitOf = (payment: X402.MatchedPayment) =>
    Effect.gen(function*() {
      const { requirements } = payment
      if (!networks.has(requirements.network)) {
        return yield* reject("unsupported_network", `Network ${requirements.network} is not settled here`)
      }
      const { permit2Authorization } = yield* Schema.decodeUnknownEffect(UptoEvmPayload)(payment.payload.payload).pipe(
        Effect.mapError(() => reject("invalid_upto_evm_payload", "The payload is not a Permit2 upto permit"))
      )
      return {
        payer: getAddress(permit2Authorization.from),
        reference: uptoReference(requirements.network, requirements.asset, permit2Authorization.from, permit2Authorization.nonce)
      }
    })

  const verifyUpto = (payment: X402.MatchedPayment) =>
    Effect.gen(function*() {
      const { payer } = yield* permitOf(payment)
      const unreachableBefore = unreachable
      const answer = yield* call("verify", () => facilitator.verify(...toSdk(payment)))
      if (answer.isValid) return { payer }
      if (unreachable !== unreachableBefore) return yield* unavailable("The chain could not be reached while checking the payment")
      return yield* reject(answer.invalidReason ?? "invalid_payment", answer.invalidMessage ?? `The permit was refused (${answer.invalidReason})`)
    })

  return PaymentFacilitator.of({
    verify: Effect.fn("PaymentFacilitator.evm.verify")(function*(payment: X402.MatchedPayment) {
      if (payment.requirements.scheme === "upto") return yield* verifyUpto(payment)
      const { payer, reference, signature } = yield* authorizationOf(payment)
      if (inFlight.has(reference)) return yield* alreadySettling
      const unreachableBefore = unreachable
      const answer = yield* call("verify", () => facilitator.verify(...toSdk(payment)))
      if (answer.isValid) return { payer }
      if (unreachable !== unreachableBefore) return yield* unavailable("The chain could not be reached while checking the payment")
      // The retry a late receipt asked for: the nonce is used by the transaction sent for this very
      // payment (every check before the simulation passed), and `settle` collects its receipt.
      if (answer.invalidReason === NONCE_ALREADY_USED && (yield* pending.isPending(signature))) {
        return { payer }
      }
      return yield* refusal(answer.invalidReason, answer.invalidMessage)
    }),
    settle: Effect.fn("PaymentFacilitator.evm.settle")(function*(payment: X402.MatchedPayment) {
      const amount = yield* amountOf(payment.requirements)
      const { payer, reference, signature } = yield* authorizationOf(payment)
      if (inFlight.has(reference)) return yield* alreadySettling
      inFlight.add(reference)
      const unreachableBefore = unreachable
      const answer = yield* call("settle", () => facilitator.settle(...toSdk(payment))).pipe(
        Effect.ensuring(Effect.sync(() => inFlight.delete(reference)))
      )
      const network = payment.requirements.network
      if (answer.success) return { payer, transaction: answer.transaction, network, reference, amount }
      const unrecorded = yield* pending.recordAgain(signature, { payer, network })
      if (answer.errorReason === "settlement_pending" || unrecorded) return yield* stillPending()
      if (answer.errorReason === TRANSACTION_FAILED) {
        // Without a transaction nothing was mined: the send itself failed (the node, the relayer's
        // gas money, or a state change since the simulation). A retry gets a fresh verdict.
        return yield* answer.transaction === ""
          ? unavailable("The settlement could not be sent; retry the same payment")
          : reject(SETTLEMENT_REVERTED, `The transfer reverted on chain (${answer.transaction})`)
      }
      if (unreachable !== unreachableBefore) return yield* unavailable("The chain could not be reached while settling the payment")
      return yield* refusal(answer.errorReason, answer.errorMessage)
    }),
    settleActual: Effect.fn("PaymentFacilitator.evm.settleActual")(function*(payment: X402.MatchedPayment, charge: Money.Nano) {
      const { payer, reference } = yield* permitOf(payment)
      const units = Money.toUsdcUnits(charge)
      const amount = yield* amountOf({ ...payment.requirements, amount: units })
      if (inFlight.has(reference)) return yield* reject("permit2_nonce_already_used", "This permit is already being settled")
      inFlight.add(reference)
      const [payload, requirements] = toSdk(payment)
      const answer = yield* call("settle", () => facilitator.settle(payload, { ...requirements, amount: units })).pipe(
        Effect.ensuring(Effect.sync(() => inFlight.delete(reference)))
      )
      const network = payment.requirements.network
      if (answer.success) return { payer, transaction: answer.transaction, network, reference, amount }
      if (answer.errorReason === "settlement_pending") return yield* stillPending()
      return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The permit could not be settled")
    }),
    supported: Effect.sync(() => facilitator.getSupported() as Supported)
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

  const settleActual = Effect.fn("PaymentFacilitator.http.settleActual")(function*(payment: X402.MatchedPayment, charge: Money.Nano) {
    const permit = yield* Schema.decodeUnknownEffect(UptoEvmPayload)(payment.payload.payload).pipe(
      Effect.mapError(() => reject("invalid_upto_evm_payload", "The payload is not a Permit2 upto permit"))
    )
    const units = Money.toUsdcUnits(charge)
    const amount = yield* amountOf({ ...payment.requirements, amount: units })
    const body = { ...requestBody(payment), paymentRequirements: { ...payment.requirements, amount: units } }
    const answer = yield* call("/settle", SettleResponse, body, hasField("success"))
    if (!answer.success || (answer.transaction === "" && amount > 0)) {
      return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The facilitator could not settle the permit")
    }
    const { asset, network } = payment.requirements
    const { from, nonce } = permit.permit2Authorization
    return { payer: getAddress(from), transaction: answer.transaction, network, reference: uptoReference(network, asset, from, nonce), amount }
  })

  return PaymentFacilitator.of({
    verify,
    settle,
    settleActual,
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
  /** As `LocalEvmOptions.pendingSettlements`, keyed by the transaction's message hash. */
  readonly pendingSettlements?: PendingSettlementStore
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
  const [
    { createKeyPairSignerFromBytes, createSolanaRpc, mainnet },
    { InMemoryPendingSettlementStore, x402Facilitator },
    { decodeTransactionFromPayload, getTokenPayerFromTransaction, toFacilitatorSvmSigner, transactionMessageHash },
    { ExactSvmScheme }
  ] = yield* Effect.promise(() =>
    Promise.all([import("@solana/kit"), import("@x402/core/facilitator"), import("@x402/svm"), import("@x402/svm/exact/facilitator")])
  )
  const keyPair = yield* Effect.tryPromise({
    try: () => createKeyPairSignerFromBytes(Redacted.value(options.feePayerKey)),
    catch: () => unavailable("The Solana fee payer key is not a 64-byte ed25519 key pair")
  })
  const rpcs = Object.fromEntries(
    Object.entries(options.networks).map(([network, { rpcUrl }]) => [network, createSolanaRpc(mainnet(rpcUrl))])
  )
  // A transaction sent whose confirmation was late, by message hash (the SDK's key): the retried
  // payment collects it instead of being refused (it already moved the payer's USDC).
  const pending = pendingSettlementsOf(options.pendingSettlements ?? new InMemoryPendingSettlementStore())
  const facilitator = new x402Facilitator().register(
    Object.keys(options.networks) as Array<`${string}:${string}`>,
    new ExactSvmScheme(toFacilitatorSvmSigner(keyPair, rpcs), undefined, { pendingSettlementStore: pending.store })
  )
  const call = <A>(what: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: () => unavailable(`The Solana facilitator failed (${what})`) })
  const transactionOf = (payment: X402.MatchedPayment) => {
    try {
      const transaction = decodeTransactionFromPayload(payment.payload.payload as { transaction: string })
      return { key: transactionMessageHash(transaction), payer: getTokenPayerFromTransaction(transaction) }
    } catch {
      return undefined
    }
  }

  return PaymentFacilitator.of({
    verify: Effect.fn("PaymentFacilitator.svm.verify")(function*(payment: X402.MatchedPayment) {
      const answer = yield* call("verify", () => facilitator.verify(...toSdk(payment)))
      if (answer.isValid) return { payer: answer.payer ?? "" }
      // The retry a late confirmation asked for: the transaction already moved the payer's USDC, so
      // its simulation may fail now, and `settle` collects the one sent.
      const transaction = transactionOf(payment)
      if (transaction !== undefined && (yield* pending.isPending(transaction.key))) return { payer: transaction.payer }
      return yield* reject(answer.invalidReason ?? "invalid_payment", answer.invalidMessage ?? "The Solana payment is not valid")
    }),
    settle: Effect.fn("PaymentFacilitator.svm.settle")(function*(payment: X402.MatchedPayment) {
      const amount = yield* amountOf(payment.requirements)
      const answer = yield* call("settle", () => facilitator.settle(...toSdk(payment)))
      const transaction = transactionOf(payment)
      const unrecorded = transaction !== undefined &&
        (yield* pending.recordAgain(transaction.key, { payer: transaction.payer, network: payment.requirements.network }))
      if (answer.errorReason === "settlement_pending" || unrecorded) return yield* stillPending()
      if (!answer.success || answer.transaction === "" || answer.payer === undefined || answer.payer === "") {
        return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The Solana payment could not be settled")
      }
      const network = payment.requirements.network
      return { payer: answer.payer, transaction: answer.transaction, network, reference: solanaReference(network, answer.transaction), amount }
    }),
    settleActual: () => Effect.fail(reject("unsupported_scheme", "Solana payments are settled exactly")),
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
    settleActual: (payment, amount) => Effect.flatMap(pick(payment.requirements.network), (backend) => backend.settleActual(payment, amount)),
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
