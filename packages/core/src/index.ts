/**
 * @tollgate/core: the domain of a paid inference API. Money, errors, principals, the network table
 * and the services every metered call goes through, with their in-memory layers.
 *
 * @since 0.1.0
 */
export * as ChatOptions from "./ChatOptions.ts"
export * as Errors from "./Errors.ts"
export * as IdempotencyStore from "./IdempotencyStore.ts"
export * as JsonRpc from "./JsonRpc.ts"
export * as Models from "./Models.ts"
export * as Money from "./Money.ts"
export * as Networks from "./Networks.ts"
export * as Principal from "./Principal.ts"
export * as ThinkStripper from "./ThinkStripper.ts"
export * as RpcAllowlist from "./RpcAllowlist.ts"
export * as X402 from "./X402.ts"
