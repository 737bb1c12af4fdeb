/**
 * What a hostile caller cannot do to the shipped server, on the memory store and on Redis: break an
 * account at the ledger's ceiling, credit an account that cannot exist, and the rest of issue #33's
 * findings, each reproduced the way the review found it.
 */
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Http from "node:http"
import * as Net from "node:net"
import { Agent, fetch as undiciFetch } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../http/test/support/SiwxHeader.ts"

/** `Money.MAX`: the largest balance an account may reach. */
const MAX_USD = "9007199.254740991"
const MAX_NANO = 9_007_199_254_740_991n

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const nanoOf = (usd: string): bigint => {
  const [whole, fraction = ""] = usd.split(".")
  return BigInt(whole!) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0"))
}

const usdOf = (nano: bigint): string => {
  const fraction = (nano % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/u, "")
  return `${nano / 1_000_000_000n}${fraction === "" ? "" : `.${fraction}`}`
}

const redis = await RedisServer.acquire()
const redisUrl = "url" in redis ? redis.url : undefined
afterAll(() => redis.stop())

type Store = "memory" | "redis"
const stores: ReadonlyArray<Store> = redisUrl === undefined ? ["memory"] : ["memory", "redis"]

/** What the slow upstreams take: a chat completion 2.5 s, an RPC call 3 s. */
const CHAT_MS = 2_500
const RPC_MS = 3_000

/** The prompt and completion tokens the chat upstream reports for every completion. */
const CHAT_USAGE = { prompt_tokens: 26_000, completion_tokens: 2 }

/**
 * A JSON-RPC node that answers every call after `RPC_MS` (anvil cannot be made slow), and counts
 * the single calls it answered in full by method (the proxy's own head polls are batches).
 */
