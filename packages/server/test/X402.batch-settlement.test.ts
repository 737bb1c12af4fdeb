/**
 * Sub-cent calls paid per call with x402 `batch-settlement`, through the shipped server, by the
 * official client (`@x402/fetch` with the batch-settlement client scheme) on anvil: the test USDC
 * (FiatTokenV2_2's EIP-3009) at Base's USDC address and x402's channel contract and ERC-3009
 * deposit collector at their canonical addresses.
 */
import { Money, X402 } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader
} from "@x402/core/http"
import { BATCH_SETTLEMENT_ADDRESS, toClientEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme, computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Result } from "effect"
import { type Address, createPublicClient, type Hex, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { batchSettlementAbi } from "../../http/test/support/BatchSettlementContracts.ts"
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

/**
 * A payer holding `units` of USDC, and the official client paying with batch-settlement from it,
 * through a fetch that remembers the last payment it sent.
 */
const payerWith = async (units: bigint) => {
  const account = privateKeyToAccount(generatePrivateKey())
  await chain.mint(account.address, units)
  return clientOf(account)
}

/** The official client paying from `account` through `send`, with its own state of its channels. */
const clientOf = (account: ReturnType<typeof privateKeyToAccount>, send: typeof fetch = fetch) => {
  const publicClient = createPublicClient({ transport: http(chain.anvil.url) })
  const client = new x402Client().register("eip155:*", new BatchSettlementEvmScheme(toClientEvmSigner(account, publicClient)))
  const sent = { payment: "" }
  const recording: typeof fetch = (input, init) => {
    const request = new Request(input, init)
    sent.payment = request.headers.get("payment-signature") ?? sent.payment
    return send(request)
  }
  return { account, sent, pay: wrapFetchWithPayment(recording, client) }
}

/** The channel the official client opens for `payer` on this server's offer. */
const channelOf = (payer: Address, payTo: Address) => {
  const config = {
    payer,
    payerAuthorizer: payer,
    receiver: payTo,
    receiverAuthorizer: relayer,
    token: chain.usdc,
    withdrawDelay: 86_400,
    salt: `0x${"00".repeat(32)}` as Hex
  }
  return { config, channelId: computeChannelId(config, X402.BASE_MAINNET) }
}

const onChain = async (channelId: Hex) => {
  const [balance, totalClaimed] = await chain.client.readContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: batchSettlementAbi,
    functionName: "channels",
    args: [channelId]
  })
  return { balance, totalClaimed }
}

/** Sends `payment` as it is, with no client: the 402's reason, or the status. */
const sendRaw = async (url: string, payment: string) => {
  const response = await fetch(url, { ...rpcInit(), headers: { "content-type": "application/json", "payment-signature": payment } })
  const header = response.headers.get("payment-required")
  return {
    status: response.status,
    reason: header === null ? undefined : decodePaymentRequiredHeader(header).error,
    body: await response.text()
  }
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
      // The price table's RPC price: 20 credits at 6.25e-7 USD, 12.5 base units a call.
      expect(expected).toBe(12_500n)
      await waitFor(async () => (await chain.balanceOf(payTo)) === expected)
      await waitFor(async () => (await chain.balanceOf(payer.account.address)) === 1_000_000n - expected)
      // The relayer sent the deposit, one claim, one transfer to payTo and one refund.
      expect(await chain.client.getTransactionCount({ address: relayer })).toBe(relayerNonce + 4)
    } finally {
      await server.stop()
    }
  }, 300_000)
})

describe("batch-settlement on Redis: two instances share one channel, its cumulative charge and its claims", () => {
  it("1,000 RPC calls alternating between two instances on one channel are all served; exactly their sum reaches payTo", async () => {
    const redis = await RedisServer.acquire()
    const payTo = privateKeyToAccount(generatePrivateKey()).address
    const options = {
      store: "redis" as const,
      redisUrl: redis.url,
      config: serverConfig(payTo, { claimThresholdUsd: "0.0125", claimIntervalSeconds: 3_600, idleRefundSeconds: 3 })
    }
    const instances = await Promise.all([ShippedServer.start(options), ShippedServer.start(options)])
    try {
      const payer = await payerWith(1_000_000n)
      const relayerNonce = await chain.client.getTransactionCount({ address: relayer })
      let costNano = 0
      for (let call = 0; call < 1_000; call++) {
        const response = await payer.pay(`${instances[call % 2]!.api}/crypto/rpc/base-mainnet`, rpcInit())
        expect(response.status, await response.clone().text()).toBe(200)
        costNano += costOf(response)
        await response.arrayBuffer()
      }
      const expected = BigInt(Math.ceil(costNano / 1000))
      expect(expected).toBe(12_500n)
      await waitFor(async () => (await chain.balanceOf(payTo)) === expected)
      await waitFor(async () => (await chain.balanceOf(payer.account.address)) === 1_000_000n - expected)
      // One deposit, one claim, one transfer to payTo, one refund, whichever instance sent them.
      expect(await chain.client.getTransactionCount({ address: relayer })).toBe(relayerNonce + 4)
    } finally {
      await Promise.all(instances.map((instance) => instance.stop()))
      await redis.stop()
    }
  }, 400_000)
})

