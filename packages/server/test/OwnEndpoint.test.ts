import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"
import * as Tollgate from "../src/Tollgate.ts"

/** A Standard Schema validator written by hand: what any library's (zod, valibot) looks like to tollgate. */
const fields = <K extends string>(...names: ReadonlyArray<K>) => ({
  "~standard": {
    validate: (value: unknown) => {
      const record = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>
      const missing = names.filter((name) => record[name] === undefined)
      return missing.length === 0
        ? { value: record as Record<K, string | number> }
        : { issues: missing.map((name) => ({ message: "Required", path: [{ key: name }] })) }
    }
  }
})

const endpoints = [
  Tollgate.endpoint({
    method: "GET",
    path: "/v1/quote",
    sku: "quote",
    price: { usd: "0.001" },
    body: fields("symbol"),
    handle: async ({ body, caller }) => ({ json: { symbol: body.symbol, account: caller.accountId } })
  }),
  Tollgate.endpoint({
    path: "/v1/priced",
    sku: "priced",
    price: { quote: (body: Record<"worst" | "actual", string | number>) => String(body.worst) },
    body: fields("worst", "actual"),
    handle: async ({ body }) => ({ json: {}, usage: { usd: String(body.actual), notes: "by quote" } })
  }),
  Tollgate.endpoint({
    path: "/v1/tokens",
    sku: "tokens",
    price: { usdPerUnit: "0.000002", maxUnits: () => 100 },
    handle: async () => ({ json: {}, usage: { promptTokens: 30, completionTokens: 12 } })
  }),
  Tollgate.endpoint({
    path: "/v1/overused",
    sku: "overused",
    price: { usdPerUnit: "0.000002", maxUnits: () => 100 },
    handle: async () => ({ json: {}, usage: { units: 150 } })
  }),
  Tollgate.endpoint({
    path: "/v1/unreported",
    sku: "unreported",
    price: { usdPerUnit: "0.000002", maxUnits: () => 100 },
    handle: async () => ({ json: {} })
  }),
  Tollgate.endpoint({
    path: "/v1/throws",
    sku: "throws",
    price: { usd: "0.5" },
    handle: async () => {
      throw new Error("the operator's bug")
    }
  }),
  Tollgate.endpoint({
    path: "/v1/silent-stream",
    sku: "silent-stream",
    price: { usd: "0.5" },
    handle: async () => ({ stream: (async function*() {})() })
  }),
  Tollgate.endpoint({
    path: "/v1/flat-stream",
    sku: "flat-stream",
    price: { usd: "0.25" },
    handle: async () => ({
      stream: (async function*() {
        yield "one "
        yield new TextEncoder().encode("two")
      })(),
      contentType: "text/event-stream"
    })
  })
]

let tollgate: Tollgate.Tollgate
let key = ""
let adminKey = ""

beforeAll(async () => {
  const config = await Effect.runPromise(Config.load({ TOLLGATE_STORE: "memory", TOLLGATE_LOG_LEVEL: "none" }))
  tollgate = await Tollgate.make({ config, endpoints, announce: false })
  key = tollgate.devCredentials!.inferenceKey
  adminKey = tollgate.devCredentials!.adminKey
}, 60_000)
afterAll(() => tollgate?.dispose())

const call = (path: string, init: RequestInit = {}, apiKey = key) =>
  tollgate.fetch(
    new Request(`http://localhost${path}`, {
      method: "POST",
      ...init,
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...init.headers }
    })
  )

const nano = (usd: string) => {
  const [whole, fraction = ""] = usd.split(".")
  return Number(whole) * 1_000_000_000 + Number(fraction.padEnd(9, "0"))
}

