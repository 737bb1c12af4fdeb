/**
 * The local EVM backend: the official `@x402/evm` facilitator schemes (`ExactEvmScheme`, and
 * `UptoEvmScheme` for the `upto` payments of calls priced by their outcome, see `settleActual`)
 * inside an `@x402/core` `x402Facilitator`, one scheme per configured chain, sending from the
 * relayer key. A payment counts as settled only on a mined receipt with the matching `Transfer`
 * log.
 *
 * **Details**
 *
 * It checks the EIP-3009 authorization (recipient, amount, time window, the signature of a key, an
 * EIP-1271 contract wallet, or an EIP-6492 counterfactual wallet of an allowed factory) and
 * simulates the transfer, which refuses a used nonce, a short balance or a blacklisted payer before
 * the relayer pays for a revert; settling simulates once more and sends (after deploying an
 * EIP-6492 wallet). Tollgate keeps what is its own: the credit reference `(network, token, from,
 * nonce)`, the guard that settles one authorization once at a time here, the relayer's sends one at
 * a time, and the refusal reasons its clients already know (`settlement_reverted` for a transfer
 * that fails).
 *
 * A transaction sent but not confirmed in time is kept in a pending settlements store: the top-up
 * answers 503, and the retried payment, whose money has already moved, collects that transaction.
 *
 * @since 0.1.0
 */
import { Money, type X402 } from "@tollgate/core"
import type { PendingSettlementStore } from "@x402/core/facilitator"
import { Duration, Effect, Redacted, Schema, Semaphore } from "effect"
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
import {
  amountOf,
  type Backend,
  evmReference,
  ExactEvmPayload,
  pendingSettlementsOf,
  reject,
  stillPending,
  type Supported,
  toSdk,
  unavailable,
  UptoEvmPayload,
  uptoReference
} from "./Facilitator.ts"

/**
 * The refusal reasons of the `@x402/evm` facilitator that tollgate names its own way. A transfer
 * that fails on chain is `settlement_reverted` to tollgate's clients, the reason docs/wallets.md
 * documents for them; the SDK says `..._simulation_failed` when its simulation shows the failure
 * (nothing sent, no gas spent) and `..._transaction_failed` when a sent transaction reverts. The
 * message tells which. Every other SDK reason is passed through.
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
  const [{ InMemoryPendingSettlementStore, x402Facilitator }, { toFacilitatorEvmSigner }, { ExactEvmScheme }, { UptoEvmScheme }] =
    yield* Effect
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
      return yield* reject(
        answer.invalidReason ?? "invalid_payment",
        answer.invalidMessage ?? `The permit was refused (${answer.invalidReason})`
      )
    })

  const backend: Backend = {
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
  }
  return backend
})