describe("batch-settlement: a replayed voucher and a lower cumulative voucher are refused, serve nothing and move nothing", () => {
  it(
    "after three paid calls, the third's payment sent again and a voucher below it are 402s; the channel is charged for three calls",
    async () => {
      const payTo = privateKeyToAccount(generatePrivateKey()).address
      const server = await ShippedServer.start({ config: serverConfig(payTo, { claimIntervalSeconds: 1 }) })
      try {
        const payer = await payerWith(1_000_000n)
        const url = `${server.api}/crypto/rpc/base-mainnet`
        let costNano = 0
        for (let call = 0; call < 3; call++) {
          const response = await payer.pay(url, rpcInit())
          expect(response.status).toBe(200)
          costNano += costOf(response)
        }
        const third = payer.sent.payment
        const replay = await sendRaw(url, third)
        expect(replay).toMatchObject({ status: 402, reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch" })
        // The 402's body, not the call's answer.
        expect(JSON.parse(replay.body)).toMatchObject({ x402Version: 2, error: "invalid_batch_settlement_evm_cumulative_amount_mismatch" })

        const signed = decodePaymentSignatureHeader(third)
        const payload = signed.payload as { voucher: { channelId: Hex; maxClaimableAmount: string } }
        const lower = await signVoucher(
          payer.account,
          payload.voucher.channelId,
          (BigInt(payload.voucher.maxClaimableAmount) - 13n).toString(),
          X402.BASE_MAINNET
        )
        const refused = await sendRaw(
          url,
          encodePaymentSignatureHeader({ ...signed, payload: { ...payload, type: "voucher", voucher: lower } })
        )
        expect(refused).toMatchObject({ status: 402, reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch" })

        // Nothing was charged for them: the client's next voucher still matches, and payTo receives three calls' worth.
        const fourth = await payer.pay(url, rpcInit())
        expect(fourth.status).toBe(200)
        costNano += costOf(fourth)
        const expected = BigInt(Math.ceil(costNano / 1000))
        await waitFor(async () => (await chain.balanceOf(payTo)) === expected)
        expect((await onChain(channelOf(payer.account.address, payTo).channelId)).totalClaimed).toBe(expected)
      } finally {
        await server.stop()
      }
    },
    120_000
  )
})

describe("batch-settlement: a client whose state of its channel is stale gets the corrective 402, resyncs from it and is served", () => {
  it(
    "a second client of the same payer, knowing nothing of the channel, is told its charge and last voucher and pays the next call on it",
    async () => {
      const payTo = privateKeyToAccount(generatePrivateKey()).address
      const server = await ShippedServer.start({ config: serverConfig(payTo, { claimIntervalSeconds: 3_600, claimThresholdUsd: "1" }) })
      try {
        const first = await payerWith(1_000_000n)
        const url = `${server.api}/crypto/rpc/base-mainnet`
        let costNano = 0
        for (let call = 0; call < 3; call++) {
          const response = await first.pay(url, rpcInit())
          expect(response.status).toBe(200)
          costNano += costOf(response)
        }
        const charged = BigInt(Math.ceil(costNano / 1000)).toString()
        // The same key in another client: from the chain it knows the deposit, not the three calls.
        // The 402s answering a payment, with their batch-settlement entry's extra.
        const refusals: Array<Record<string, unknown>> = []
        const watching: typeof fetch = async (input, init) => {
          // The client's fetch is handed a Request (`clientOf`), whose body only `fetch` may read.
          const paid = (input as Request).headers.has("payment-signature")
          const response = await fetch(input, init)
          const header = response.headers.get("payment-required")
          if (paid && response.status === 402 && header !== null) {
            const required = decodePaymentRequiredHeader(header)
            refusals.push({ error: required.error, ...required.accepts.find((entry) => entry.scheme === "batch-settlement")!.extra })
          }
          return response
        }
        const response = await clientOf(first.account, watching).pay(url, rpcInit())
        expect(response.status).toBe(200)
        expect(refusals).toEqual([expect.objectContaining({
          error: "invalid_batch_settlement_evm_cumulative_amount_mismatch",
          channelState: expect.objectContaining({ chargedCumulativeAmount: charged }),
          voucherState: { signedMaxClaimable: expect.any(String), signature: expect.stringMatching(/^0x[0-9a-f]{130}$/i) }
        })])
        const settled = decodePaymentResponseHeader(response.headers.get("payment-response")!)
        costNano += costOf(response)
        expect((settled.extra as { channelState: { chargedCumulativeAmount: string } }).channelState.chargedCumulativeAmount)
          .toBe(BigInt(Math.ceil(costNano / 1000)).toString())
      } finally {
        await server.stop()
      }
    },
    120_000
  )
})

// Last: it moves the chain's clock a day on, past the validity of any deposit authorization signed after it.
describe("batch-settlement: a payer's withdrawal, seen by the contract's event, stops calls on its channel, and every served call is claimed before it can finalize", () => {
  it(
    "calls are refused once the withdrawal is seen; what was served is claimed within the delay, and finalizing returns only the rest",
    async () => {
      const payTo = privateKeyToAccount(generatePrivateKey()).address
      // Claims only at the threshold (never reached here) or on a withdrawal; logs what its rounds see.
      const server = await ShippedServer.start({
        config: serverConfig(payTo, { claimIntervalSeconds: 3_600, claimThresholdUsd: "1" }),
        env: { TOLLGATE_LOG_LEVEL: "info" }
      })
      try {
        const payer = await payerWith(1_000_000n)
        const url = `${server.api}/crypto/rpc/base-mainnet`
        let costNano = 0
        for (let call = 0; call < 10; call++) {
          const response = await payer.pay(url, rpcInit())
          expect(response.status).toBe(200)
          costNano += costOf(response)
        }
        const { channelId, config } = channelOf(payer.account.address, payTo)
        const before = await onChain(channelId)
        expect(before.totalClaimed).toBe(0n)
        const wallet = await chain.walletOf(payer.account)
        await chain.client.waitForTransactionReceipt({
          hash: await wallet.writeContract({
            address: BATCH_SETTLEMENT_ADDRESS,
            abi: batchSettlementAbi,
            functionName: "initiateWithdraw",
            args: [config, before.balance]
          })
        })
        // Served until the server's next round reads the withdrawal, then refused.
        let refusal: string | undefined
        for (let call = 0; refusal === undefined && call < 200; call++) {
          const response = await payer.pay(url, rpcInit())
          if (response.status === 200) {
            costNano += costOf(response)
          } else {
            expect(response.status).toBe(402)
            refusal = decodePaymentRequiredHeader(response.headers.get("payment-required")!).error
          }
        }
        expect(refusal).toBe("batch_settlement_withdrawal_pending")
        // Seen by the contract's event, not by reading the channel (logged once the store has it).
        const seen = new RegExp(`x402 batch-settlement withdrawal started.*${channelId}.*"seenBy":"(\\w+)"`, "i")
        await waitFor(async () => seen.test(server.output()))
        expect(seen.exec(server.output())![1]).toBe("event")
        const served = BigInt(Math.ceil(costNano / 1000))
        // Claimed at once, long before the one-day delay ends.
        await waitFor(async () => (await onChain(channelId)).totalClaimed === served)
        await chain.client.increaseTime({ seconds: 86_401 })
        await chain.client.mine({ blocks: 1 })
        await chain.client.waitForTransactionReceipt({
          hash: await wallet.writeContract({
            address: BATCH_SETTLEMENT_ADDRESS,
            abi: batchSettlementAbi,
            functionName: "finalizeWithdraw",
            args: [config]
          })
        })
        expect(await chain.balanceOf(payer.account.address)).toBe(1_000_000n - served)
        await waitFor(async () => (await chain.balanceOf(payTo)) === served)
      } finally {
        await server.stop()
      }
    },
    180_000
  )
})
