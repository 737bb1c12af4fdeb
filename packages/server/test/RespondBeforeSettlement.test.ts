/**
 * A paid call's response goes before its settlement is acknowledged (issue #39), through the
 * shipped server on Redis with admissions and settlements grouped (`redis.admissionGroupMs`,
 * `redis.settlementGroupMs`): what the response says is exact without waiting for the settlement,
 * a replay of its `Idempotency-Key` racing it never runs the call twice, and a thousand calls at
 * once leave the exact balance.
 */
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type * as Net from "node:net"
import { createClient } from "redis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../http/test/support/SiwxHeader.ts"

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

// A throwaway Redis: the test pauses its writes.
const redis = await RedisServer.start()
afterAll(() => redis.stop())
const client = createClient({ url: redis.url })
await client.connect()
afterAll(() => client.quit())

/** The chat call's usage: 1,000 prompt and 10 completion tokens at 0.5 and 1.5 USD per million. */
const USAGE = { prompt_tokens: 1_000, completion_tokens: 10 }
const CHARGE_NANO = 1_000 * 500 + 10 * 1_500
const UPSTREAM_MS = 600

/**
 * A JSON-RPC node that answers `eth_blockNumber` after `UPSTREAM_MS`, counting the `eth_blockNumber`
 * calls it got (the proxy's own head polls are batches, and not counted).
 */
const startSlowRpc = async () => {
  let received = 0
  const server = Http.createServer(async (request, response) => {
    const parts: Array<Buffer> = []
    for await (const part of request) parts.push(part as Buffer)
    const call = JSON.parse(Buffer.concat(parts).toString("utf8")) as { id: number; method?: string }
    if (call.method === "eth_blockNumber") received++
    await new Promise((resolve) => setTimeout(resolve, UPSTREAM_MS))
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: call.id, result: "0x10" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as Net.AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received: () => received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** An RPC call's price: 20 units at 625 nano. */
const RPC_PRICE_NANO = 12_500

let upstream: FakeChatUpstream.FakeChatUpstream
let rpc: Awaited<ReturnType<typeof startSlowRpc>>
beforeAll(async () => {
  upstream = await FakeChatUpstream.start(() => ({ pieces: ["fine"], delayMs: UPSTREAM_MS, usage: USAGE }))
  rpc = await startSlowRpc()
})
afterAll(async () => {
  await upstream?.close()
  await rpc?.close()
})

const config = () => ({
  models: [ShippedServer.localRendererModel, { id: "house-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
  prices: { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } },
  rpc: { upstreams: { "ethereum-mainnet": [rpc.url] } },
  rateLimits: { accounts: { acct_many: { image: { requests: 5_000 } } } },
  redis: { admissionGroupMs: 1, settlementGroupMs: 2 }
})

const chat = (api: string, headers: Record<string, string>) =>
  fetch(`${api}/chat/completions`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ model: "house-model", messages: [{ role: "user", content: "hi" }] })
  })

const blockNumber = (api: string, headers: Record<string, string>) =>
  fetch(`${api}/crypto/rpc/ethereum-mainnet`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
  })

/** The account's settled USD, held USD and open holds, in nano. */
const ledgerOf = async (accountId: string) =>
  (await client.hmGet(`tg:cl:{${accountId}}:a`, ["usd", "held", "open"])).map((value) => Number(value ?? 0))

/** Waits until the account has no open hold (its settlements are all in). */
const settledLedger = async (accountId: string) => {
  const deadline = Date.now() + 10_000
  let ledger = await ledgerOf(accountId)
  while (ledger[2] !== 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    ledger = await ledgerOf(accountId)
  }
  return ledger
}

/** A `SIGN-IN-WITH-X` header of a fresh wallet for `server`. */
const freshWallet = (server: ShippedServer.ShippedServer) => SiwxHeader.freshWallet(`http://localhost:${server.port}`)