const startSlowRpc = async () => {
  const answered = new Map<string, number>()
  const server = Http.createServer(async (request, response) => {
    const parts: Array<Buffer> = []
    for await (const part of request) parts.push(part as Buffer)
    const call = JSON.parse(Buffer.concat(parts).toString("utf8")) as { id: number; method?: string }
    await new Promise((resolve) => setTimeout(resolve, RPC_MS))
    if (call.method !== undefined) answered.set(call.method, (answered.get(call.method) ?? 0) + 1)
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: call.id, result: "0x10" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as Net.AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    answered: (method: string) => answered.get(method) ?? 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** One dev-mode server per store: its demo account is an operator's, so its ADMIN key grants credit. */
const servers = new Map<Store, ShippedServer.ShippedServer>()
let chatUpstream: FakeChatUpstream.FakeChatUpstream
let slowRpc: Awaited<ReturnType<typeof startSlowRpc>>

beforeAll(async () => {
  chatUpstream = await FakeChatUpstream.start(() => ({ pieces: ["slow", " answer"], delayMs: CHAT_MS / 2, usage: CHAT_USAGE }))
  slowRpc = await startSlowRpc()
  const config = {
    models: [ShippedServer.localRendererModel, { id: "slow-model", type: "text", upstreams: [{ baseUrl: chatUpstream.baseUrl }] }],
    prices: { chat: { "slow-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } },
    // base-mainnet's node refuses connections (nothing listens on the discard port).
    rpc: { upstreams: { "ethereum-mainnet": [slowRpc.url], "base-mainnet": ["http://127.0.0.1:9"] } }
  }
  for (const store of stores) {
    servers.set(store, await ShippedServer.start(store === "redis" ? { store, redisUrl: redisUrl!, config } : { config }))
  }
}, 180_000)

afterAll(async () => {
  await Promise.all([...servers.values()].map((server) => server.stop()))
  await chatUpstream?.close()
  await slowRpc?.close()
})

const serverOf = (store: Store) => servers.get(store)!

let references = 0
const grant = (server: ShippedServer.ShippedServer, accountId: string, amountUsd: string) =>
  fetch(`${server.api}/billing/credits`, {
    method: "POST",
    headers: { ...bearer(server.credentials!.adminKey), "content-type": "application/json" },
    body: JSON.stringify({ accountId, amountUsd, reference: `hostile-${Date.now()}-${references++}` })
  })

const image = (server: ShippedServer.ShippedServer, key: string) =>
  fetch(`${server.api}/image/generate`, {
    method: "POST",
    headers: { ...bearer(key), "content-type": "application/json" },
    body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
  })

interface UsageEntry {
  readonly timestamp: string
  readonly sku: string
  readonly unit: number
  readonly amount: number
  readonly inferenceDetails: { readonly promptTokens?: number; readonly completionTokens?: number }
}

/** The account's usage entries of `sku` recorded at or after `since`. */
const usageSince = async (server: ShippedServer.ShippedServer, sku: string, since: number): Promise<Array<UsageEntry>> => {
  const response = await fetch(`${server.api}/billing/usage-history?limit=50`, { headers: bearer(server.credentials!.adminKey) })
  const { data } = await response.json() as { data: Array<UsageEntry> }
  return data.filter((entry) => entry.sku === sku && Date.parse(entry.timestamp) >= since)
}

const hangUpAfter = (ms: number, request: Promise<Response>) =>
  request.then((response) => `answered ${response.status}`, (error: Error) => error.name)

describe.each(stores)(
  "Finding 1 (%s): a call the client abandons once the backend was called runs to its end and is charged what it used",
  (store) => {
    it(
      "a non-streamed chat completion of a 20,000-word prompt dropped at 1 s on a 2.5 s upstream is charged its prompt and completion tokens",
      async () => {
        const server = serverOf(store)
        const since = Date.now() - 1
        const prompt = Array.from({ length: 20_000 }, (_, i) => `word${i % 100}`).join(" ")
        const outcome = await hangUpAfter(
          1_000,
          fetch(`${server.api}/chat/completions`, {
            method: "POST",
            headers: { ...bearer(server.credentials!.inferenceKey), "content-type": "application/json" },
            body: JSON.stringify({ model: "slow-model", messages: [{ role: "user", content: prompt }] }),
            signal: AbortSignal.timeout(1_000)
          })
        )
        expect(outcome).toBe("TimeoutError")
        await new Promise((resolve) => setTimeout(resolve, CHAT_MS + 1_000))
        const entries = await usageSince(server, "chat:slow-model", since)
        // 26,000 prompt tokens at 0.5 USD and 2 completion tokens at 1.5 USD per million.
        expect(entries).toMatchObject([{ amount: 0.013003, inferenceDetails: { promptTokens: 26_000, completionTokens: 2 } }])
      },
      30_000
    )

    it("an RPC call dropped at 1 s on a 3 s upstream is forwarded to its end and charged its credits", async () => {
      const server = serverOf(store)
      const since = Date.now() - 1
      const before = slowRpc.answered("eth_blockNumber")
      const outcome = await hangUpAfter(
        1_000,
        fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
          method: "POST",
          headers: { ...bearer(server.credentials!.inferenceKey), "content-type": "application/json" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_blockNumber", params: [] }),
          signal: AbortSignal.timeout(1_000)
        })
      )
      expect(outcome).toBe("TimeoutError")
      await new Promise((resolve) => setTimeout(resolve, RPC_MS + 1_000))
      expect(slowRpc.answered("eth_blockNumber")).toBe(before + 1)
      const entries = await usageSince(server, "rpc:ethereum-mainnet", since)
      expect(entries).toHaveLength(1)
      expect(entries[0]!.unit).toBeGreaterThan(0)
      expect(entries[0]!.amount).toBeGreaterThan(0)
    }, 30_000)

    it(
      "12 RPC calls of one account dropped at 1 s on a 3 s upstream are each charged, though their settlements go together after their answers",
      async () => {
        const server = serverOf(store)
        const since = Date.now() - 1
        const before = slowRpc.answered("eth_getBalance")
        // Twelve different reads: identical reads in flight would share one upstream call.
        const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) =>
          hangUpAfter(
            1_000,
            fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
              method: "POST",
              headers: { ...bearer(server.credentials!.inferenceKey), "content-type": "application/json" },
              body: JSON.stringify({
                jsonrpc: "2.0",
                id: 100 + i,
                method: "eth_getBalance",
                params: [`0x${String(i + 1).padStart(40, "0")}`, "latest"]
              }),
              signal: AbortSignal.timeout(1_000)
            })
          )))
        expect(outcomes.every((outcome) => outcome === "TimeoutError")).toBe(true)
        await new Promise((resolve) => setTimeout(resolve, RPC_MS + 1_500))
        expect(slowRpc.answered("eth_getBalance")).toBe(before + 12)
        const entries = await usageSince(server, "rpc:ethereum-mainnet", since)
        expect(entries).toHaveLength(12)
      },
      30_000
    )
  }
)

const GUARD_MESSAGE = "Too many failed attempts (over 20). Please wait 30s."

