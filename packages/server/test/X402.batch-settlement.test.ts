/**
 * Sub-cent calls paid per call with x402 `batch-settlement`, through the shipped server, by the
 * official client (`@x402/fetch` with the batch-settlement client scheme) on anvil: the test USDC
 * (FiatTokenV2_2's EIP-3009) at Base's USDC address and x402's channel contract and ERC-3009
 * deposit collector at their canonical addresses.
 */
import { Money } from "@tollgate/core"
import { ShippedServer } from "@tollgate/testkit"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { toClientEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Result } from "effect"
import { type Address, createPublicClient, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, which submits the deposits and claims and authorizes the channels. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const relayer = privateKeyToAccount(RELAYER_KEY).address

let chain: X402Chain.Chain

beforeAll(async () => {
  chain = await X402Chain.start()
}, 60_000)

afterAll(async () => {
  await chain?.stop()
})

/** A server whose `payTo` is fresh, claiming at `claimThresholdUsd` and refunding channels idle for `idleRefundSeconds`. */
const serverConfig = (payTo: Address, batchSettlement: Record<string, unknown>) => ({
  rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
  // A wallet's RPC calls are limited to 100 a minute by default: these tests make a thousand.
  rateLimits: { tiers: { default: { rpc: { requests: 100_000 } } } },
  x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url, batchSettlement }
})

const rpcBody = JSON.stringify({ jsonrpc: "2.0", method: "eth_blockNumber", params: [], id: 1 })
const rpcInit = (): RequestInit => ({ method: "POST", headers: { "content-type": "application/json" }, body: rpcBody })

/** A payer holding `units` of USDC, and the official client paying with batch-settlement from it. */
const payerWith = async (units: bigint) => {
  const account = privateKeyToAccount(generatePrivateKey())
  await chain.mint(account.address, units)
  const publicClient = createPublicClient({ transport: http(chain.anvil.url) })
  const client = new x402Client().register("eip155:*", new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient)))
  return { account, pay: wrapFetchWithPayment(fetch, client) }
}

/** What a paid RPC call cost, in nano-USD, from its answer. */
const costOf = (response: Response) => Result.getOrThrow(Money.parseUsd(response.headers.get("x-service-rpc-cost-usd")!))

const waitFor = async (check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("batch-settlement: one channel, 1,000 RPC calls at the price table's RPC price, all served; exactly their sum reaches payTo", () => {
  it("serves 1,000 calls on one deposit, claims and settles their sum in one claim and one transfer, and refunds the rest", async () => {
    const payTo = privateKeyToAccount(generatePrivateKey()).address
    const server = await ShippedServer.start({
      config: serverConfig(payTo, { claimThresholdUsd: "0.0125", claimIntervalSeconds: 3_600, idleRefundSeconds: 3 })
    })
    try {
      const payer = await payerWith(1_000_000n)
      const relayerNonce = await chain.client.getTransactionCount({ address: relayer })
      let costNano = 0
      for (let call = 0; call < 1_000; call++) {
        const response = await payer.pay(`${server.api}/crypto/rpc/base-mainnet`, rpcInit())
        expect(response.status, await response.clone().text()).toBe(200)
        costNano += costOf(response)
        const settled = decodePaymentResponseHeader(response.headers.get("payment-response")!)
        expect(settled.success).toBe(true)
        await response.arrayBuffer()
      }
      const expected = BigInt(Math.ceil(costNano / 1000))
      await waitFor(async () => (await chain.balanceOf(payTo)) === expected)
      await waitFor(async () => (await chain.balanceOf(payer.account.address)) === 1_000_000n - expected)
      // The relayer sent the deposit, one claim, one transfer to payTo and one refund.
      expect(await chain.client.getTransactionCount({ address: relayer })).toBe(relayerNonce + 4)
    } finally {
      await server.stop()
    }
  }, 300_000)
})
