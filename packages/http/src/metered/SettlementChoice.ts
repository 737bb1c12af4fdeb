/**
 * How a paid call's settlement goes with its response: the one choice `PaidCall.respond` makes,
 * as a function of what the call returned and what the store and the payment allow.
 *
 * - `Deferred`: the call's work outlives the request (a video job): its hold is left open for the
 *   job, and only the rate-limit reservations are settled now.
 * - `Stream`: a streamed answer is settled when its stream ends, whatever ends it.
 * - `RespondFirst`: the response goes before the store acknowledges the settlement, which runs on
 *   its own (`PaidCall.respondFirst`).
 * - `SettleThenRespond`: the response waits for the settlement.
 *
 * A response may go first only when that gains something and loses nothing: the store does I/O to
 * settle (`AdmissionStore.settlesInProcess` is false), no payment sent with the call settles the
 * charge before the answer (an x402 `upto` permit's answer carries its on-chain settlement), the
 * hold has time left for the settlement to wait for its group and for the store to answer
 * (`RESPOND_FIRST_MARGIN_MS`), and an `Idempotency-Key` record, when there is one, is completed in
 * the settlement's own step (`AdmissionStore.completesRecordsInStep`), so a replay sent once the
 * answer is in never finds a settlement run without its record.
 *
 * @since 0.1.0
 */

/**
 * How long before its hold expires a call's response may still go before its settlement: enough
 * for the settlement to wait for its group (`AdmissionStoreRedis.Options.settlementGroupMs`) and
 * for Redis to answer (its timeout), many times over. A call that ran closer to its hold's expiry
 * is settled first: its capture may find the hold released.
 *
 * @category constants
 */
export const RESPOND_FIRST_MARGIN_MS = 10_000

/** @category models */
export type SettlementChoice = "Deferred" | "Stream" | "RespondFirst" | "SettleThenRespond"

/** @category models */
export interface Input {
  /** What the call's work returned: `MeteredCall.execute`'s outcome, by its kind. */
  readonly outcome: "Deferred" | "Streaming" | "Outcome"
  /** The store settles in this process with no I/O (`AdmissionStore.settlesInProcess`). */
  readonly settlesInProcess: boolean
  /** A payment sent with the call settles its charge before the answer (`PerCallPayment.Accepted.fundsHold`). */
  readonly paymentSettlesCharge: boolean
  /** How long the call's hold has left when its work ended. */
  readonly holdLeftMs: number
  /** The call carries an `Idempotency-Key`. */
  readonly idempotencyKey: boolean
  /** The store completes the `Idempotency-Key` record in the settlement's step (`AdmissionStore.completesRecordsInStep`). */
  readonly completesRecordsInStep: boolean
}

/**
 * How the call's settlement goes with its response (see the module doc).
 *
 * @category constructors
 */
export const choose = (input: Input): SettlementChoice => {
  if (input.outcome === "Deferred") return "Deferred"
  if (input.outcome === "Streaming") return "Stream"
  return !input.settlesInProcess &&
      !input.paymentSettlesCharge &&
      input.holdLeftMs > RESPOND_FIRST_MARGIN_MS &&
      (!input.idempotencyKey || input.completesRecordsInStep)
    ? "RespondFirst"
    : "SettleThenRespond"
}
