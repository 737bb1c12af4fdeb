import { JsonRpc, Networks, RpcAllowlist } from "@tollgate/core"
import { FreePort, RedisServer } from "@tollgate/testkit"
import * as fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcHarness from "./RpcHarness.ts"
import * as TestApp from "./support/TestApp.ts"

const call = (method: string, id: number | string = 1, params: ReadonlyArray<unknown> = []) => ({ jsonrpc: "2.0", id, method, params })

const ok = (result: unknown): RpcHarness.Answer => ({ result })

let upstream: RpcHarness.FakeUpstream
let harness: RpcHarness.Harness

// One fake node answers every family's methods; each slug points at it.
const canned: Record<string, RpcHarness.Answer> = {
  eth_blockNumber: ok("0x10"),
  eth_chainId: ok("0x1"),
  eth_getBalance: ok("0x0"),
  getBalance: ok({ context: { slot: 1 }, value: 5 }),
  getSlot: ok(7),
  getLargestAccounts: ok({ context: { slot: 1 }, value: [] }),
  starknet_blockNumber: ok(1234),
  starknet_traceTransaction: ok({ type: "INVOKE" }),
  zks_L1ChainId: ok("0x1"),
  debug_traceTransaction: ok({ calls: [] }),
  bor_getAuthor: ok("0xabc"),
  linea_estimateGas: ok({ gasLimit: "0x5208" }),
  optimism_syncStatus: ok({ safe_l2: {} }),
  arbtrace_block: ok([]),
  arbtrace_replayTransaction: ok({ trace: [] }),
  hardhat_style: { error: { code: -32004, message: "Method hardhat_style is not supported" } },
  infura_style: { error: { code: -32001, message: "resource not found" } },
  eth_getProof: { error: { code: -32000, message: "the method eth_getProof is not supported on this node" } },
  eth_getCode: { error: { code: -32602, message: "invalid argument 0" } },
  eth_estimateGas: { error: { code: -32004, message: "Method eth_estimateGas is not supported" } },
  eth_gasPrice: { error: { code: -32001, message: "Method not available" } }
}

beforeAll(async () => {
  upstream = await RpcHarness.fakeUpstream(canned)
  harness = await RpcHarness.make({
    upstreams: Object.fromEntries(Networks.slugs.map((slug) => [slug, [`${upstream.url}/${slug}`]]))
  })
})

afterAll(async () => {
  await harness?.dispose()
  await upstream?.stop()
})

describe("RPC proxy: each chain family forwards its own methods at its own price (fake upstream)", () => {
  it.each(
    [
      ["solana-mainnet", "getBalance", 30],
      ["solana-devnet", "getLargestAccounts", 120],
      ["starknet-mainnet", "starknet_blockNumber", 20],
      ["starknet-sepolia", "starknet_traceTransaction", 20],
      ["zksync-mainnet", "zks_L1ChainId", 30],
      ["zksync-sepolia", "debug_traceTransaction", 60],
      ["polygon-mainnet", "bor_getAuthor", 20],
      ["linea-mainnet", "linea_estimateGas", 20],
      ["optimism-mainnet", "optimism_syncStatus", 20],
      ["base-mainnet", "optimism_syncStatus", 20],
      ["arbitrum-mainnet", "arbtrace_block", 40],
      ["robinhood-mainnet", "arbtrace_replayTransaction", 80]
    ] as const
  )("%s %s costs %i credits", async (network, method, credits) => {
    const account = await harness.account()
    const response = await account.fetch(network, call(method))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ jsonrpc: "2.0", id: 1, ...canned[method] })
    expect(response.headers.get("x-service-rpc-credits")).toBe(String(credits))
    expect(await account.charged()).toBe(RpcHarness.nanoOf(credits))
  })

  it.each(
    [
      ["solana-mainnet", "accountSubscribe", "WebSocket-only"],
      ["solana-mainnet", "slotUnsubscribe", "WebSocket-only"],
      ["starknet-mainnet", "starknet_subscribeNewHeads", "WebSocket-only"],
      ["ethereum-mainnet", "eth_subscribe", "WebSocket-only"],
      ["solana-mainnet", "getRecentBlockhash", "unsupported"],
      ["solana-mainnet", "eth_blockNumber", "unknown"],
      ["starknet-mainnet", "getBalance", "unknown"],
      ["ethereum-mainnet", "zks_L1ChainId", "unknown"],
      ["zksync-mainnet", "trace_transaction", "unknown"],
      ["ethereum-mainnet", "arbtrace_block", "unknown"]
    ] as const
  )("%s refuses %s (%s)", async (network, method, why) => {
    const before = upstream.requests()
    const response = await harness.fetch(network, call(method))
    expect(response.status).toBe(400)
    expect((await response.json() as { error: string }).error).toContain(`${JSON.stringify(method)} (${why})`)
    expect(upstream.requests()).toBe(before)
  })
})

