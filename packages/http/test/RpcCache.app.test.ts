/**
 * The RPC proxy's merged reads and finality-aware cache, on a real anvil behind a stand-in node
 * that counts what reaches it, over the memory and the Redis cache.
 */
import { NodeRedis } from "@effect/platform-node"
import { RpcCache } from "@tollgate/core"
import { RpcCacheRedis } from "@tollgate/redis"
import { Anvil, RedisServer } from "@tollgate/testkit"
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcHarness from "./RpcHarness.ts"

let anvil: Anvil.Anvil
let redis: RedisServer.RedisServer
const stops: Array<() => Promise<void>> = []

const direct = async (method: string, params: ReadonlyArray<unknown> = []) => {
  const response = await fetch(anvil.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  return (await response.json() as { result: unknown }).result
}

const hex = (n: number) => `0x${n.toString(16)}`

const call = (method: string, params: ReadonlyArray<unknown> = [], id: number | string = 1) => ({ jsonrpc: "2.0", id, method, params })

const dev = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

/** Replaces the last `depth` blocks with blocks whose first holds a new transaction, so every hash from there changes. */
let reorgs = 0
const reorg = (depth: number) =>
  direct("anvil_reorg", [depth, [[{ from: dev, to: "0x000000000000000000000000000000000000dEaD", value: hex(++reorgs) }, 0]]])

beforeAll(async () => {
  ;[anvil, redis] = await Promise.all([Anvil.start({ chainId: 1 }), RedisServer.acquire()])
  // Enough blocks for anvil's `finalized` tag to pass block 0.
  await direct("anvil_mine", [hex(200)])
}, 60_000)

afterAll(async () => {
  for (const stop of stops.reverse()) await stop()
  await anvil?.stop()
  await redis?.stop()
})

const caches = [
  { name: "memory", layer: (config: RpcCache.Config) => RpcCache.layerMemory(config) },
  {
    name: "redis",
    layer: (config: RpcCache.Config) => RpcCacheRedis.layerRedis(config).pipe(Layer.provide(NodeRedis.layer({ url: redis.url })))
  }
]

/** A stand-in in front of anvil and a proxy over it; head polls every 50 ms. */
const setUp = async (
  cache: (config: RpcCache.Config) => Layer.Layer<RpcCache.RpcCache, unknown>,
  config: RpcCache.Config = {},
  options: Parameters<typeof RpcHarness.standIn>[1] = {}
) => {
  const node = await RpcHarness.standIn(anvil.url, options)
  const proxy = await RpcHarness.make({
    upstreams: { "ethereum-mainnet": [node.url] },
    rpc: { headPollMs: 50, cache: config },
    cache: cache(config)
  })
  stops.push(node.stop, proxy.dispose)
  // Two polls seen: the proxy knows the head and the finalized block.
  await expect.poll(() => node.calls("eth_getBlockByNumber"), { timeout: 10_000 }).toBeGreaterThanOrEqual(4)
  return { node, proxy }
}

const finalizedBlock = async () =>
  Number.parseInt((await direct("eth_getBlockByNumber", ["finalized", false]) as { number: string }).number, 16)

describe("RPC proxy: identical reads in flight share one upstream call; each caller gets its own id and its own charge", () => {
  it("10 concurrent eth_getBalance from 10 accounts -> one upstream call, 10 answers with their ids, 20 credits each", async () => {
    const { node, proxy } = await setUp(caches[0]!.layer, {}, { delayMs: { eth_getBalance: 300 } })
    const accounts = await Promise.all(Array.from({ length: 10 }, () => proxy.account()))
    const responses = await Promise.all(
      accounts.map((account, i) => account.fetch("ethereum-mainnet", call("eth_getBalance", [dev, "latest"], `caller-${i}`)))
    )
    const bodies = await Promise.all(responses.map((response) => response.json() as Promise<{ id: string; result: string }>))
    const balance = await direct("eth_getBalance", [dev, "latest"])
    expect(bodies).toEqual(accounts.map((_account, i) => ({ jsonrpc: "2.0", id: `caller-${i}`, result: balance })))
    expect(node.calls("eth_getBalance")).toBe(1)
    for (const account of accounts) expect(await account.charged()).toBe(RpcHarness.nanoOf(20))
  })

  it("a write is never merged: two identical eth_sendRawTransaction both reach the node", async () => {
    const { node, proxy } = await setUp(caches[0]!.layer, {}, { delayMs: { eth_sendRawTransaction: 200 } })
    const same = call("eth_sendRawTransaction", ["0x02"])
    await Promise.all([proxy.fetch("ethereum-mainnet", same), proxy.fetch("ethereum-mainnet", same)])
    expect(node.calls("eth_sendRawTransaction")).toBe(2)
  })
})

for (const cache of caches) {
  describe(`RPC proxy: a read at or below the finalized block is answered from the cache, X-Cache: HIT, charged like a miss (${cache.name})`, () => {
    it("eth_getBlockByNumber of a finalized block twice -> one upstream call, MISS then HIT, 20 credits each, the caller's own id", async () => {
      const { node, proxy } = await setUp(cache.layer)
      const block = hex(await finalizedBlock() - 1)
      const account = await proxy.account()
      const first = await account.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false], 1))
      const second = await account.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false], "again"))
      expect([first.headers.get("x-cache"), second.headers.get("x-cache")]).toEqual(["MISS", "HIT"])
      expect([first.headers.get("x-service-rpc-credits"), second.headers.get("x-service-rpc-credits")]).toEqual(["20", "20"])
      const [a, b] = [await first.json() as { id: unknown; result: unknown }, await second.json() as { id: unknown; result: unknown }]
      expect(a.id).toBe(1)
      expect(b.id).toBe("again")
      expect(b.result).toEqual(a.result)
      expect(a.result).toEqual(await direct("eth_getBlockByNumber", [block, false]))
      expect(node.callsWith("eth_getBlockByNumber", block)).toBe(1)
      expect(await account.charged()).toBe(RpcHarness.nanoOf(40))
    })

    it("with hitDiscountPercent 50 a hit costs half the credits (rounded up), a miss the full price", async () => {
      const { proxy } = await setUp(cache.layer, { hitDiscountPercent: 50 })
      const block = hex(await finalizedBlock() - 2)
      const account = await proxy.account()
      const miss = await account.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false]))
      const hit = await account.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false]))
      expect([miss.headers.get("x-cache"), hit.headers.get("x-cache")]).toEqual(["MISS", "HIT"])
      expect([miss.headers.get("x-service-rpc-credits"), hit.headers.get("x-service-rpc-credits")]).toEqual(["20", "10"])
      expect(await account.charged()).toBe(RpcHarness.nanoOf(30))
    })

    it("a block by its hash and eth_chainId are kept", async () => {
      const { node, proxy } = await setUp(cache.layer)
      const block = await direct("eth_getBlockByNumber", [hex(await finalizedBlock() - 3), false]) as { hash: string }
      for (let i = 0; i < 3; i++) {
        await (await proxy.fetch("ethereum-mainnet", call("eth_getBlockByHash", [block.hash, false], i))).text()
        await (await proxy.fetch("ethereum-mainnet", call("eth_chainId", [], i))).text()
      }
      expect(node.calls("eth_getBlockByHash")).toBe(1)
      // One from the proxy's start-up check of the chain, one for the first call.
      expect(node.calls("eth_chainId")).toBe(2)
    })
  })

  describe(`RPC proxy: an answer above finality is never served stale after a reorg (${cache.name})`, () => {
    it("an unfinalized block is not kept: after anvil_reorg the proxy answers the new block", async () => {
      const { node, proxy } = await setUp(cache.layer)
      const head = Number.parseInt(await direct("eth_blockNumber") as string, 16)
      const block = hex(head - 1)
      const before = await (await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false]))).json() as {
        result: { hash: string }
      }
      const again = await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false]))
      expect(again.headers.get("x-cache")).toBe("MISS")
      await again.text()
      expect(node.callsWith("eth_getBlockByNumber", block)).toBe(2)
      await reorg(3)
      const after = await (await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", [block, false]))).json() as {
        result: { hash: string }
      }
      const truth = await direct("eth_getBlockByNumber", [block, false]) as { hash: string }
      expect(after.result.hash).toBe(truth.hash)
      expect(after.result.hash).not.toBe(before.result.hash)
    })

    it("a `latest` answer kept for headTtlMs is dropped once the proxy sees the reorged head", async () => {
      const { node, proxy } = await setUp(cache.layer, { headTtlMs: 60_000 })
      const first = await (await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", ["latest", false]))).json() as {
        result: { hash: string }
      }
      const hit = await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", ["latest", false]))
      expect(hit.headers.get("x-cache")).toBe("HIT")
      expect((await hit.json() as { result: { hash: string } }).result.hash).toBe(first.result.hash)
      await reorg(1)
      const polls = node.calls("eth_getBlockByNumber")
      await expect.poll(() => node.calls("eth_getBlockByNumber"), { timeout: 10_000 }).toBeGreaterThanOrEqual(polls + 4)
      const after = await proxy.fetch("ethereum-mainnet", call("eth_getBlockByNumber", ["latest", false]))
      expect(after.headers.get("x-cache")).toBe("MISS")
      const truth = await direct("eth_getBlockByNumber", ["latest", false]) as { hash: string }
      expect((await after.json() as { result: { hash: string } }).result.hash).toBe(truth.hash)
      expect(truth.hash).not.toBe(first.result.hash)
    })
  })
}