describe.each(stores)(
  "Finding 3 (%s): a request with valid credentials counts against them whatever step fails, never against its address",
  (store) => {
    it(
      "21 failures of a valid key from one address (malformed JSON-RPC, an unknown method, a bad chat body, a 404) block the key, and every anonymous caller at that address is still served",
      async () => {
        const server = serverOf(store)
        const agent = new Agent({ localAddress: store === "memory" ? "127.0.0.6" : "127.0.0.7" })
        try {
          const minted = await fetch(`${server.api}/api_keys`, {
            method: "POST",
            headers: { ...bearer(server.credentials!.adminKey), "content-type": "application/json" },
            body: JSON.stringify({ apiKeyType: "INFERENCE", description: "finding 3" })
          })
          expect(minted.status).toBe(201)
          const { apiKey } = await minted.json() as { apiKey: string }
          const send = (path: string, body?: string) =>
            undiciFetch(`${server.api}${path}`, {
              method: body === undefined ? "GET" : "POST",
              headers: { ...bearer(apiKey), "content-type": "application/json" },
              ...(body === undefined ? {} : { body }),
              dispatcher: agent
            })
          const failures = [
            () => send("/crypto/rpc/ethereum-mainnet", "{\"jsonrpc\": \"2.0\", \"id\": 1,"),
            () => send("/crypto/rpc/ethereum-mainnet", JSON.stringify({ jsonrpc: "2.0", id: 1, method: "no_such_method", params: [] })),
            () => send("/chat/completions", JSON.stringify({ model: "slow-model", messages: "not a list" })),
            () => send("/no/such/route")
          ]
          for (let i = 0; i < 21; i++) {
            const response = await failures[i % failures.length]!()
            expect([400, 404]).toContain(response.status)
            await response.arrayBuffer()
          }
          const blocked = await send(
            "/crypto/rpc/ethereum-mainnet",
            JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] })
          )
          expect(blocked.status).toBe(429)
          expect(await blocked.json()).toEqual({ error: GUARD_MESSAGE })
          const networks = await undiciFetch(`${server.api}/crypto/rpc/networks`, { dispatcher: agent })
          expect(networks.status).toBe(200)
          await networks.arrayBuffer()
          // A well-formed call: an anonymous small body is checked before it is priced for its 402.
          const discovery = await undiciFetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
            dispatcher: agent
          })
          expect(discovery.status).toBe(402)
          expect(await discovery.json()).toMatchObject({ x402Version: 2 })
        } finally {
          await agent.close()
        }
      },
      30_000
    )
  }
)

/** A `SIGN-IN-WITH-X` header of a fresh wallet for `server`. */
const freshWalletHeader = (server: ShippedServer.ShippedServer) => SiwxHeader.freshWallet(`http://localhost:${server.port}`)

/** The Redis keys naming a wallet account that never expire, read in one script. */
const lastingWalletKeys = (): Array<string> =>
  ChildProcess.execFileSync("redis-cli", [
    "-u",
    redisUrl!,
    "eval",
    "local lasting = {} for _, key in ipairs(redis.call('KEYS', ARGV[1])) do if redis.call('PTTL', key) == -1 then lasting[#lasting + 1] = key end end return lasting",
    "0",
    "*wallet:*"
  ], { encoding: "utf8" }).split("\n").filter((key) => key.length > 0)

describe.each(stores)("Finding 4 (%s): a wallet that never held credit leaves nothing that lasts", (store) => {
  it("200 fresh wallets from one address each get the wallet 402; on Redis every key they left expires", async () => {
    const server = serverOf(store)
    const before = store === "redis" ? lastingWalletKeys() : []
    for (let i = 0; i < 200; i++) {
      const { header } = await freshWalletHeader(server)
      const paid = await fetch(`${server.api}/image/generate`, {
        method: "POST",
        headers: { "sign-in-with-x": header, "content-type": "application/json" },
        body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
      })
      expect(paid.status).toBe(402)
      expect(await paid.json()).toMatchObject({ code: "PAYMENT_REQUIRED", reason: "insufficient_balance" })
    }
    if (store === "redis") expect(lastingWalletKeys().filter((key) => !before.includes(key))).toEqual([])
  }, 60_000)

  it(
    "a wallet granted credit before it signed in can pay once it signs in, and its balance is what was granted less the call",
    async () => {
      const server = serverOf(store)
      const { address, header } = await freshWalletHeader(server)
      const granted = await grant(server, `wallet:evm:${address.toLowerCase()}`, "1")
      expect(granted.status).toBe(200)
      const paid = await fetch(`${server.api}/image/generate`, {
        method: "POST",
        headers: { "sign-in-with-x": header, "content-type": "application/json" },
        body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
      })
      expect(paid.status).toBe(200)
      expect(paid.headers.get("x-balance-remaining")).toBe("0.999")
      await paid.arrayBuffer()
    },
    30_000
  )
})

