/**
 * The RPC proxy through the shipped server (`pnpm start`'s entry on a real port), over anvil and
 * stand-in nodes: the start-up check of each upstream's chain, the cache and its charges on
 * memory and on Redis, merged reads, and the hedge and head-lag metrics.
 */
import { Anvil, RedisServer, RpcStandIn, ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { createPublicClient, http } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let anvil: Anvil.Anvil
let redis: RedisServer.RedisServer

const direct = async (method: string, params: ReadonlyArray<unknown> = []) => {
  const response = await fetch(anvil.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  return (await response.json() as { result: unknown }).result
}

beforeAll(async () => {
  ;[anvil, redis] = await Promise.all([Anvil.start({ chainId: 1 }), RedisServer.acquire()])
  // Enough blocks for anvil's `finalized` tag to pass block 0.
  await direct("anvil_mine", ["0xc8"])
}, 60_000)

afterAll(async () => {
  await anvil?.stop()
  await redis?.stop()
})

/** nano-USD of credits at the default price (625 nano-USD per credit). */
const nanoOf = (credits: number) => credits * 625

/** A node that says it is on `chainId` and answers nothing else. */
const otherChain = async (chainId: number) => {
  const server = Http.createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify([{ jsonrpc: "2.0", id: 3, result: `0x${chainId.toString(16)}` }]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    stop: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(resolve))
    }
  }
}

describe("RPC proxy: a bad rpc section stops the server at start, naming the key", () => {
  it("an unknown key in the rpc section -> exit 1, naming it", async () => {
    const spawned = await ShippedServer.spawn({ config: { rpc: { upstreams: {}, hedgeAfter: 5 } } })
    const code = await spawned.exited
    const output = spawned.stdout()
    await spawned.stop()
    expect(code).toBe(1)
    expect(output).toContain("TOLLGATE_CONFIG.rpc.hedgeAfter")
  })
})

describe("RPC proxy: an upstream reporting another chain id stops the server at start, with one line naming the URL", () => {
  it("an ethereum-mainnet upstream on chain 5 -> exit 1, one FATAL line naming it", async () => {
    const wrong = await otherChain(5)
    try {
      const spawned = await ShippedServer.spawn({
        config: { rpc: { upstreams: { "ethereum-mainnet": [anvil.url, wrong.url.replace("http://", "http://user:secret@")] } } }
      })
      const code = await spawned.exited
      const lines = spawned.stdout().trim().split("\n")
      await spawned.stop()
      expect(code).toBe(1)
      expect(lines).toHaveLength(1)
      const line = JSON.parse(lines[0]!) as { level: string; message: string }
      expect(line.level).toBe("FATAL")
      expect(line.message).toBe(
        `invalid configuration: TOLLGATE_CONFIG.rpc.upstreams.ethereum-mainnet: ${wrong.url} reports chain id 5, not 1 (ethereum-mainnet)`
      )
    } finally {
      await wrong.stop()
    }
  })

  it("upstreams on the right chain start, with every rpc key docs/rpc-proxy.md shows", async () => {
    const server = await ShippedServer.start({
      config: {
        rpc: {
          upstreams: { "ethereum-mainnet": [anvil.url] },
          timeoutMs: 30000,
          attempts: 2,
          headPollMs: 2000,
          maxLagBlocks: 5,
          finalityDepth: { "bsc-mainnet": 15 },
          hedgeAfterMs: "p90",
          getLogs: { maxRange: 2000, maxParts: 10 },
          cache: { maxEntries: 100000, maxBytes: 67108864, headTtlMs: 0, hitDiscountPercent: 0 }
        }
      }
    })
    try {
      const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" })
      })
      expect(await response.json()).toEqual({ jsonrpc: "2.0", id: 1, result: "0x1" })
    } finally {
      await server.stop()
    }
  })
})

const stores = [
  { name: "memory", options: (): ShippedServer.Options => ({}) },
  { name: "redis", options: (): ShippedServer.Options => ({ store: "redis", redisUrl: redis.url }) }
]