for (const cache of caches) {
  describe(`RPC proxy: a batch of reads is answered item by item from the cache, the rest sent upstream in one batch, each answer with its own id (${cache.name})`, () => {
    it("a batch of two reads -> one upstream call (MISS); the next sends only the item the cache lacks; one wholly cached is a HIT with no upstream call; 20 credits per item every time", async () => {
      const { node, proxy } = await setUp(cache.layer)
      // Blocks no other test reads: the Redis cache is shared by the whole file.
      const block = hex(await finalizedBlock() - 20)
      const other = hex(await finalizedBlock() - 21)
      const [expected, otherBlock, balance] = await Promise.all([
        direct("eth_getBlockByNumber", [block, false]),
        direct("eth_getBlockByNumber", [other, false]),
        direct("eth_getBalance", [dev, "latest"])
      ])
      const account = await proxy.account()

      const first = await account.fetch("ethereum-mainnet", [
        call("eth_getBlockByNumber", [block, false], "a"),
        call("eth_getBalance", [dev, "latest"], 7)
      ])
      expect(first.headers.get("x-cache")).toBe("MISS")
      expect(await first.json()).toEqual([{ jsonrpc: "2.0", id: "a", result: expected }, { jsonrpc: "2.0", id: 7, result: balance }])
      expect([node.callsWith("eth_getBlockByNumber", block), node.calls("eth_getBalance")]).toEqual([1, 1])

      const partly = await account.fetch("ethereum-mainnet", [
        call("eth_getBlockByNumber", [other, false], 1),
        call("eth_getBlockByNumber", [block, false], 2)
      ])
      expect(partly.headers.get("x-cache")).toBe("MISS")
      expect(await partly.json()).toEqual([{ jsonrpc: "2.0", id: 1, result: otherBlock }, { jsonrpc: "2.0", id: 2, result: expected }])
      expect([node.callsWith("eth_getBlockByNumber", other), node.callsWith("eth_getBlockByNumber", block)]).toEqual([1, 1])

      const cached = await account.fetch("ethereum-mainnet", [
        call("eth_getBlockByNumber", [block, false], "x"),
        call("eth_getBlockByNumber", [other, false], "y")
      ])
      expect([cached.headers.get("x-cache"), cached.headers.get("x-service-rpc-credits")]).toEqual(["HIT", "40"])
      expect(await cached.json()).toEqual([{ jsonrpc: "2.0", id: "x", result: expected }, { jsonrpc: "2.0", id: "y", result: otherBlock }])
      expect([node.callsWith("eth_getBlockByNumber", other), node.callsWith("eth_getBlockByNumber", block)]).toEqual([1, 1])
      expect(await account.charged()).toBe(RpcHarness.nanoOf(40 + 40 + 40))
    })

    it("a batch with a write goes upstream as it came, uncached: identical reads beside it are both sent", async () => {
      const { node, proxy } = await setUp(cache.layer)
      const block = hex(await finalizedBlock() - 22)
      await proxy.fetch("ethereum-mainnet", [
        call("eth_getBlockByNumber", [block, false], 1),
        call("eth_getBlockByNumber", [block, false], 2),
        call("eth_sendRawTransaction", ["0x02"], 3)
      ])
      expect([node.callsWith("eth_getBlockByNumber", block), node.calls("eth_sendRawTransaction")]).toEqual([2, 1])
    })
  })
}
