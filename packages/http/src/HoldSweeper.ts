/**
 * The background sweep of the credit ledger: every `intervalMs` it releases the holds past their
 * expiry on every account (`CreditLedger.sweepExpired`), so a hold whose request died during a
 * store outage or a crash is released on time, not at the account's next operation, and it reads
 * the open holds and the held amount from the store (`CreditLedger.holdStats`) into the gauges
 * `tollgate_holds_open` and `tollgate_held_nano_usd`. The gauges therefore say what the ledger
 * holds, whichever instance placed the holds. Every instance sweeps; a sweep is idempotent. A
 * failed round (the store is down) is logged and the next one tries again.
 *
 * @since 0.1.0
 */
import { CreditLedger } from "@tollgate/core"
import { Effect, Layer, Metric, Schedule } from "effect"
import * as Observability from "./Observability.ts"

/** @category options */
export interface Options {
  /** How often to sweep and read the gauges; default 10 seconds. */
  readonly intervalMs?: number
}

/** @category constants */
export const DEFAULT_INTERVAL_MS = 10_000

/**
 * One round: the sweep, then the gauges.
 *
 * @category sweeping
 */
export const round = (ledger: CreditLedger.CreditLedger["Service"]) =>
  Effect.gen(function*() {
    yield* ledger.sweepExpired
    const stats = yield* ledger.holdStats
    yield* Metric.update(Observability.holdsOpen, stats.open)
    yield* Metric.update(Observability.heldNanoUsd, stats.held)
  }).pipe(Effect.catchTag("ServiceUnavailable", (error) => Effect.logWarning("hold sweep failed", error.message)))

/**
 * Runs the sweep in the background for as long as the layer lives.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<never, never, CreditLedger.CreditLedger> =>
  Layer.effectDiscard(Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    yield* Effect.forkScoped(Effect.repeat(round(ledger), Schedule.spaced(options.intervalMs ?? DEFAULT_INTERVAL_MS)))
  }))