/** The balance once no hold is open: a stream settles as its last chunk leaves. */
const balance = async (): Promise<number> => {
  for (;;) {
    const { balances } = await (await call("/api/v1/api_keys/rate_limits", { method: "GET" })).json() as {
      balances: { usd: string; heldUsd: string }
    }
    if (balances.heldUsd === "0") return nano(balances.usd)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

const entryOf = async (response: Response) => {
  const { data } = await (await call("/api/v1/billing/usage-history?limit=100", { method: "GET" }, adminKey)).json() as {
    data: ReadonlyArray<
      {
        sku: string
        unit: number
        amount: number
        notes: string
        inferenceDetails: { requestId: string; promptTokens?: number; completionTokens?: number }
      }
    >
  }
  return data.find((entry) => entry.inferenceDetails.requestId === response.headers.get("x-request-id"))
}

/** What a call took from the balance, once it has answered and settled. */
const charged = async (request: () => Promise<Response>) => {
  const before = await balance()
  const response = await request()
  const body = await response.text()
  return { response, body, charge: before - await balance() }
}

describe("OwnEndpoint: a GET endpoint's body is its query parameters, checked by the declared validator", () => {
  it("?symbol= is the body; without it a 400 DetailedError names symbol and nothing is charged", async () => {
    const ok = await charged(() => call("/v1/quote?symbol=ETH", { method: "GET" }))
    expect(ok.response.status).toBe(200)
    expect(JSON.parse(ok.body)).toEqual({ symbol: "ETH", account: "acct_demo" })
    expect(ok.charge).toBe(1_000_000)
    const refused = await charged(() => call("/v1/quote", { method: "GET" }))
    expect(refused.response.status).toBe(400)
    expect(JSON.parse(refused.body)).toEqual({
      error: "Invalid request parameters: symbol: Required",
      details: { _errors: [], symbol: { _errors: ["Required"] } }
    })
    expect(refused.charge).toBe(0)
  })
})

describe("OwnEndpoint: a quote-priced call is charged the usd it reports, never more than its quote", () => {
  it("reports 0.3 of a 0.5 quote: 0.3; reports 0.9 of a 0.5 quote: 0.5", async () => {
    const under = await charged(() => call("/v1/priced", { body: JSON.stringify({ worst: "0.5", actual: "0.3" }) }))
    expect(under.charge).toBe(300_000_000)
    expect(await entryOf(under.response)).toMatchObject({ sku: "priced", amount: 0.3, notes: "by quote" })
    const over = await charged(() => call("/v1/priced", { body: JSON.stringify({ worst: "0.5", actual: "0.9" }) }))
    expect(over.charge).toBe(500_000_000)
  })
})

describe("OwnEndpoint: per-unit usage in tokens is their sum, recorded on the usage entry; unreported usage is the quote; more than the quote is the quote", () => {
  it("30 prompt + 12 completion tokens at 0.000002: 84,000 nano-USD; nothing reported, or 150 of at most 100 units: 100 units", async () => {
    const tokens = await charged(() => call("/v1/tokens", { body: "{}" }))
    expect(tokens.charge).toBe(42 * 2_000)
    expect(await entryOf(tokens.response)).toMatchObject({
      sku: "tokens",
      unit: 42,
      inferenceDetails: { promptTokens: 30, completionTokens: 12 }
    })
    const unreported = await charged(() => call("/v1/unreported", { body: "{}" }))
    expect(unreported.charge).toBe(100 * 2_000)
    const overused = await charged(() => call("/v1/overused", { body: "{}" }))
    expect(overused.charge).toBe(100 * 2_000)
    expect(await entryOf(overused.response)).toMatchObject({ sku: "overused", unit: 100, amount: 0.0002 })
  })
})

describe("OwnEndpoint: a handler that throws is a 500 that charges nothing and leaves no usage", () => {
  it("500 StandardError, balance unchanged, no entry", async () => {
    const failed = await charged(() => call("/v1/throws", { body: "{}" }))
    expect(failed.response.status).toBe(500)
    expect(JSON.parse(failed.body)).toEqual({ error: expect.any(String) })
    expect(failed.charge).toBe(0)
    expect(await entryOf(failed.response)).toBeUndefined()
  })
})

describe("OwnEndpoint: a stream is charged once it sent something", () => {
  it("a stream that sent nothing: 0; a flat-priced stream of strings and bytes: its price, under its content type", async () => {
    const silent = await charged(() => call("/v1/silent-stream", { body: "{}" }))
    expect(silent.response.status).toBe(200)
    expect(silent.charge).toBe(0)
    const flat = await charged(() => call("/v1/flat-stream", { body: "{}" }))
    expect(flat.body).toBe("one two")
    expect(flat.response.headers.get("content-type")).toBe("text/event-stream")
    expect(flat.charge).toBe(250_000_000)
  })
})
