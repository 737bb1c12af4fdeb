/**
 * The local Solana backend: the official `@x402/svm` facilitator scheme inside an `@x402/core`
 * `x402Facilitator`. It checks the partially signed transfer (instruction layout, mint, amount,
 * destination account of `payTo`, that the fee payer is ours and moves no funds, the payer's
 * signature, a simulation, which refuses an expired blockhash), co-signs as fee payer with the
 * configured key, sends and confirms over the configured RPC URL. Tollgate keeps only what is its
 * own: the credit reference (the transaction signature) that makes a payment count once.
 *
 * @since 0.1.0
 */
import { type X402 } from "@tollgate/core"
import type { PendingSettlementStore } from "@x402/core/facilitator"
import { Effect, Redacted } from "effect"
import {
  amountOf,
  type Backend,
  pendingSettlementsOf,
  reject,
  solanaReference,
  stillPending,
  type Supported,
  toSdk,
  unavailable
} from "./Facilitator.ts"

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

  const backend: Backend = {
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
      return {
        payer: answer.payer,
        transaction: answer.transaction,
        network,
        reference: solanaReference(network, answer.transaction),
        amount
      }
    }),
    settleActual: () => Effect.fail(reject("unsupported_scheme", "Solana payments are settled exactly")),
    supported: Effect.sync(() => facilitator.getSupported() as Supported)
  }
  return backend
})