for (const store of stores) {
  describe(`RPC proxy: a cache hit is charged exactly like a miss, and its usage entry says so (shipped server, ${store.name})`, () => {
    let server: ShippedServer.ShippedServer

    beforeAll(async () => {
      server = await ShippedServer.start({
        ...store.options(),
        env: { TOLLGATE_METRICS: "open" },
        config: { rpc: { upstreams: { "ethereum-mainnet": [anvil.url] }, headPollMs: 100 } }
      })
    }, 90_000)
    afterAll(() => server?.stop())

    const balanceNano = async () => {
      const response = await fetch(`${server.api}/billing/balance`, {
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` }
      })
      return Math.round((await response.json() as { balances: { usd: number } }).balances.usd * 1e9)
    }

    it("viem reads a finalized block twice: MISS then HIT, the same block, 20 credits each, one upstream answer kept", async () => {
      const finalized = Number.parseInt((await direct("eth_getBlockByNumber", ["finalized", false]) as { number: string }).number, 16)
      const seen: Array<{ cache: string | null; credits: string | null }> = []
      const client = createPublicClient({
        transport: http(`${server.api}/crypto/rpc/ethereum-mainnet`, {
          fetchOptions: { headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` } },
          onFetchResponse: (response) => {
            seen.push({ cache: response.headers.get("x-cache"), credits: response.headers.get("x-service-rpc-credits") })
          }
        })
      })
      const before = await balanceNano()
      const first = await client.getBlock({ blockNumber: BigInt(finalized - 1) })
      const second = await client.getBlock({ blockNumber: BigInt(finalized - 1) })
      expect(second.hash).toBe(first.hash)
      expect(first.hash).toBe((await direct("eth_getBlockByNumber", [`0x${(finalized - 1).toString(16)}`, false]) as { hash: string }).hash)
      expect(seen).toEqual([{ cache: "MISS", credits: "20" }, { cache: "HIT", credits: "20" }])
      expect(before - await balanceNano()).toBe(nanoOf(40))
      const usage = await fetch(`${server.api}/billing/usage-history?limit=2`, {
        headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
      })
      const entries = (await usage.json() as { data: ReadonlyArray<{ notes: string; amount: number }> }).data
      expect(entries.map((entry) => entry.notes)).toEqual([
        "1 JSON-RPC call on ethereum-mainnet (cache hit)",
        "1 JSON-RPC call on ethereum-mainnet"
      ])
      const metrics = await (await fetch(`${server.origin}/metrics`)).text()
      expect(metrics).toMatch(/^tollgate_rpc_cache_hits_total\{network="ethereum-mainnet"\} 1$/m)
      expect(metrics).toMatch(/^tollgate_rpc_cache_misses_total\{network="ethereum-mainnet"\} 1$/m)
      expect(metrics).toMatch(
        /^tollgate_rpc_upstream_calls_total\{network="ethereum-mainnet",upstream="http:\/\/127\.0\.0\.1:\d+\/"\} \d+$/m
      )
    })
  })
}

describe("RPC proxy: /metrics counts the hedges sent and won and shows each upstream's head lag (shipped server)", () => {
  let server: ShippedServer.ShippedServer
  const nodes: Array<RpcStandIn.StandIn> = []

  beforeAll(async () => {
    // The slow node answers the head polls at once and so ranks first for reads; the fast one is
    // slow only to the polls. The lagging node reports a head 10 blocks behind.
    const slow = await RpcStandIn.start(anvil.url, { delayMs: { eth_getBalance: 5_000 } })
    const fast = await RpcStandIn.start(anvil.url, { delayMs: { eth_getBlockByNumber: 400 } })
    const lagging = await RpcStandIn.start(anvil.url, { lagBlocks: 10 })
    nodes.push(slow, fast, lagging)
    server = await ShippedServer.start({
      env: { TOLLGATE_METRICS: "open" },
      config: {
        rpc: { upstreams: { "ethereum-mainnet": [slow.url, fast.url, lagging.url] }, headPollMs: 100, maxLagBlocks: 5, hedgeAfterMs: 100 }
      }
    })
  }, 90_000)
  afterAll(async () => {
    await server?.stop()
    for (const node of nodes) await node.stop()
  })

  const metrics = async () => (await fetch(`${server.origin}/metrics`)).text()
  const label = (node: RpcStandIn.StandIn) => `${node.url}/`.replace(/[./]/g, (c) => `\\${c}`)
  const lag = (node: RpcStandIn.StandIn) =>
    new RegExp(`^tollgate_rpc_upstream_head_lag_blocks\\{network="ethereum-mainnet",upstream="${label(node)}"\\} (\\d+)$`, "m")

  // Polled until the lagging node's head is known, so reads leave it out from the first.
  beforeAll(async () => {
    const deadline = Date.now() + 20_000
    while (lag(nodes[2]!).exec(await metrics())?.[1] !== "10" && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50))
  }, 30_000)

  it("a lagging node's lag is its distance to the best head; the others' is 0", async () => {
    const [slow, fast, lagging] = nodes as [RpcStandIn.StandIn, RpcStandIn.StandIn, RpcStandIn.StandIn]
    const text = await metrics()
    expect(lag(lagging).exec(text)?.[1]).toBe("10")
    expect(lag(slow).exec(text)?.[1]).toBe("0")
    expect(lag(fast).exec(text)?.[1]).toBe("0")
  })

  it("a read the slow node holds past hedgeAfterMs is answered by the fast node: one hedge sent, one won, the lagging node never asked", async () => {
    const [slow, fast, lagging] = nodes as [RpcStandIn.StandIn, RpcStandIn.StandIn, RpcStandIn.StandIn]
    const dev = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
    const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: "hedged", method: "eth_getBalance", params: [dev, "latest"] })
    })
    expect(await response.json()).toEqual({ jsonrpc: "2.0", id: "hedged", result: await direct("eth_getBalance", [dev, "latest"]) })
    expect([
      slow.calls("eth_getBalance"),
      slow.answered("eth_getBalance"),
      fast.answered("eth_getBalance"),
      lagging.calls("eth_getBalance")
    ]).toEqual([1, 0, 1, 0])
    const text = await metrics()
    expect(text).toMatch(/^tollgate_rpc_hedges_sent_total\{network="ethereum-mainnet"\} 1$/m)
    expect(text).toMatch(/^tollgate_rpc_hedges_won_total\{network="ethereum-mainnet"\} 1$/m)
  })
})
