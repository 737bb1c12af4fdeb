/**
 * @tollgate/core: the domain of a paid inference API. Money, errors, principals, the network table
 * and the services every metered call goes through, with their in-memory layers.
 *
 * @since 0.1.0
 */
export * as ChatOptions from "./ChatOptions.ts"
export * as AbuseGuard from "./AbuseGuard.ts"
export * as Admission from "./Admission.ts"
export * as Auth from "./Auth.ts"
export * as AuthStore from "./AuthStore.ts"
export * as CreditLedger from "./CreditLedger.ts"
export * as Jwt from "./Jwt.ts"
export * as Siwx from "./Siwx.ts"
export * as Errors from "./Errors.ts"
export * as IdempotencyStore from "./IdempotencyStore.ts"
export * as ImageRequest from "./ImageRequest.ts"
export * as JsonRpc from "./JsonRpc.ts"
export * as JsonText from "./JsonText.ts"
export * as Models from "./Models.ts"
export * as Money from "./Money.ts"
export * as Networks from "./Networks.ts"
export * as Principal from "./Principal.ts"
export * as PricingEngine from "./PricingEngine.ts"
export * as RateLimiter from "./RateLimiter.ts"
export * as RateLimitLog from "./RateLimitLog.ts"
export * as RateLimits from "./RateLimits.ts"
export * as RpcAllowlist from "./RpcAllowlist.ts"
export * as Spans from "./Spans.ts"
export * as SearchProvider from "./SearchProvider.ts"
export * as ThinkStripper from "./ThinkStripper.ts"
export * as Usage from "./Usage.ts"
export * as X402 from "./X402.ts"
export * as VideoJobs from "./VideoJobs.ts"
