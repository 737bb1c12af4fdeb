/**
 * Which rate limits apply to a paid call. A service of its own so the operator's configured
 * tables and runtime overrides (`RateLimits.Overrides`) can replace the spec's defaults without
 * the pipeline knowing where the numbers come from; the billing routes read it too, to report a
 * caller's limits.
 *
 * @since 0.1.0
 */
import type { Principal } from "@tollgate/core"
import type * as RateLimiter from "@tollgate/core/RateLimiter"
import * as RateLimits from "@tollgate/core/RateLimits"
import { Context, Layer } from "effect"

/**
 * Which rate limits apply to a call: `layerLimits` (the configured tables and overrides) or
 * `layerLimitsDefault` (the spec's tables).
 *
 * @category services
 */
export class LimitPolicy extends Context.Service<LimitPolicy, {
  /** `stored`: the overrides the store keeps for the caller's account and key, read with its key's standing. */
  readonly limitsFor: (principal: Principal.Principal, call: RateLimits.Call, stored?: RateLimits.StoredOverrides) => ReadonlyArray<RateLimiter.Limit>
}>()("@tollgate/http/Metered/LimitPolicy") {}

/**
 * The spec's default tables with no overrides (`RateLimits.limitsFor`).
 *
 * @category layers
 */
export const layerLimitsDefault: Layer.Layer<LimitPolicy> = Layer.succeed(LimitPolicy, {
  limitsFor: (principal, call, stored) => RateLimits.limitsFor(principal, call, stored ?? {})
})

/**
 * The tables with the configured and runtime overrides of `RateLimits.Overrides`.
 *
 * @category layers
 */
export const layerLimits: Layer.Layer<LimitPolicy, never, RateLimits.Overrides> = Layer.effect(LimitPolicy, RateLimits.policy)
