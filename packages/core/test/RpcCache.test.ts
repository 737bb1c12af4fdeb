import { Networks, RpcCache, RpcCachePolicy } from "@tollgate/core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"

const ethereum = Networks.findNetwork("ethereum-mainnet")!
const solana = Networks.findNetwork("solana-mainnet")!
const hash = `0x${"ab".repeat(32)}`
const ttl = { ttlMs: 1000, headTtlMs: 0 }

describe("RpcCachePolicy: what cannot change is kept, what follows the head only with headTtlMs, the rest never", () => {
  it.each([
    ["eth_chainId", [], "immutable"],
    ["eth_getBlockByHash", [hash, false], "immutable"],
    ["eth_getBalance", ["0x1", { blockHash: hash }], "immutable"],
    ["eth_call", [{ to: "0x1" }, hash], "immutable"],
    ["eth_getLogs", [{ blockHash: hash }], "immutable"],
    ["eth_getTransactionReceipt", [hash], "finality"],
    ["eth_getTransactionByHash", [hash], "finality"],
    ["eth_blockNumber", [], "head"],
    ["eth_getBalance", ["0x1", "latest"], "head"],
    ["eth_getBalance", ["0x1"], "head"],
    ["eth_call", [{ to: "0x1" }, "safe"], "head"],
    ["eth_getBalance", ["0x1", "pending"], "none"],
    ["eth_sendRawTransaction", ["0x02"], "none"],
    ["eth_getLogs", [{ fromBlock: "0x1", toBlock: "latest" }], "none"],
    ["eth_getLogs", [{ fromBlock: "0x5", toBlock: "0x1" }], "none"],
    ["debug_traceTransaction", [hash], "none"]
  ])("%s %j -> %s", (method, params, tag) => {
    expect(RpcCachePolicy.decide(ethereum, method, params)._tag).toBe(tag)
  })

  it("a block number is kept once at or below the finalized block, `earliest` as block 0", () => {
    const at = RpcCachePolicy.decide(ethereum, "eth_getBlockByNumber", ["0x10", false])
    expect(at).toEqual({ _tag: "block", number: 16 })
    expect(RpcCachePolicy.lifetime(at, { number: "0x10" }, 16, ttl)).toBe(1000)
    expect(RpcCachePolicy.lifetime(at, { number: "0x10" }, 15, ttl)).toBeUndefined()
    expect(RpcCachePolicy.lifetime(at, { number: "0x10" }, undefined, ttl)).toBeUndefined()
    expect(RpcCachePolicy.decide(ethereum, "eth_getCode", ["0x1", "earliest"])).toEqual({ _tag: "block", number: 0 })
    expect(RpcCachePolicy.decide(ethereum, "eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x9" }])).toEqual({ _tag: "block", number: 9 })
  })

  it("a receipt is kept once its block is finalized; a pending one (no block) never", () => {
    const decision = RpcCachePolicy.decide(ethereum, "eth_getTransactionReceipt", [hash])
    expect(RpcCachePolicy.lifetime(decision, { blockNumber: "0x5" }, 5, ttl)).toBe(1000)
    expect(RpcCachePolicy.lifetime(decision, { blockNumber: "0x6" }, 5, ttl)).toBeUndefined()
    expect(RpcCachePolicy.lifetime(decision, { blockNumber: null }, 5, ttl)).toBeUndefined()
  })

  it("null, [] and \"\" are never kept, even for what cannot change", () => {
    const immutable = RpcCachePolicy.decide(ethereum, "eth_getBlockByHash", [hash, false])
    for (const empty of [null, [], ""]) expect(RpcCachePolicy.lifetime(immutable, empty, 100, ttl)).toBeUndefined()
    expect(RpcCachePolicy.lifetime(immutable, "0x", 100, ttl)).toBe(1000)
  })

  it("an answer that follows the head is kept only for a headTtlMs above 0", () => {
    const head = RpcCachePolicy.decide(ethereum, "eth_blockNumber", [])
    expect(RpcCachePolicy.lifetime(head, "0x10", 5, ttl)).toBeUndefined()
    expect(RpcCachePolicy.lifetime(head, "0x10", 5, { ttlMs: 1000, headTtlMs: 250 })).toBe(250)
  })

  it("nothing is kept on a network without a chain id (Solana, Starknet)", () => {
    expect(RpcCachePolicy.decide(solana, "getGenesisHash", [])._tag).toBe("none")
    expect(RpcCachePolicy.decide(solana, "eth_chainId", [])._tag).toBe("none")
  })
})

describe("RpcCache memory layer: bounded in entries and bytes, least recently used out first", () => {
  const run = <A>(effect: Effect.Effect<A>) => Effect.runSync(effect)

  it("past maxEntries the least recently read entry goes", () => {
    const cache = RpcCache.makeMemory(RpcCache.settings({ maxEntries: 2 }))
    run(cache.set("a", "1", 60_000))
    run(cache.set("b", "2", 60_000))
    expect(run(cache.get("a"))).toBe("1")
    run(cache.set("c", "3", 60_000))
    expect([run(cache.get("a")), run(cache.get("b")), run(cache.get("c"))]).toEqual(["1", undefined, "3"])
  })

  it("past maxBytes the oldest entries go; an entry above maxEntryBytes is not kept", () => {
    const cache = RpcCache.makeMemory(RpcCache.settings({ maxBytes: 100, maxEntryBytes: 60 }))
    run(cache.set("a", "x".repeat(25), 60_000))
    run(cache.set("b", "y".repeat(25), 60_000))
    expect(run(cache.get("a"))).toBeUndefined()
    expect(run(cache.get("b"))).toBe("y".repeat(25))
    run(cache.set("big", "z".repeat(40), 60_000))
    expect(run(cache.get("big"))).toBeUndefined()
  })

  it("an expired entry is a miss", () => {
    const cache = RpcCache.makeMemory(RpcCache.settings())
    run(cache.set("a", "1", -1))
    expect(run(cache.get("a"))).toBeUndefined()
  })
})
