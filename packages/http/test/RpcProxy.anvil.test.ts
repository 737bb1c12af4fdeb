import { Anvil } from "@tollgate/testkit"
import { createPublicClient, http } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcHarness from "./RpcHarness.ts"

// One mining anvil behind ethereum-mainnet, one with --no-mining (transactions stay in the txpool)
// behind ethereum-sepolia.
let mining: Anvil.Anvil
let pending: Anvil.Anvil
let harness: RpcHarness.Harness
let txHash: string
let minedBlock: string

const dev = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

const direct = async (anvil: Anvil.Anvil, method: string, params: ReadonlyArray<unknown> = []) => {
  const response = await fetch(anvil.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  const body = await response.json() as { result: unknown }
  return body.result
}

beforeAll(async () => {
  ;[mining, pending] = await Promise.all([Anvil.start({ chainId: 1 }), Anvil.start({ chainId: 11155111, noMining: true })])
  txHash = await direct(mining, "eth_sendTransaction", [{
    from: dev,
    to: "0x000000000000000000000000000000000000dEaD",
    value: "0x1"
  }]) as string
  minedBlock = (await direct(mining, "eth_getTransactionReceipt", [txHash]) as { blockNumber: string }).blockNumber
  await direct(pending, "eth_sendTransaction", [{ from: dev, to: "0x000000000000000000000000000000000000dEaD", value: "0x2" }])
  harness = await RpcHarness.make({
    upstreams: { "ethereum-mainnet": [mining.url], "ethereum-sepolia": [pending.url] }
  })
}, 60_000)

afterAll(async () => {
  await harness?.dispose()
  await Promise.all([mining?.stop(), pending?.stop()])
})

const call = (method: string, params: ReadonlyArray<unknown> = [], id: number | string = 1) => ({ jsonrpc: "2.0", id, method, params })

describe("RPC proxy: credits per call = baseCredits x tier multiplier, charged as the table says (real anvil)", () => {
  const cases: ReadonlyArray<readonly [string, string, () => ReadonlyArray<unknown>, string, number]> = [
    ["S", "eth_blockNumber", () => [], "ethereum-mainnet", 20],
    ["S", "eth_call", () => [{ to: "0x000000000000000000000000000000000000dEaD", data: "0x" }, "latest"], "ethereum-mainnet", 20],
    ["A", "debug_traceTransaction", () => [txHash, { tracer: "callTracer" }], "ethereum-mainnet", 40],
    ["A", "trace_transaction", () => [txHash], "ethereum-mainnet", 40],
    ["A", "txpool_status", () => [], "ethereum-sepolia", 40],
    ["L", "trace_replayBlockTransactions", () => [minedBlock, ["trace"]], "ethereum-mainnet", 80],
    ["L", "txpool_content", () => [], "ethereum-sepolia", 80]
  ]
  it.each(cases)("%s %s costs its tier's credits", async (_tier, method, params, network, credits) => {
    const account = await harness.account()
    const response = await account.fetch(network, call(method, params()))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    const body = await response.json() as { id: number; result?: unknown; error?: unknown }
    expect(body.error).toBeUndefined()
    expect(body.id).toBe(1)
    expect(body.result).toBeDefined()
    expect(response.headers.get("x-service-rpc-credits")).toBe(String(credits))
    expect(Number(response.headers.get("x-service-rpc-cost-usd"))).toBeCloseTo(credits * 6.25e-7, 12)
    expect(response.headers.get("x-request-id")).toMatch(/.+/)
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("100")
    expect(await account.charged()).toBe(RpcHarness.nanoOf(credits))
  })

  it("txpool_content shows the transaction anvil --no-mining keeps pending", async () => {
    const response = await harness.fetch("ethereum-sepolia", call("txpool_content"))
    const body = await response.json() as { result: { pending: Record<string, unknown> } }
    expect(Object.keys(body.result.pending).map((address) => address.toLowerCase())).toContain(dev.toLowerCase())
  })

  it("a batch costs the sum of its items; an item answered with an error costs 5", async () => {
    const account = await harness.account()
    const response = await account.fetch("ethereum-mainnet", [
      call("eth_blockNumber", [], 1),
      call("trace_transaction", [txHash], 2),
      call("trace_replayBlockTransactions", [minedBlock, ["trace"]], 3),
      call("debug_getRawHeader", ["latest"], 4)
    ])
    const body = await response.json() as Array<{ id: number; error?: { code: number } }>
    expect(body.map((item) => item.id)).toEqual([1, 2, 3, 4])
    expect(body[3]?.error?.code).toBe(-32601)
    expect(response.headers.get("x-service-rpc-credits")).toBe(String(20 + 40 + 80 + 5))
    expect(await account.charged()).toBe(RpcHarness.nanoOf(145))
  })
})

describe("RPC proxy: methods anvil would answer are refused by the proxy (unsupported, key-holding, cheat codes)", () => {
  it.each([
    "eth_newFilter",
    "eth_sign",
    "eth_accounts",
    "eth_sendTransaction",
    "eth_coinbase",
    "anvil_setBalance",
    "evm_mine",
    "debug_setHead",
    "personal_sign"
  ])(
    "%s -> 400, nothing charged",
    async (method) => {
      const account = await harness.account()
      const response = await account.fetch("ethereum-mainnet", call(method))
      expect(response.status).toBe(400)
      expect((await response.json() as { error: string }).error).toContain(JSON.stringify(method))
      expect(await account.charged()).toBe(0)
    }
  )
})

describe("RPC proxy: viem's public client works through the proxy for reads and batched reads", () => {
  it("single reads and an HTTP batch give what anvil gives directly", async () => {
    const url = await harness.listen()
    const account = await harness.account()
    const transport = (batch: boolean) =>
      http(`${url}/api/v1/crypto/rpc/ethereum-mainnet`, { batch, fetchOptions: { headers: { Authorization: account.authorization } } })
    const client = createPublicClient({ transport: transport(false) })
    const anvil = createPublicClient({ transport: http(mining.url) })
    expect(await client.getChainId()).toBe(1)
    expect(await client.getBlockNumber()).toBe(await anvil.getBlockNumber())
    expect(await client.getBalance({ address: dev })).toBe(await anvil.getBalance({ address: dev }))
    const batched = createPublicClient({ transport: transport(true) })
    const [chainId, blockNumber, balance, dead] = await Promise.all([
      batched.getChainId(),
      batched.getBlockNumber(),
      batched.getBalance({ address: dev }),
      batched.getBalance({ address: "0x000000000000000000000000000000000000dEaD" })
    ])
    expect(chainId).toBe(1)
    expect(blockNumber).toBe(await anvil.getBlockNumber())
    expect(balance).toBe(await anvil.getBalance({ address: dev }))
    expect(dead).toBe(1n)
    expect(await account.charged()).toBe(RpcHarness.nanoOf(7 * 20))
  })
})
