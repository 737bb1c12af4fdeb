/**
 * @tollgate/testkit: real parts for tests. A throwaway redis-server and anvil per test file (killed
 * with the test process whatever it ran: `Reaper`), a free port, the shipped server as a child
 * process for end-to-end tests, the system Chromium for browser tests, public test documents, and
 * the contract-test helper that runs one service suite over every backend.
 *
 * @since 0.1.0
 */
export * as Anvil from "./Anvil.ts"
export * as Chromium from "./Chromium.ts"
export * as Contract from "./Contract.ts"
export * as FakeChatUpstream from "./FakeChatUpstream.ts"
export * as FreePort from "./FreePort.ts"
export * as RateWindow from "./RateWindow.ts"
export * as Reaper from "./Reaper.ts"
export * as RedisCluster from "./RedisCluster.ts"
export * as RedisServer from "./RedisServer.ts"
export * as RpcStandIn from "./RpcStandIn.ts"
export * as ShippedServer from "./ShippedServer.ts"
export * as SolanaRpc from "./SolanaRpc.ts"
export * as StakeToken from "./StakeToken.ts"
export * as TestDocuments from "./TestDocuments.ts"
