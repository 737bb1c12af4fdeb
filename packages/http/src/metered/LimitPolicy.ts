/**
 * Which rate limits apply to a paid call. A service of its own so the operator's configured
 * tables and runtime overrides (`RateLimitPolicy.Overrides`) can replace the spec's defaults without
 * the pipeline knowing where the numbers come from; the billing routes read it too, to report a
 * caller's limits.
 *
 * @since 0.1.0
 */
import type { Principal } from "@tollgate/core"
import type * as RateLimiter from "@tollgate/core/RateLimiter"
import * as RateLimitPolicy from "@tollgate/core/RateLimitPolicy"
import { Context, Layer } from "effect"

/**
 * Which rate limits apply to a call: `layerLimits` (the configured tables and overrides) or
 * `layerLimitsDefault` (the spec's tables).
 *
 * @category services
 */
export class LimitPolicy extends Context.Service<LimitPolicy, {
  /** `stored`: the overrides the store keeps for the caller's account and key, read with its key's standing. */
  readonly limitsFor: (
    principal: Principal.Principal,
    call: RateLimitPolicy.Call,
    stored?: RateLimitPolicy.StoredOverrides
  ) => ReadonlyArray<RateLimiter.Limit>
}>()("@tollgate/http/Metered/LimitPolicy") {}

/**
 * The spec's default tables with no overrides (`RateLimitPolicy.limitsFor`).
 *
 * @category layers
 */
export const layerLimitsDefault: Layer.Layer<LimitPolicy> = Layer.succeed(LimitPolicy, {
  limitsFor: (principal, call, stored) => RateLimitPolicy.limitsFor(principal, call, stored ?? {})
})

/**
 * The tables with the configured and runtime overrides of `RateLimitPolicy.Overrides`.
 *
 * @category layers
 */
export const layerLimits: Layer.Layer<LimitPolicy, never, RateLimitPolicy.Overrides> = Layer.effect(LimitPolicy, RateLimitPolicy.policy)