describe("RPC proxy: the upstream's answer keeps the request's ids and order; method-not-found dialects become -32601", () => {
  it("a batch answered in reverse order comes back in request order", async () => {
    const response = await harness.fetch("ethereum-mainnet", [
      call("eth_blockNumber", "a"),
      call("eth_chainId", 7),
      call("eth_getBalance", "z")
    ])
    const body = await response.json() as Array<{ id: unknown }>
    expect(body.map((item) => item.id)).toEqual(["a", 7, "z"])
  })

  it.each([["eth_estimateGas", -32004], ["eth_gasPrice", -32001], ["eth_getProof", -32000]] as const)(
    "%s answered with %i -> -32601, billed 5 credits",
    async (method, _code) => {
      const account = await harness.account()
      const response = await account.fetch("ethereum-mainnet", call(method))
      const body = await response.json() as { error: { code: number; message: string } }
      expect(body.error.code).toBe(-32601)
      expect(response.headers.get("x-service-rpc-credits")).toBe("5")
      expect(await account.charged()).toBe(RpcHarness.nanoOf(5))
    }
  )

  it("other JSON-RPC errors pass through unchanged and are billed 5 credits", async () => {
    const response = await harness.fetch("ethereum-mainnet", call("eth_getCode"))
    expect(await response.json()).toEqual({ jsonrpc: "2.0", id: 1, error: { code: -32602, message: "invalid argument 0" } })
    expect(response.headers.get("x-service-rpc-credits")).toBe("5")
  })
})

describe("RPC proxy: the node's answer reaches the caller as it came, ids exact; an item not answered with a result costs 5 credits", () => {
  let script: (request: string) => string = () => ""
  let node: RpcHarness.FakeUpstream
  let local: RpcHarness.Harness
  beforeAll(async () => {
    node = await RpcHarness.scriptedUpstream((request) => script(request))
    local = await RpcHarness.make({ upstreams: { "ethereum-mainnet": [node.url] } })
  })
  afterAll(async () => {
    await local?.dispose()
    await node?.stop()
  })
  const send = async (body: string, reply: string) => {
    script = () => reply
    const account = await local.account()
    const response = await account.fetch("ethereum-mainnet", body)
    return {
      status: response.status,
      text: await response.text(),
      credits: response.headers.get("x-service-rpc-credits"),
      charged: await account.charged()
    }
  }
  const BIG = "12345678901234567890"
  const BIG_NEXT = "12345678901234567891"
  const raw = (id: string, method: string) => `{"jsonrpc":"2.0","id":${id},"method":"${method}"}`

  it("ids beyond 2^53 answered out of order come back in request order, each id as sent", async () => {
    const first = `{"jsonrpc":"2.0","id":${BIG},"result":"0x1"}`
    const second = `{"jsonrpc":"2.0","id":${BIG_NEXT},"result":"0x10"}`
    const result = await send(`[${raw(BIG, "eth_chainId")},${raw(BIG_NEXT, "eth_blockNumber")}]`, `[${second},${first}]`)
    expect(result.text).toBe(`[${first},${second}]`)
    expect(result.text).not.toContain("12345678901234567000")
    expect(result.credits).toBe("40")
  })

  it("a single txpool_content answered by an error with a null id costs 5 credits, not 80", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"txpool is busy"}}`
    const result = await send(raw("1", "txpool_content"), error)
    expect([result.status, result.text, result.credits, result.charged]).toEqual([200, error, "5", RpcHarness.nanoOf(5)])
  })

  it("a batch of two answered by two null-id errors costs 10 credits, not 100", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`
    const result = await send(`[${raw("1", "txpool_content")},${raw("2", "txpool_status")}]`, `[${error},${error}]`)
    expect([result.text, result.credits, result.charged]).toEqual([`[${error},${error}]`, "10", RpcHarness.nanoOf(10)])
  })

  it("one error object for a whole batch costs 5 credits per item and passes through as it came", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch limit exceeded"}}`
    const result = await send(`[${raw("1", "txpool_content")},${raw("2", "eth_call")},${raw("3", "trace_block")}]`, error)
    expect([result.text, result.credits, result.charged]).toEqual([error, "15", RpcHarness.nanoOf(15)])
  })

  it.each([["an empty array", "[]"], ["a malformed array", "[1,\"x\"]"]])("%s costs 5 credits per item", async (_name, reply) => {
    const result = await send(`[${raw("1", "txpool_content")},${raw("2", "eth_call")}]`, reply)
    expect([result.status, result.text, result.credits, result.charged]).toEqual([200, reply, "10", RpcHarness.nanoOf(10)])
  })

  it("an item the node left out of its answer costs 5 credits", async () => {
    const one = `{"jsonrpc":"2.0","id":1,"result":{}}`
    const result = await send(`[${raw("1", "txpool_content")},${raw("2", "txpool_content")}]`, `[${one}]`)
    expect([result.text, result.credits]).toEqual([`[${one}]`, "85"])
  })
})