/** JSON text of `levels` arrays nested in one another. */
const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`

const DEPTH_REFUSAL = { error: "The JSON body is nested deeper than 64 levels" }

describe.each(stores)("Finding 6 (%s): a JSON body nested deeper than 64 levels is a 400 naming the limit, on every route", (store) => {
  const post = (path: string, body: string) =>
    fetch(`${serverOf(store).api}${path}`, {
      method: "POST",
      headers: { ...bearer(serverOf(store).credentials!.inferenceKey), "content-type": "application/json" },
      body
    })

  it.each([
    [
      "/image/generate",
      (extra: string) => `{"model":"local-renderer","prompt":"a lighthouse","width":32,"height":32,"format":"png","extra":${extra}}`
    ],
    ["/chat/completions", (extra: string) => `{"model":"slow-model","messages":[{"role":"user","content":"hi"}],"extra":${extra}}`],
    ["/crypto/rpc/ethereum-mainnet", (extra: string) => `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":${extra}}`],
    ["/embeddings", (extra: string) => `{"model":"slow-model","input":"hi","extra":${extra}}`]
  ])("POST %s with 5,000 levels in a field: 400 naming the limit", async (path, body) => {
    const response = await post(path, body(nested(5_000)))
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual(DEPTH_REFUSAL)
  })

  it("an image request nested 60 levels deep in an unknown field is served", async () => {
    const response = await post(
      "/image/generate",
      `{"model":"local-renderer","prompt":"a lighthouse","width":32,"height":32,"format":"png","extra":${nested(60)}}`
    )
    expect(response.status).toBe(200)
    await response.arrayBuffer()
  })
})

