/**
 * The metered pipeline's metrics: how admissions ended, the credits captured, and what a failed
 * call's failure says about the store or upstream behind it. Counted in place from the request's
 * context (`Observability.counterOf`), so a paid call pays no Effect step for them.
 *
 * @since 0.1.0
 */
import type { Context } from "effect"
import * as Observability from "../Observability.ts"

/** @category models */
export type AdmissionOutcome = "admitted" | "rate_limit" | "balance" | "idempotency_conflict" | "abuse_guard"

const admissionCounters = Object.fromEntries(
  (["admitted", "rate_limit", "balance", "idempotency_conflict", "abuse_guard"] as const).map((
    outcome
  ) => [outcome, Observability.counterOf(Observability.admissions, { outcome })])
) as Record<AdmissionOutcome, (context: Context.Context<never>) => void>

/** @category counters */
export const countAdmission = (outcome: AdmissionOutcome, context: Context.Context<never>) => admissionCounters[outcome](context)

/** @category counters */
export const countCaptured = Observability.counterOf(Observability.creditsCaptured, {})

/**
 * The step a call is in, for the metrics of a failure: a store step that fails counts a store error
 * under its service, a failed backend an upstream error.
 *
 * @category models
 */
export type Step = "auth" | "admission" | "idempotency" | "backend" | "other"

const upstreamFailures = new Set<string>(["BadGateway", "GatewayTimeout", "InferenceFailed", "ServiceUnavailable"])

/**
 * Counts what a failure says: every store the pipeline calls refuses the call when it is
 * unreachable (the policy is fail-closed), authentication's refusals include the abuse guard's, and
 * a backend's failure is an upstream error of its sku. Counted once, from the failure that ends the
 * call and the step it came from, so the steps that succeed pay nothing for it.
 *
 * @category counters
 */
export const countFailure = (error: { readonly _tag: string }, step: Step, sku: string, context: Context.Context<never>) => {
  if (step === "backend") {
    if (upstreamFailures.has(error._tag)) Observability.countUnsafe(Observability.upstreamErrors, { sku }, context)
  } else if (step === "other") {
    return
  } else if (error._tag === "ServiceUnavailable") {
    Observability.countUnsafe(Observability.redisErrors, { service: step, policy: "fail-closed" }, context)
  } else if (step === "auth" && error._tag === "RateLimited") {
    countAdmission("abuse_guard", context)
  }
}
