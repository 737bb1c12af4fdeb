/**
 * What a payment facilitator backend is, and what the three backends (`LocalEvm`, `LocalSolana`,
 * `Hosted`) share: the verdicts they answer, the payloads they read, and the credit reference that
 * makes a payment count once.
 *
 * The helpers under "internals" are for those backends only: a refusal, an outage, the amount of
 * a payment, and the store of settlements sent but not yet confirmed.
 *
 * @since 0.1.0
 */
import { Errors, Money, X402 } from "@tollgate/core"
import type { PendingSettlementStore } from "@x402/core/facilitator"
import type { PaymentPayload as SdkPaymentPayload, PaymentRequirements as SdkPaymentRequirements } from "@x402/core/types"
import { Effect, Option, Schedule, Schema } from "effect"

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

/**
 * What each backend does for the `PaymentFacilitator` service.
 *
 * @category models
 */
export interface Backend {
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
}

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

/** @category internals */
export const reject = (reason: string, message: string) => new X402.PaymentRejected({ reason, message })

export const unavailable = (message: string) => new Errors.ServiceUnavailable({ message, retryAfterSeconds: 5 })

export const amountOf = (requirements: X402.PaymentRequirements) =>
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

/** @category internals */
// The SDK's types are mutable copies of tollgate's readonly ones.
export const toSdk = (payment: X402.MatchedPayment) =>
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

/** @category internals */
/**
 * A pending settlements store as a backend uses it: the SDK scheme gets `store`, which remembers
 * a sent transaction it failed to record (Redis unreachable). The SDK then answers as if the
 * transfer had failed, though its money moves once it lands; `recordAgain`, after such a
 * settlement, keeps trying to record it for a few seconds (a Redis restart or failover) and tells
 * the backend to answer 503, so the retry collects it. It logs the transaction at error level if
 * it never could.
 */
export const pendingSettlementsOf = (pending: PendingSettlementStore) => {
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

export const stillPending = () => unavailable("The transfer was sent but is not confirmed yet; retry the same payment")
