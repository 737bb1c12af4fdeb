import { Money, PricingEngine, RateLimitLog, RateLimits } from "@tollgate/core"
import type * as Auth from "@tollgate/core/Auth"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { RateWindow } from "@tollgate/testkit"
import { Effect, Layer, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { afterAll, beforeEach, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as Route from "../src/Route.ts"
import * as RateLimitsRoutes from "../src/routes/RateLimits.ts"
import * as TestApp from "./support/TestApp.ts"

const { build, run } = TestApp
const auth = await TestApp.authMemory()
const ledger = await TestApp.ledgerMemory()
const overrides = await build(RateLimits.Overrides, RateLimits.layerOverridesMemory())

const quote = PricingEngine.textParser(PricingEngine.defaults)

/** A metered image call, so limits are consumed the way every paid route consumes them. */
const imageRoute = Route.make(
  "POST",
  "/api/v1/test/image",
  Effect.gen(function*() {
    const metered = yield* Metered.Metered
    return metered.run({
      sku: "image:flux-dev",
      kind: "image",
      quote,
      execute: () =>
        Effect.succeed({
          response: HttpServerResponse.jsonUnsafe({ ok: true }),
          charge: Money.unsafeNano(0),
          usage: { units: 1, pricePerUnit: Money.unsafeNano(0) }
        })
    })
  })
)

const app = App.layer<Metered.Metered | Auth.Auth | RateLimiter.RateLimiter | RateLimitLog.RateLimitLog | RateLimits.Overrides>([
  imageRoute,
  ...RateLimitsRoutes.routes
]).pipe(
  Layer.provide(TestApp.layerMeteredMemory()),
  Layer.provide(Metered.layerLimits),
  Layer.provideMerge(Layer.mergeAll(
    TestApp.layerStoresAround(auth, ledger),
    Layer.succeed(RateLimits.Overrides, overrides),
    RateLimiter.layerMemory().pipe(Layer.provideMerge(RateLimitLog.layerMemory()))
  )),
  Layer.provide(TestApp.layerServiceInfo)
)
const { dispose, handler } = Handlers.toWebHandler(app)
afterAll(dispose)

let counter = 0
let account = ""
let key = ""
let keyId = ""
beforeEach(async () => {
  account = `acct-rl-${counter++}`
  await run(auth.createAccount({ id: account }))
  const created = await run(auth.createKey({ accountId: account, type: "INFERENCE", description: "test" }))
  key = created.key
  keyId = created.record.id
  await run(ledger.topUp({ accountId: account, amount: Money.usd(1), reference: `fund-${account}` }))
  // Each test counts calls within one minute's window: it starts with enough of one left.
  await RateWindow.fresh()
})

const get = (path: string, authorization: string | null = `Bearer ${key}`) =>
  handler(new Request(`http://localhost/api/v1/api_keys/${path}`, authorization === null ? {} : { headers: { authorization } }))
const image = () =>
  handler(new Request("http://localhost/api/v1/test/image", { method: "POST", headers: { authorization: `Bearer ${key}` } }))

interface Status {
  readonly kind: string
  readonly modelTier?: string
  readonly type: string
  readonly requests?: { readonly limit: number; readonly remaining: number; readonly reset: number }
  readonly tokens?: { readonly limit: number; readonly remaining: number; readonly resetSeconds: number }
  readonly credits?: { readonly limit: number; readonly remaining: number; readonly reset: number }
}
const limits = async () => {
  const response = await get("rate_limits")
  expect(response.status).toBe(200)
  return (await response.json()) as {
    accountId: string
    keyId: string
    tier: string
    limits: Array<Status>
    balances: Record<string, unknown>
  }
}
const find = (body: { limits: Array<Status> }, kind: string, type = "user", modelTier?: string) =>
  body.limits.find((s) => s.kind === kind && s.type === type && s.modelTier === modelTier)

describe("The rate-limit operations need a Bearer key", () => {
  it.each(["rate_limits", "rate_limit_logs"])("%s: no credentials or a bad key is a 401 StandardError", async (path) => {
    for (const authorization of [null, "Bearer not-a-key"]) {
      const response = await get(path, authorization)
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual({ error: expect.any(String) })
    }
  })
})

describe("GET /api_keys/rate_limits: the caller's current limits and what remains, per model tier and per kind, with balances", () => {
  it("a fresh key sees the spec's default tables, untouched, and its balance", async () => {
    const body = await limits()
    expect(Schema.decodeUnknownSync(RateLimitsRoutes.RateLimitsBody, { onExcessProperty: "error" })(body)).toEqual(body)
    expect(body).toMatchObject({ accountId: account, keyId, tier: "default", balances: { usd: "1" } })
    expect(find(body, "text", "user", "M")).toMatchObject({
      requests: { limit: 50, remaining: 50 },
      tokens: { limit: 750_000, remaining: 750_000 }
    })
    expect(find(body, "text", "user", "XS")?.tokens?.limit).toBe(1_000_000)
    expect(find(body, "image")?.requests).toMatchObject({ limit: 20, remaining: 20 })
    expect(find(body, "video_retrieve")?.requests?.limit).toBe(120)
    expect(find(body, "billing_usage")?.requests?.limit).toBe(5)
    expect(find(body, "rpc")).toMatchObject({
      requests: { limit: 100, remaining: 100 },
      credits: { limit: 10_000_000, remaining: 10_000_000 }
    })
  })

  it("what remains follows the calls made, and the headers of a call say the same", async () => {
    await image()
    const second = await image()
    expect(second.status).toBe(200)
    expect(second.headers.get("x-ratelimit-remaining-requests")).toBe("18")
    expect(second.headers.get("x-ratelimit-type")).toBe("user")
    const status = find(await limits(), "image")!
    expect(status.requests?.remaining).toBe(18)
    expect(String(status.requests?.reset)).toBe(second.headers.get("x-ratelimit-reset-requests"))
  })

  it("account and key overrides, set at runtime, change the limits that apply", async () => {
    await run(overrides.setAccount(account, { image: { requests: 3 } }))
    await run(overrides.setKey(keyId, { image: { requests: 2 } }))
    await image()
    const body = await limits()
    expect(find(body, "image")?.requests).toMatchObject({ limit: 3, remaining: 2 })
    expect(find(body, "image", "api_key")?.requests).toMatchObject({ limit: 2, remaining: 1 })
    await image()
    const refused = await image()
    expect(refused.status).toBe(429)
    expect(refused.headers.get("x-ratelimit-type")).toBe("api_key")
  })
})

describe("GET /api_keys/rate_limit_logs: the caller's recent requests that hit a limit", () => {
  it("a 429 is logged with its time, the limit, the model and the key, newest first", async () => {
    await run(overrides.setAccount(account, { image: { requests: 1 } }))
    expect((await image()).status).toBe(200)
    const before = Date.now()
    const refused = await image()
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(Number(refused.headers.get("x-ratelimit-reset-requests"))).toBeGreaterThanOrEqual(Math.floor(before / 1000))
    await image()
    const response = await get("rate_limit_logs")
    expect(response.status).toBe(200)
    const body = await response.json()
    expect(Schema.decodeUnknownSync(RateLimitsRoutes.RateLimitLogsBody, { onExcessProperty: "error" })(body)).toEqual(body)
    const { data } = body as { data: Array<Record<string, string>> }
    expect(data).toHaveLength(2)
    expect(data[0]).toEqual({
      timestamp: expect.any(String),
      limit: "1 requests per minute",
      limitType: "user",
      kind: "image",
      model: "flux-dev",
      keyId
    })
    expect(Date.parse(data[0]!.timestamp!)).toBeGreaterThanOrEqual(Date.parse(data[1]!.timestamp!))
  })

  it("another account's rejections are not listed", async () => {
    const response = await get("rate_limit_logs")
    expect(await response.json()).toEqual({ data: [] })
  })
})
