/**
 * The metered pipeline: the one function every paid route calls. It authenticates the caller,
 * claims the `Idempotency-Key`, admits the call (rate limits and a credit hold for the worst-case
 * price, all or nothing), runs the route's work, captures the actual price and releases the rest
 * (appending the usage entry in the same ledger step), completes the idempotency record and adds
 * the rate-limit and balance headers. A call is charged at most its quote, and a call that fails
 * before its work starts is charged nothing.
 *
 * **When to use**
 *
 * Through `Endpoint.make`, which every paid route of tollgate and every operator's own endpoint
 * (`OwnEndpoint`) is declared with; a route never re-implements a step of the pipeline.
 *
 * **Details**
 *
 * Once admitted, a failure, or an interruption (a client that disconnects) before the route's work
 * starts, releases the hold in a finalizer; once the work has started it is not interrupted, and is
 * captured for what it used; a streamed response captures what it produced when the stream ends,
 * fails or is cut. A call that starts a job (a video) hands its hold over to the job instead
 * (`Deferred`): the job captures or releases it later by its reference. A hold that nothing settles
 * (a process crash, a job never polled) expires.
 *
 * Which 402 a caller gets depends on who it is: an API key with too little balance gets the
 * StandardError `INSUFFICIENT_BALANCE`; a wallet gets the authenticated-wallet body and a caller
 * with no credentials the x402 discovery body, both built by the `PaymentRequiredBodies` service so
 * the x402 module owns their shape. A call that carries an x402 payment is paid by it: when
 * `PerCallPayment` is provided, the payment is accepted before the call's admission (an `exact`
 * payment settled and credited to the paying wallet), the call runs as that wallet, and the payment
 * is finished after the call's settlement (an `upto` permit's charge settled on chain).
 *
 * The pipeline is a folder, one concept per module, and this module is its public entry:
 * `metered/MeteredCall.ts` (what a route hands the pipeline and what its work returns),
 * `metered/PaymentRequiredBodies.ts` and `metered/LimitPolicy.ts` (the services it asks for the
 * wallet 402 bodies and the rate limits), `metered/Pipeline.ts` (the `Metered` service and its
 * layer), `metered/PaidCall.ts` (the steps of one call), `metered/SettlementChoice.ts` (whether a
 * call's response waits for its settlement) and `metered/Metrics.ts` (what it counts).
 *
 * @since 0.1.0
 */
export { layerLimits, layerLimitsDefault, LimitPolicy } from "./metered/LimitPolicy.ts"
export type {
  CallContext,
  DeferredOutcome,
  Kind,
  MeteredCall,
  ModelTier,
  Outcome,
  Produced,
  StreamingOutcome,
  Usage
} from "./metered/MeteredCall.ts"
export { PaymentRequiredBodies } from "./metered/PaymentRequiredBodies.ts"
export { layer, Metered, type Options } from "./metered/Pipeline.ts"