describe("A wallet's response goes before its settlement: X-Balance-Remaining is the balance at admission less the charge, exactly", () => {
  let server: ShippedServer.ShippedServer
  beforeAll(async () => {
    server = await ShippedServer.start({ store: "redis", redisUrl: redis.url, config: config() })
  }, 120_000)
  afterAll(() => server?.stop())

  it(
    "with Redis refusing writes until well after the answer, the answer comes with the hold still open and X-Balance-Remaining 1 - 0.000515; the settlement then leaves that balance",
    async () => {
      const { accountId, header } = await freshWallet(server)
      const granted = await fetch(`${server.api}/billing/credits`, {
        method: "POST",
        headers: { ...bearer(server.credentials!.adminKey), "content-type": "application/json" },
        body: JSON.stringify({ accountId, amountUsd: "1", reference: `respond-first-${Date.now()}` })
      })
      expect(granted.status).toBe(200)
      const answer = chat(server.api, { "sign-in-with-x": header })
      // Admitted by now (the upstream takes 600 ms); from here Redis runs no write for 6 s, so an
      // answer within 5 s came before its settlement even on a loaded machine.
      await new Promise((resolve) => setTimeout(resolve, UPSTREAM_MS / 2))
      const pausedAt = Date.now()
      await client.sendCommand(["CLIENT", "PAUSE", "6000", "WRITE"])
      const response = await answer
      expect(response.status).toBe(200)
      expect(Date.now() - pausedAt).toBeLessThan(5_000)
      const [usd, held, open] = await ledgerOf(accountId)
      expect({ usd, open }).toEqual({ usd: 1_000_000_000, open: 1 })
      expect(held).toBeGreaterThanOrEqual(CHARGE_NANO)
      expect(response.headers.get("x-balance-remaining")).toBe("0.999485")
      await response.json()
      expect(await settledLedger(accountId)).toEqual([1_000_000_000 - CHARGE_NANO, 0, 0])
    },
    30_000
  )
})