describe.each(stores)(
  "Finding 7 (%s): an upstream's failure reaches the caller as a stable message, and its cause only the log",
  (store) => {
    it("an RPC node that refuses the connection: 502 with the same words every time, ECONNREFUSED in the log only", async () => {
      const server = serverOf(store)
      const response = await fetch(`${server.api}/crypto/rpc/base-mainnet`, {
        method: "POST",
        headers: { ...bearer(server.credentials!.inferenceKey), "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] })
      })
      expect(response.status).toBe(502)
      expect(await response.json()).toEqual({ error: "The base-mainnet upstream could not be reached" })
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(server.output()).toContain("ECONNREFUSED")
    })
  }
)

describe.skipIf(redisUrl === undefined)(
  "Finding 8 (redis, production): /metrics in admin mode answers only the ADMIN keys of operator accounts",
  () => {
    let server: ShippedServer.ShippedServer
    let operatorKey = ""

    beforeAll(async () => {
      // acct_e2e (provisioned with the CLI) is a customer; acct_operator runs the deployment.
      server = await ShippedServer.start({
        store: "redis",
        redisUrl: redisUrl!,
        signingKey: true,
        config: { models: [ShippedServer.localRendererModel] },
        env: { TOLLGATE_METRICS: "admin", TOLLGATE_OPERATOR_ACCOUNTS: "acct_operator" }
      })
      await server.cli(["accounts", "create", "--id", "acct_operator"])
      operatorKey = String((await server.cli(["keys", "mint", "--account", "acct_operator", "--type", "ADMIN"]))["apiKey"])
    }, 120_000)

    afterAll(() => server?.stop())

    it("a customer's ADMIN key gets 403 and no figures; the operator's ADMIN key gets the metrics", async () => {
      const customer = await fetch(`${server.origin}/metrics`, { headers: bearer(server.credentials!.adminKey) })
      expect(customer.status).toBe(403)
      expect(await customer.json()).toEqual({ error: "Only operator accounts may read the metrics" })
      const operator = await fetch(`${server.origin}/metrics`, { headers: bearer(operatorKey) })
      expect(operator.status).toBe(200)
      expect(await operator.text()).toContain("# TYPE tollgate_http_requests_total counter")
    })
  }
)

describe.each(stores)("Query parameters (%s): numbers are decimal digits and dates are days that exist", (store) => {
  const history = (query: string) =>
    fetch(`${serverOf(store).api}/billing/usage-history?${query}`, { headers: bearer(serverOf(store).credentials!.adminKey) })

  it.each([
    ["limit=0x10", "limit"],
    ["limit=1e1", "limit"],
    ["limit=16.0", "limit"],
    ["startDate=2026-02-30", "startDate"],
    ["endDate=2026-13-01", "endDate"],
    ["startDate=2025-02-29T10:00:00Z", "startDate"]
  ])("%s is a 400 naming %s", async (query, field) => {
    const response = await history(query)
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({
      error: expect.stringMatching(new RegExp(`^Invalid query parameters: ${field}: `)),
      details: { [field]: { _errors: [expect.any(String)] } }
    })
  })

  it.each(["limit=16", "startDate=2028-02-29", "startDate=2026-02-28T10:00:00Z&endDate=2026-03-01"])("%s is served", async (query) => {
    const response = await history(query)
    expect(response.status).toBe(200)
    await response.arrayBuffer()
  })
})

/** An upload whose body arrives `chunkBytes` at a time every `everyMs`, over a raw socket. */
interface SlowUpload {
  /** The status of the answer and how long after the headers it came; `undefined` when the connection closed without one. */
  readonly answered: Promise<{ readonly status: number | undefined; readonly ms: number; readonly head: string }>
  readonly close: () => void
}

const BOUNDARY = "hostile-boundary"

const slowUpload = (server: ShippedServer.ShippedServer, options: {
  readonly authorization: string
  readonly declaredBytes: number
  readonly chunkBytes: number
  readonly everyMs: number
  readonly localAddress?: string
}): SlowUpload => {
  const socket = Net.connect({ host: "127.0.0.1", port: server.port, localAddress: options.localAddress })
  const started = Date.now()
  let timer: ReturnType<typeof setInterval> | undefined
  let sent = 0
  const opening = `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="slow.txt"\r\ncontent-type: text/plain\r\n\r\n`
  socket.on("connect", () => {
    socket.write(
      `POST /api/v1/augment/text-parser HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${options.authorization}\r\n` +
        `content-type: multipart/form-data; boundary=${BOUNDARY}\r\ncontent-length: ${options.declaredBytes}\r\n\r\n${opening}`
    )
    sent = opening.length
    timer = setInterval(() => {
      if (sent + options.chunkBytes >= options.declaredBytes || socket.destroyed) return
      socket.write(Buffer.alloc(options.chunkBytes, "a"), () => {})
      sent += options.chunkBytes
    }, options.everyMs)
  })
  socket.on("error", () => {})
  let head = ""
  const answered = new Promise<{ status: number | undefined; ms: number; head: string }>((resolve) => {
    socket.on("data", (data: Buffer) => {
      head += data.toString("latin1")
      const status = /^HTTP\/1\.1 (\d{3})/u.exec(head)
      if (status !== null && head.includes("\r\n\r\n")) resolve({ status: Number(status[1]), ms: Date.now() - started, head })
    })
    socket.on("close", () => {
      clearInterval(timer)
      resolve({ status: undefined, ms: Date.now() - started, head })
    })
  })
  return {
    answered,
    close: () => {
      clearInterval(timer)
      socket.destroy()
    }
  }
}

const MiB = 1024 * 1024

const textParser = (server: ShippedServer.ShippedServer, key: string) => {
  const form = new FormData()
  form.append("file", new Blob(["a short document"], { type: "text/plain" }), "short.txt")
  return fetch(`${server.api}/augment/text-parser`, { method: "POST", headers: bearer(key), body: form })
}

describe.each(stores)(
  "Finding 2 (%s): nobody can hold the upload memory without valid credentials, sending slowly, or beyond its share",
  (store) => {
    it(
      "50 slow 25 MB uploads with a key that does not verify are refused at once (401, or 429 once the address is blocked), and hold nothing: a valid key's upload gets 200 meanwhile",
      async () => {
        const server = serverOf(store)
        const uploads = Array.from({ length: 50 }, () =>
          slowUpload(server, {
            authorization: "Bearer not.a.key",
            declaredBytes: 25_000_000,
            chunkBytes: 1024,
            everyMs: 1000,
            localAddress: "127.0.0.5"
          }))
        try {
          const answers = await Promise.all(uploads.map((upload) => upload.answered))
          for (const answer of answers) {
            expect([401, 429]).toContain(answer.status)
            expect(answer.ms).toBeLessThan(3_000)
          }
          const honest = await textParser(server, server.credentials!.inferenceKey)
          expect(honest.status).toBe(200)
          expect(await honest.json()).toMatchObject({ text: expect.stringContaining("a short document") })
        } finally {
          for (const upload of uploads) upload.close()
        }
      },
      30_000
    )

    it(
      "a valid key's upload sending 1 KB a second is cut off with a 408 within two 5 s windows, and the connection is closed",
      async () => {
        const server = serverOf(store)
        const upload = slowUpload(server, {
          authorization: `Bearer ${server.credentials!.inferenceKey}`,
          declaredBytes: 25_000_000,
          chunkBytes: 1024,
          everyMs: 1000
        })
        try {
          const answer = await upload.answered
          expect(answer.status).toBe(408)
          expect(answer.ms).toBeLessThan(11_000)
          expect(answer.head.toLowerCase()).toContain("connection: close")
        } finally {
          upload.close()
        }
      },
      30_000
    )

    it(
      "one key's uploads hold at most half the budget: its third 25 MiB upload waits and gets 503, another key's upload gets 200 meanwhile",
      async () => {
        const server = serverOf(store)
        const { adminKey, inferenceKey } = server.credentials!
        // Fast enough for the body deadline (256 KiB/s), slow enough to last the test (about 100 s for 25 MiB).
        const uploads = Array.from(
          { length: 2 },
          () =>
            slowUpload(server, { authorization: `Bearer ${inferenceKey}`, declaredBytes: 25 * MiB, chunkBytes: 64 * 1024, everyMs: 250 })
        )
        try {
          await new Promise((resolve) => setTimeout(resolve, 500))
          const started = Date.now()
          const [third, other] = await Promise.all([textParser(server, inferenceKey), textParser(server, adminKey)])
          expect(other.status).toBe(200)
          expect(third.status).toBe(503)
          expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0)
          expect(await third.json()).toEqual({
            error: "Your uploads in progress hold your share of the server's upload memory; retry when one ends"
          })
          expect(Date.now() - started).toBeGreaterThanOrEqual(4_500)
        } finally {
          for (const upload of uploads) upload.close()
        }
      },
      30_000
    )
  }
)