describe("RPC proxy: a malformed request is a 400 that reaches no upstream and charges nothing", () => {
  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["an empty batch", []],
    ["a batch of 101", Array.from({ length: 101 }, (_, i) => call("eth_blockNumber", i))],
    ["a non-object item", [call("eth_blockNumber"), 42]],
    ["a missing jsonrpc", { id: 1, method: "eth_blockNumber" }],
    ["a jsonrpc other than 2.0", { jsonrpc: "1.0", id: 1, method: "eth_blockNumber" }],
    ["a non-string method", { jsonrpc: "2.0", id: 1, method: 5 }],
    ["a body that is not JSON", "{nope"],
    ["a scalar body", "\"eth_blockNumber\""],
    ["params that are a string", { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: "x" }]
  ]
  it.each(bad)("%s", async (_name, body) => {
    const account = await harness.account()
    const before = upstream.requests()
    const response = await account.fetch("ethereum-mainnet", body)
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: expect.stringMatching(/^Invalid JSON-RPC request/) })
    expect(upstream.requests()).toBe(before)
    expect(await account.charged()).toBe(0)
  })

  it("a batch of exactly 100 is forwarded", async () => {
    const account = await harness.account()
    const response = await account.fetch("ethereum-mainnet", Array.from({ length: 100 }, (_, i) => call("eth_blockNumber", i)))
    expect(response.status).toBe(200)
    expect(await response.json()).toHaveLength(100)
    expect(response.headers.get("x-service-rpc-credits")).toBe("2000")
  })

  it("an unknown network slug -> 400 unsupported RPC network", async () => {
    const response = await harness.fetch("dogecoin-mainnet", call("eth_blockNumber"))
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: "Unsupported RPC network: dogecoin-mainnet" })
  })

  it("a batch with several bad methods names every one of them and nothing else", async () => {
    const response = await harness.fetch("ethereum-mainnet", [
      call("eth_blockNumber", 1),
      call("eth_newFilter", 2),
      call("foo_bar", 3),
      call("eth_subscribe", 4),
      call("trace_filter", 5)
    ])
    expect(response.status).toBe(400)
    const { error } = await response.json() as { error: string }
    expect(JsonRpc.refusedMethods(error)).toEqual(["eth_newFilter", "foo_bar", "eth_subscribe"])
  })

  it("without credentials a valid call gets the 402 discovery body and reaches no upstream", async () => {
    const before = upstream.requests()
    const response = await harness.fetch("ethereum-mainnet", call("eth_blockNumber"), { authorization: null })
    expect(response.status).toBe(402)
    expect(await response.json()).toEqual(TestApp.operationDiscoveryBody("/api/v1/crypto/rpc/ethereum-mainnet"))
    expect(upstream.requests()).toBe(before)
  })
})

