/**
 * x402 as tollgate speaks it, one module per part under `x402/`:
 *
 * - `Wire`: the v2 schemas, header names and header codecs;
 * - `Config`: where wallets pay (networks, tokens, receivers, minimums) as the `X402Config` service;
 * - `Offers`: the `accepts` entries of a top-up and of a metered call;
 * - `Bodies`: the two 402 bodies for wallets (discovery and insufficient balance) and the top-up guide;
 * - `Matching`: a client's payment matched against the requirements rebuilt for its request.
 *
 * Everything is re-exported here, so `X402.<name>` reads the same wherever it is used.
 *
 * @since 0.1.0
 */
export * from "./x402/Bodies.ts"
export * from "./x402/Config.ts"
export * from "./x402/Matching.ts"
export * from "./x402/Offers.ts"
export * from "./x402/Wire.ts"
