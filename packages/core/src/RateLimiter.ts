/**
 * Request and token limits. One admission checks every limit that applies to a call (requests and
 * tokens; per key, per account, global) all or nothing: a rejected call consumes nothing. Tokens
 * are reserved at admission and settled to the actual count afterwards. The answer carries the
 * exact `x-ratelimit-*` headers of the limit that applied.
 *
 * @since 0.1.0
 */
import { Context, type Effect } from "effect"
import type { RateLimited, ServiceUnavailable } from "./Errors.ts"

/**
 * Which limit applied, as `x-ratelimit-type` says it.
 *
 * @category models
 */
export type LimitType = "user" | "api_key" | "global"

/**
 * One limit to check. `key` identifies the counter (e.g. `acct_1:text:M`); `hashTag` groups the
 * counters of one account on one Redis Cluster slot.
 *
 * @category models
 */
export interface Limit {
  readonly type: LimitType
  readonly key: string
  readonly hashTag: string
  readonly requests?: { readonly limit: number; readonly windowMs: number }
  readonly tokens?: { readonly limit: number; readonly windowMs: number; readonly reserve: number }
  /** Credits per rolling window (the RPC proxy's 24 h cap). */
  readonly credits?: { readonly limit: number; readonly windowMs: number; readonly reserve: number }
  /** Named in the 429 `customMessage` when this limit trips (RPC caps). */
  readonly customMessage?: string
}

/** @category models */
export interface Admission {
  /** `x-ratelimit-*` headers, exact, of the limit that applied. */
  readonly headers: Readonly<Record<string, string>>
  /** Settles reserved tokens (and credits) to what was actually used; releases the rest. */
  readonly settle: (actual: { readonly tokens?: number; readonly credits?: number }) => Effect.Effect<void>
}

/** @category services */
export class RateLimiter extends Context.Service<RateLimiter, {
  readonly admit: (limits: ReadonlyArray<Limit>) => Effect.Effect<Admission, RateLimited | ServiceUnavailable>
}>()("@tollgate/core/RateLimiter") {}
