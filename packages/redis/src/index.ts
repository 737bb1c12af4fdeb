/**
 * @tollgate/redis: the Redis layers of tollgate's stateful services, each over the `Redis` service
 * of `effect/persistence` (provide `NodeRedis.layer`), with its Lua scripts beside it.
 *
 * @since 0.1.0
 */
export * as AbuseGuardRedis from "./AbuseGuardRedis.ts"
export * as AccountGroups from "./AccountGroups.ts"
export * as AdmissionStoreRedis from "./AdmissionStoreRedis.ts"
export * as AuditLogRedis from "./AuditLogRedis.ts"
export * as AuthStoreRedis from "./AuthStoreRedis.ts"
export * as CreditLedgerRedis from "./CreditLedgerRedis.ts"
export * as GenerationsRedis from "./GenerationsRedis.ts"
export * as IdempotencyStoreRedis from "./IdempotencyStoreRedis.ts"
export * as KeyCapsRedis from "./KeyCapsRedis.ts"
export * as PaymentChannelsRedis from "./PaymentChannelsRedis.ts"
export * as PendingSettlementsRedis from "./PendingSettlementsRedis.ts"
export * as RateLimiterRedis from "./RateLimiterRedis.ts"
export * as RateLimitLogRedis from "./RateLimitLogRedis.ts"
export * as RedisConnection from "./RedisConnection.ts"
export * as RpcCacheRedis from "./RpcCacheRedis.ts"
export * as Scripts from "./Scripts.ts"
export * as SessionRevocationsRedis from "./SessionRevocationsRedis.ts"
export * as TopUpTransactionsRedis from "./TopUpTransactionsRedis.ts"
export * as VideoJobsRedis from "./VideoJobsRedis.ts"
export * as WebhookStoreRedis from "./WebhookStoreRedis.ts"
