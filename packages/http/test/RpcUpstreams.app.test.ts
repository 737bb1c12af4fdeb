/**
 * How the RPC proxy chooses among a network's upstreams, on a real anvil behind stand-in nodes
 * (real HTTP servers) that lag, answer slowly or report another chain.
 */
import { Anvil } from "@tollgate/testkit"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcHarness from "./RpcHarness.ts"

let anvil: Anvil.Anvil
const stops: Array<() => Promise<void>> = []

const direct = async (method: string, params: ReadonlyArray<unknown> = []) => {
  const response = await fetch(anvil.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  return (await response.json() as { result: unknown }).result
}

const call = (method: string, params: ReadonlyArray<unknown> = [], id: number | string = 1) => ({ jsonrpc: "2.0", id, method, params })

const dev = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 1 })
  await direct("anvil_mine", ["0x20"])
}, 60_000)

afterAll(async () => {
  for (const stop of stops.reverse()) await stop()
  await anvil?.stop()
})

const standIn = async (options: Parameters<typeof RpcHarness.standIn>[1]) => {
  const node = await RpcHarness.standIn(anvil.url, options)
  stops.push(node.stop)
  return node
}

const harness = async (urls: ReadonlyArray<string>, rpc: Parameters<typeof RpcHarness.make>[0]["rpc"]) => {
  const made = await RpcHarness.make({ upstreams: { "ethereum-mainnet": urls }, ...(rpc === undefined ? {} : { rpc }) })
  stops.push(made.dispose)
  return made
}

/** Waits until the proxy has polled every upstream's head at least twice. */
const polled = (nodes: ReadonlyArray<RpcHarness.StandIn>) =>
  expect.poll(() => Math.min(...nodes.map((node) => node.calls("eth_getBlockByNumber"))), { timeout: 10_000 }).toBeGreaterThanOrEqual(4)

describe("RPC proxy: an upstream lagging more than maxLagBlocks behind the best head is skipped for reads while a fresh one exists", () => {
  it("reads go to the fresh node only, though the lagging one is listed first", async () => {
    const lagging = await standIn({ lagBlocks: 10 })
    const fresh = await standIn({})
    const proxy = await harness([lagging.url, fresh.url], { headPollMs: 50, maxLagBlocks: 5, hedgeAfterMs: "off" })
    await polled([lagging, fresh])
    for (let i = 0; i < 5; i++) {
      const response = await proxy.fetch("ethereum-mainnet", call("eth_getBalance", [dev, "latest"], i))
      expect(response.status).toBe(200)
    }
    expect(lagging.calls("eth_getBalance")).toBe(0)
    expect(fresh.calls("eth_getBalance")).toBe(5)
    const head = await proxy.fetch("ethereum-mainnet", call("eth_blockNumber"))
    expect((await head.json() as { result: string }).result).toBe(await direct("eth_blockNumber"))
  })

  it("a node lagging no more than maxLagBlocks keeps its reads when it scores best", async () => {
    const behind = await standIn({ lagBlocks: 10 })
    const slowFresh = await standIn({ delayMs: { eth_getBlockByNumber: 100, eth_getBalance: 100 } })
    const proxy = await harness([slowFresh.url, behind.url], { headPollMs: 50, maxLagBlocks: 20, hedgeAfterMs: "off" })
    await polled([behind, slowFresh])
    for (let i = 0; i < 5; i++) await (await proxy.fetch("ethereum-mainnet", call("eth_getBalance", [dev, "latest"], i))).text()
    expect(behind.calls("eth_getBalance")).toBe(5)
    expect(slowFresh.calls("eth_getBalance")).toBe(0)
  })
})

describe("RPC proxy: a read still unanswered after the hedge delay is also sent to a second upstream; the first answer wins", () => {
  it("the fast node's answer is returned while the slow node's is still pending", async () => {
    const slow = await standIn({ delayMs: { eth_getBalance: 5_000 } })
    // Slower to the start-up probe, so the proxy ranks the slow node first and the hedge has work.
    const fast = await standIn({ delayMs: { eth_getBlockByNumber: 50 } })
    const proxy = await harness([slow.url, fast.url], { hedgeAfterMs: 100 })
    const response = await proxy.fetch("ethereum-mainnet", call("eth_getBalance", [dev, "latest"], "hedged"))
    const body = await response.json() as { id: string; result: string }
    expect(response.status).toBe(200)
    expect(body).toEqual({ jsonrpc: "2.0", id: "hedged", result: await direct("eth_getBalance", [dev, "latest"]) })
    expect(slow.calls("eth_getBalance")).toBe(1)
    expect(slow.answered("eth_getBalance")).toBe(0)
    expect(fast.calls("eth_getBalance")).toBe(1)
    expect(await proxy.charged()).toBe(RpcHarness.nanoOf(20))
  })
})

