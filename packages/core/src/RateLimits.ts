/**
 * The limit policy under its former name: `RateLimitPolicy`, re-exported so embedders' imports of
 * `@tollgate/core/RateLimits` and of `RateLimits` from `@tollgate/core` keep working.
 *
 * **When to use**
 *
 * Never in new code; import `RateLimitPolicy`.
 *
 * @deprecated since 0.1.0, use `RateLimitPolicy`
 * @since 0.1.0
 */
export * from "./RateLimitPolicy.ts"