describe.each(stores)(
  "Finding 5 (%s): a credit past the ledger's ceiling is refused before anything is written, and credits go only to accounts that can exist",
  (store) => {
    it("a grant reaching exactly the maximum is answered 200; one nano-USD more is a 400 naming the limit; the account still pays and reads its balance", async () => {
      const server = serverOf(store)
      const { accountId, inferenceKey } = server.credentials!
      const first = await grant(server, accountId, "0.000000001")
      expect(first.status).toBe(200)
      const before = nanoOf((await first.json() as { balanceUsd: string }).balanceUsd)

      const over = await grant(server, accountId, usdOf(MAX_NANO - before + 1n))
      expect(over.status).toBe(400)
      expect(await over.json()).toEqual({ error: `The balance would exceed the maximum of ${MAX_USD} USD` })

      const exact = await grant(server, accountId, usdOf(MAX_NANO - before))
      expect(exact.status).toBe(200)
      expect(await exact.json()).toMatchObject({ balanceUsd: MAX_USD })

      const oneMore = await grant(server, accountId, "0.000000001")
      expect(oneMore.status).toBe(400)
      expect(await oneMore.json()).toEqual({ error: `The balance would exceed the maximum of ${MAX_USD} USD` })

      const paid = await image(server, inferenceKey)
      expect(paid.status).toBe(200)
      expect(paid.headers.get("x-service-balance-usd")).toBe(MAX_USD)
      await paid.arrayBuffer()
      const after = await image(server, inferenceKey)
      expect(after.status).toBe(200)
      expect(nanoOf(after.headers.get("x-service-balance-usd")!)).toBeLessThan(MAX_NANO)
      await after.arrayBuffer()
    })

    it.each([
      ["a path", "../acct_demo"],
      ["a NUL", "acct\u0000demo"],
      ["a CRLF", "acct\r\ndemo"],
      ["a space", "acct demo"],
      ["a malformed wallet id", "wallet:evm:0xnot-an-address"],
      ["an account that does not exist", "acct_nobody_has_this"]
    ])("an account id with %s is refused with a 400 naming accountId", async (_, accountId) => {
      const response = await grant(serverOf(store), accountId, "1")
      expect(response.status).toBe(400)
      expect(await response.json()).toMatchObject({ error: expect.any(String), details: { accountId: expect.any(Object) } })
    })

    it("a well-formed wallet's account can be granted credit before it ever signed in", async () => {
      const response = await grant(serverOf(store), "wallet:evm:0x00000000000000000000000000000000000000aa", "1")
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ balanceUsd: "1" })
    })
  }
)