describe("RPC proxy: a write is never hedged and never sent twice", () => {
  it("a slow eth_sendRawTransaction reaches one node only, however long it takes", async () => {
    const slow = await standIn({ delayMs: { eth_sendRawTransaction: 1_000 } })
    const fast = await standIn({ delayMs: { eth_getBlockByNumber: 50 } })
    const proxy = await harness([slow.url, fast.url], { hedgeAfterMs: 20 })
    const account = privateKeyToAccount(Anvil.devPrivateKey)
    const nonce = Number.parseInt(await direct("eth_getTransactionCount", [dev, "pending"]) as string, 16)
    const raw = await account.signTransaction({
      chainId: 1,
      type: "eip1559",
      to: "0x000000000000000000000000000000000000dEaD",
      value: 1n,
      nonce,
      gas: 21_000n,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n
    })
    const response = await proxy.fetch("ethereum-mainnet", call("eth_sendRawTransaction", [raw]))
    const body = await response.json() as { result: string }
    expect(response.status).toBe(200)
    expect(body.result).toMatch(/^0x[0-9a-f]{64}$/)
    expect(slow.calls("eth_sendRawTransaction")).toBe(1)
    expect(fast.calls("eth_sendRawTransaction")).toBe(0)
  })
})

describe("RPC proxy: eth_getLogs over a range wider than the node accepts is split into rpc.getLogs.maxRange parts and joined, up to maxParts", () => {
  it("logs of 121 blocks through a node that takes 50 at most: three calls, the logs anvil gives for the whole range", async () => {
    // Contracts whose constructor emits one LOG0 (init code PUSH1 0 PUSH1 0 LOG0), spread over the range.
    // The blocks are read from the receipts, so a log mined later than its transaction was sent still
    // lands where the range expects it.
    const logBlocks: Array<number> = []
    for (let i = 0; i < 4; i++) {
      const hash = await direct("eth_sendTransaction", [{ from: dev, data: "0x60006000a000" }])
      // anvil may answer eth_sendTransaction before the block that holds it is mined.
      let receipt: { blockNumber: string } | null = null
      while (receipt === null) {
        receipt = await direct("eth_getTransactionReceipt", [hash]) as { blockNumber: string } | null
      }
      logBlocks.push(Number.parseInt(receipt.blockNumber, 16))
      if (i < 3) await direct("anvil_mine", [`0x${(logBlocks[0]! + 40 * (i + 1) - logBlocks[i]! - 1).toString(16)}`])
    }
    const start = logBlocks[0]!
    const end = start + 120
    expect(logBlocks[3]).toBe(end)
    await direct("anvil_mine", ["0x40"])
    const narrow = await standIn({ maxLogRange: 50 })
    const proxy = await harness([narrow.url], { getLogs: { maxRange: 50, maxParts: 3 } })
    const filter = { fromBlock: `0x${start.toString(16)}`, toBlock: `0x${end.toString(16)}` }
    const response = await proxy.fetch("ethereum-mainnet", call("eth_getLogs", [filter], "logs"))
    const body = await response.json() as { id: string; result: ReadonlyArray<unknown> }
    expect(body.id).toBe("logs")
    expect(body.result).toHaveLength(4)
    expect(body.result).toEqual(await direct("eth_getLogs", [filter]))
    expect(narrow.calls("eth_getLogs")).toBe(3)
    expect(response.headers.get("x-service-rpc-credits")).toBe("20")
  })

  it("a range needing more than maxParts parts goes as it came, and the node's refusal is the answer", async () => {
    const narrow = await standIn({ maxLogRange: 50 })
    const proxy = await harness([narrow.url], { getLogs: { maxRange: 50, maxParts: 2 } })
    const response = await proxy.fetch("ethereum-mainnet", call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x97" }]))
    const body = await response.json() as { error: { code: number } }
    expect(body.error.code).toBe(-32005)
    expect(narrow.calls("eth_getLogs")).toBe(1)
    expect(response.headers.get("x-service-rpc-credits")).toBe("5")
  })
})