describe("RPC proxy: an upstream that cannot be reached is 502, one too slow is 504; nothing is charged", () => {
  let slow: RpcHarness.FakeUpstream
  let local: RpcHarness.Harness
  let dead: string

  beforeAll(async () => {
    // The timeout leaves a loaded machine's answers time to arrive; the slow upstream is far past it.
    slow = await RpcHarness.fakeUpstream(canned, { delayMs: 20_000 })
    dead = `http://127.0.0.1:${await FreePort.freePort()}`
    local = await RpcHarness.make({
      upstreams: { "ethereum-mainnet": [dead], "base-mainnet": [slow.url], "bsc-mainnet": [dead, `${upstream.url}/bsc-mainnet`] },
      timeoutMs: 2_000
    })
  })
  afterAll(async () => {
    await local?.dispose()
    await slow?.stop()
  })

  it("unreachable -> 502 StandardError", async () => {
    const response = await local.fetch("ethereum-mainnet", call("eth_blockNumber"))
    expect(response.status).toBe(502)
    expect(await response.json()).toEqual({ error: expect.any(String) })
    expect(await local.charged()).toBe(0)
  })

  it("too slow -> 504 StandardError", async () => {
    const response = await local.fetch("base-mainnet", call("eth_blockNumber"))
    expect(response.status).toBe(504)
    expect(await response.json()).toEqual({ error: expect.any(String) })
    expect(await local.charged()).toBe(0)
  })

  it("a refused connection fails over to the next upstream of the slug", async () => {
    const account = await local.account()
    const response = await account.fetch("bsc-mainnet", call("eth_blockNumber"))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ jsonrpc: "2.0", id: 1, result: "0x10" })
    expect(await account.charged()).toBe(RpcHarness.nanoOf(20))
  })

  it("a slug without a configured upstream -> 503, nothing charged", async () => {
    const response = await local.fetch("linea-mainnet", call("eth_blockNumber"))
    expect(response.status).toBe(503)
    expect(await local.charged()).toBe(0)
  })

  it("a key whose request failed upstream is not burnt: the retry runs again", async () => {
    const headers = { "idempotency-key": "retry-after-502" }
    expect((await local.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)).status).toBe(502)
    const again = await local.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)
    expect(again.status).toBe(502)
    expect(again.headers.get("idempotent-replayed")).toBeNull()
  })
})

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

const idempotencyBackends = [
  { name: "memory", layer: () => RpcHarness.idempotencyMemory },
  { name: "redis", layer: () => RpcHarness.idempotencyRedis(redis.url) }
]

for (const backend of idempotencyBackends) {
  describe(`RPC proxy: Idempotency-Key replays for 24 h, free, and reaches the upstream once (${backend.name})`, () => {
    let counted: RpcHarness.FakeUpstream
    let local: RpcHarness.Harness

    beforeAll(async () => {
      counted = await RpcHarness.fakeUpstream(canned, { delayMs: 200 })
      local = await RpcHarness.make({
        upstreams: { "ethereum-mainnet": [counted.url], "base-mainnet": [`${counted.url}/base-mainnet`] },
        idempotency: backend.layer()
      })
    })
    afterAll(async () => {
      await local?.dispose()
      await counted?.stop()
    })

    it("the same key and body -> the stored response with Idempotent-Replayed: true, no upstream call, no charge", async () => {
      const account = await local.account()
      const headers = { "idempotency-key": `replay_${backend.name}` }
      const body = [call("eth_blockNumber", 1), call("eth_chainId", 2)]
      const first = await account.fetch("ethereum-mainnet", body, headers)
      const firstBody = await first.text()
      const calls = counted.requests()
      const second = await account.fetch("ethereum-mainnet", body, headers)
      expect(second.status).toBe(first.status)
      expect(await second.text()).toBe(firstBody)
      expect(second.headers.get("idempotent-replayed")).toBe("true")
      expect(second.headers.get("x-service-rpc-credits")).toBe("40")
      expect(second.headers.get("content-type")).toMatch(/^application\/json/)
      expect(first.headers.get("idempotent-replayed")).toBeNull()
      expect(counted.requests()).toBe(calls)
      expect(await account.charged()).toBe(RpcHarness.nanoOf(40))
    })

    it("the same key with a different body -> 400", async () => {
      const account = await local.account()
      const headers = { "idempotency-key": `mismatch-${backend.name}` }
      expect((await account.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)).status).toBe(200)
      const other = await account.fetch("ethereum-mainnet", call("eth_chainId"), headers)
      expect(other.status).toBe(400)
      expect(await account.charged()).toBe(RpcHarness.nanoOf(20))
    })

    it("the same key and body on another network -> 400, not the first network's answer", async () => {
      const account = await local.account()
      const headers = { "idempotency-key": `network-${backend.name}` }
      expect((await account.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)).status).toBe(200)
      const calls = counted.requests()
      const other = await account.fetch("base-mainnet", call("eth_blockNumber"), headers)
      expect(other.status).toBe(400)
      expect(await other.json()).toEqual({ error: "Idempotency-Key was already used with a different request body" })
      expect(counted.requests()).toBe(calls)
      expect(await account.charged()).toBe(RpcHarness.nanoOf(20))
    })

    it("keys are per user: another account's same key is its own", async () => {
      const [a, b] = [await local.account(), await local.account()]
      const headers = { "idempotency-key": `shared-${backend.name}` }
      expect((await a.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)).status).toBe(200)
      const theirs = await b.fetch("ethereum-mainnet", call("eth_chainId"), headers)
      expect(theirs.status).toBe(200)
      expect(theirs.headers.get("idempotent-replayed")).toBeNull()
    })

    it("a request refused before the upstream (400) does not burn its key", async () => {
      const account = await local.account()
      const headers = { "idempotency-key": `not-burnt-${backend.name}` }
      expect((await account.fetch("ethereum-mainnet", call("eth_newFilter"), headers)).status).toBe(400)
      const valid = await account.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)
      expect(valid.status).toBe(200)
      expect(valid.headers.get("idempotent-replayed")).toBeNull()
    })

    it.each(["", "has space", "a".repeat(256), "dot.ted", "ümlaut"])("a malformed key %j -> 400", async (key) => {
      const response = await local.fetch("ethereum-mainnet", call("eth_blockNumber"), { "idempotency-key": key })
      expect(response.status).toBe(400)
    })

    it("100 concurrent requests with one key -> one upstream call and one charge; the others get 409", async () => {
      const account = await local.account()
      const headers = { "idempotency-key": `concurrent-${backend.name}` }
      const before = counted.requests()
      const responses = await Promise.all(
        Array.from({ length: 100 }, () => account.fetch("ethereum-mainnet", call("eth_blockNumber"), headers))
      )
      // A duplicate that arrives while the first runs gets 409; one that a slow machine delays
      // until the first is done gets the replay. Either way only one ran.
      const ran = responses.filter((response) => response.status === 200 && response.headers.get("idempotent-replayed") === null)
      const replayed = responses.filter((response) => response.headers.get("idempotent-replayed") === "true")
      const conflicts = responses.filter((response) => response.status === 409)
      expect(ran).toHaveLength(1)
      expect(conflicts.length + replayed.length).toBe(99)
      expect(conflicts.length).toBeGreaterThan(0)
      expect(counted.requests() - before).toBe(1)
      expect(await account.charged()).toBe(RpcHarness.nanoOf(20))
      const replay = await account.fetch("ethereum-mainnet", call("eth_blockNumber"), headers)
      expect(replay.headers.get("idempotent-replayed")).toBe("true")
      expect(counted.requests() - before).toBe(1)
    })
  })
}