describe("Two servers sharing Redis, admissions and settlements grouped: a replay racing the first call never runs it twice, and 1,000 calls at once leave the exact balance", () => {
  let servers: ReadonlyArray<ShippedServer.ShippedServer> = []
  let key = ""

  beforeAll(async () => {
    const signingKey = ShippedServer.generateSigningKey()
    const [first, second] = await Promise.all([
      ShippedServer.start({ store: "redis", redisUrl: redis.url, signingKey, config: config() }),
      ShippedServer.start({ store: "redis", redisUrl: redis.url, signingKey, config: config(), provision: false })
    ])
    servers = [first, { ...second, credentials: first.credentials }]
    await first.cli(["accounts", "create", "--id", "acct_many"])
    const minted = await first.cli(["keys", "mint", "--account", "acct_many", "--type", "INFERENCE"])
    await first.cli(["credits", "grant", "--account", "acct_many", "--usd", "10", "--reference", "many"])
    key = String(minted["apiKey"])
  }, 180_000)

  afterAll(() => Promise.all(servers.map((server) => server.stop())))

  it(
    "replays of one Idempotency-Key sent to the other server until one is replayed: each is the in-progress 409 or the first answer replayed; the upstream ran once, the account paid once",
    async () => {
      const before = await ledgerOf("acct_many")
      const calls = rpc.received()
      const headers = { ...bearer(key), "idempotency-key": `race-${Date.now()}` }
      const first = blockNumber(servers[0]!.api, headers).then(async (response) => ({
        status: response.status,
        body: await response.text()
      }))
      const replays: Array<{ status: number; replayed: string | null; body: string }> = []
      // The first call claims the key well before the first replay, which goes to the other server.
      await new Promise((resolve) => setTimeout(resolve, 100))
      for (;;) {
        const response = await blockNumber(servers[1]!.api, headers)
        replays.push({ status: response.status, replayed: response.headers.get("idempotent-replayed"), body: await response.text() })
        if (response.status !== 409) break
      }
      const original = await first
      expect(original.status).toBe(200)
      const inProgress = replays.filter((replay) => replay.status === 409)
      expect(inProgress.length).toBeGreaterThan(0)
      expect(new Set(inProgress.map((replay) => replay.body))).toEqual(
        new Set([JSON.stringify({ error: "A request with this Idempotency-Key is still in progress" })])
      )
      expect(replays.at(-1)).toEqual({ status: 200, replayed: "true", body: original.body })
      expect(rpc.received() - calls).toBe(1)
      const after = await settledLedger("acct_many")
      expect(before[0]! - after[0]!).toBe(RPC_PRICE_NANO)
    },
    30_000
  )

  it(
    "a settlement Redis does not answer within the server's 2 s is logged at error level after the answer; Redis runs it later and the give-back behind it finds the hold captured: charged once, no hold left",
    async () => {
      const [before] = await settledLedger("acct_many")
      const answer = blockNumber(servers[0]!.api, bearer(key))
      await new Promise((resolve) => setTimeout(resolve, UPSTREAM_MS / 2))
      await client.sendCommand(["CLIENT", "PAUSE", "4000", "WRITE"])
      const response = await answer
      expect(response.status).toBe(200)
      await response.json()
      const deadline = Date.now() + 10_000
      while (!servers[0]!.output().includes("settling a call after its response failed") && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(servers[0]!.output()).toContain("settling a call after its response failed")
      expect(await settledLedger("acct_many")).toEqual([before! - RPC_PRICE_NANO, 0, 0])
    },
    30_000
  )

  it(
    "1,000 concurrent image calls over both servers: 1,000 x 200, then exactly 10 - 1,000 x 0.001 = 9 USD left and no hold open, the settlements grouped",
    async () => {
      const [before] = await ledgerOf("acct_many")
      await client.sendCommand(["CONFIG", "RESETSTAT"])
      const statuses = await Promise.all(Array.from({ length: 1_000 }, (_, i) =>
        fetch(`${servers[i % 2]!.api}/image/generate`, {
          method: "POST",
          headers: { ...bearer(key), "content-type": "application/json" },
          body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
        }).then(async (response) => {
          await response.arrayBuffer()
          return response.status
        })))
      expect(statuses.filter((status) => status !== 200)).toEqual([])
      expect(await settledLedger("acct_many")).toEqual([before! - 1_000 * 1_000_000, 0, 0])
      // One script call per admission, and the settlements went many to a call (78 calls for the
      // 1,000 in one run): fewer than 1,500 script calls in all.
      const scriptCalls = (await RedisServer.scriptCalls(redis.url)).total
      expect(scriptCalls).toBeLessThan(1_500)
    },
    120_000
  )
})

describe("A server killed between a call's response and its settlement: the hold expires and the call is not charged", () => {
  it(
    "answered while Redis refuses writes, then SIGKILL: the hold stays open until its 12 s are up, then the next ledger step releases it and the balance is whole",
    async () => {
      const server = await ShippedServer.start({
        store: "redis",
        redisUrl: redis.url,
        signingKey: true,
        accountId: "acct_crash",
        config: config(),
        env: { TOLLGATE_HOLD_TTL_SECONDS: "12" }
      })
      try {
        await server.cli(["credits", "grant", "--account", "acct_crash", "--usd", "1", "--reference", "crash-funds"])
        const [before] = await settledLedger("acct_crash")
        const answer = blockNumber(server.api, bearer(server.credentials!.inferenceKey))
        await new Promise((resolve) => setTimeout(resolve, UPSTREAM_MS / 2))
        await client.sendCommand(["CLIENT", "PAUSE", "3000", "WRITE"])
        const response = await answer
        expect(response.status).toBe(200)
        await response.arrayBuffer()
        // A crash: SIGKILL, nothing runs after it (the server's directory stays, for the CLI).
        process.kill(server.pid, "SIGKILL")
        await server.exited
        await client.sendCommand(["CLIENT", "UNPAUSE"])
        expect(await ledgerOf("acct_crash")).toEqual([before, RPC_PRICE_NANO, 1])
        await new Promise((resolve) => setTimeout(resolve, 12_500))
        // Any step of the account's ledger releases its expired holds first: here a grant.
        await server.cli(["credits", "grant", "--account", "acct_crash", "--usd", "0.5", "--reference", "crash-after"])
        expect(await ledgerOf("acct_crash")).toEqual([before! + 500_000_000, 0, 0])
      } finally {
        await server.stop()
      }
    },
    120_000
  )
})