describe("RPC proxy (property): a batch of allowlisted methods plus junk is forwarded whole and charged the table's sum, or refused whole naming exactly the junk", () => {
  const network = Networks.findNetwork("arbitrum-mainnet")!
  const allowed = [...RpcAllowlist.methods(network.family)]
  const multiplier = { S: 1, A: 2, L: 4 } as const
  const junk = fc.stringMatching(/^[a-z]{1,6}_[A-Za-z0-9]{1,10}$/).filter((name) =>
    RpcAllowlist.classify(network.family, name)._tag !== "Tiered"
  )

  it("holds for random batches", async () => {
    let local: RpcHarness.FakeUpstream | undefined
    let proxy: RpcHarness.Harness | undefined
    try {
      local = await RpcHarness.fakeUpstream({}, { unknown: { result: "0x1" } })
      proxy = await RpcHarness.make({ upstreams: { [network.slug]: [`${local.url}/${network.slug}`] } })
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.constantFrom(...allowed).map((entry) => ({ junk: false, method: entry[0], tier: entry[1] })),
              junk.map((method) => ({ junk: true, method, tier: "S" as const }))
            ),
            { minLength: 1, maxLength: 20 }
          ),
          async (items) => {
            const account = await proxy!.account()
            const before = local!.requests()
            const response = await account.fetch(network.slug, items.map((item, i) => call(item.method, i)))
            const junkNames = [...new Set(items.filter((item) => item.junk).map((item) => item.method))]
            if (junkNames.length > 0) {
              expect(response.status).toBe(400)
              const { error } = await response.json() as { error: string }
              expect(JsonRpc.refusedMethods(error)).toEqual(junkNames)
              expect(local!.requests()).toBe(before)
              expect(await account.charged()).toBe(0)
            } else {
              const credits = items.reduce((sum, item) => sum + network.baseCredits * multiplier[item.tier], 0)
              expect(response.status).toBe(200)
              expect(response.headers.get("x-service-rpc-credits")).toBe(String(credits))
              expect(local!.requests()).toBe(before + 1)
              expect(await account.charged()).toBe(RpcHarness.nanoOf(credits))
            }
          }
        ),
        { numRuns: 60 }
      )
    } finally {
      await proxy?.dispose()
      await local?.stop()
    }
  }, 60_000)
})
