import { Errors, Money, PricingEngine } from "@tollgate/core"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { RateWindow } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { Deferred, type Duration, Effect, Layer, Ref, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { afterAll, beforeEach, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as Route from "../src/Route.ts"
import * as TestApp from "./support/TestApp.ts"

const { run } = TestApp
const auth = await TestApp.authMemory()
const ledger = await TestApp.ledgerMemory()

const tables = PricingEngine.defaults
const quote = PricingEngine.textParser(tables)

/** What the route under test does, set per test. */
let behaviour: (context: Metered.CallContext) => Effect.Effect<Metered.Outcome | Metered.StreamingOutcome, Errors.ApiError>
let upstreamCalls = 0

const ok = (charge: number): Effect.Effect<Metered.Outcome> =>
  Effect.sync(() => {
    upstreamCalls++
    return {
      response: HttpServerResponse.jsonUnsafe({ ok: true, n: upstreamCalls }, { headers: { "x-route": "yes" } }),
      charge: Money.unsafeNano(charge),
      usage: { units: 1, pricePerUnit: Money.unsafeNano(charge), notes: "test" }
    }
  })

const route = Route.make(
  "POST",
  "/api/v1/test/metered",
  Effect.gen(function*() {
    const metered = yield* Metered.Metered
    return Effect.gen(function*() {
      return yield* metered.run({
        sku: "text-parser",
        kind: "image",
        quote,
        execute: (context) => behaviour(context)
      })
    })
  })
)

const idempotentRoute = Route.make(
  "POST",
  "/api/v1/test/idempotent",
  Effect.gen(function*() {
    const metered = yield* Metered.Metered
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const body = yield* Effect.orDie(request.text)
      const key = request.headers["idempotency-key"]
      return yield* metered.run({
        sku: "rpc:base-mainnet",
        kind: "rpc",
        reserveCredits: 20,
        quote: PricingEngine.rpcFromCredits(tables, "base-mainnet", 20),
        idempotency: key === undefined ? undefined : { key, fingerprint: body },
        execute: () => ok(20 * 625)
      })
    })
  })
)

const app = App.layer([route, idempotentRoute]).pipe(
  Layer.provide(TestApp.layerMeteredMemory()),
  Layer.provide(Layer.mergeAll(TestApp.layerStoresAround(auth, ledger), RateLimiter.layerMemory(), Metered.layerLimitsDefault)),
  Layer.provide(TestApp.layerServiceInfo)
)
const { dispose, handler } = Handlers.toWebHandler(app)
afterAll(dispose)

let counter = 0
let account = ""
let key = ""
beforeEach(async () => {
  account = `acct-${counter++}`
  await run(auth.createAccount({ id: account }))
  key = (await run(auth.createKey({ accountId: account, type: "INFERENCE", description: "test" }))).key
  upstreamCalls = 0
  behaviour = () => ok(Number(quote.amount))
})

const post = (path: string, headers: Record<string, string> = {}, init: RequestInit = {}) =>
  handler(new Request(`http://localhost${path}`, { method: "POST", body: "{}", headers, ...init }))
const asKey = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...extra })
const fund = (amount: number) =>
  run(ledger.topUp({ accountId: account, amount: Money.unsafeNano(amount), reference: `fund-${account}-${amount}` }))
const balance = (accountId = account) => run(ledger.balance(accountId))
const usage = (accountId = account) => run(ledger.usage(accountId, { order: "asc", limit: 100 })).then((page) => page.entries)

describe("Metered: no credentials get the x402 discovery 402, bad credentials a 401", () => {
  it("no credentials -> 402 discovery body, no-store, upstream not called", async () => {
    const response = await post("/api/v1/test/metered")
    expect(response.status).toBe(402)
    expect(response.headers.get("cache-control")).toBe("no-store")
    const body = await response.json()
    // The body is small, so it is read and priced: the call itself is offered first (1 base unit of USDC is 1,000 nano-USD).
    expect(body).toEqual(
      TestApp.discoveryBody("/api/v1/test/metered", { usd: Money.formatUsd(quote.amount), baseUnits: String(Number(quote.amount) / 1000) })
    )
    // The same body in PAYMENT-REQUIRED, which the official v2 client reads.
    expect(decodePaymentRequiredHeader(response.headers.get("payment-required")!)).toEqual(body)
    expect(upstreamCalls).toBe(0)
  })

  it("bad credentials -> 401 StandardError", async () => {
    const response = await post("/api/v1/test/metered", { authorization: "Bearer not-a-key" })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({ error: expect.any(String) })
  })
})

describe("Metered: a revoked key is a 401 even when its standing is checked alongside admission, and consumes nothing", () => {
  it("the hold and the rate-limit slot the admission took are given back; the next key of the account starts untouched", async () => {
    await fund(Money.usd(1))
    const revoked = await run(auth.createKey({ accountId: account, type: "INFERENCE", description: "revoked" }))
    await run(auth.revokeKey(account, revoked.record.id))
    const refused = await post("/api/v1/test/metered", { authorization: `Bearer ${revoked.key}` })
    expect(refused.status).toBe(401)
    expect(await refused.json()).toEqual({ error: expect.any(String) })
    expect(upstreamCalls).toBe(0)
    const after = await balance()
    expect([after.usd, after.heldUsd]).toEqual([Money.usd(1), 0])
    expect(await usage()).toEqual([])
    const admitted = await post("/api/v1/test/metered", asKey())
    expect(admitted.headers.get("x-ratelimit-remaining-requests")).toBe("19")
  })

  it("a revoked key that sends an Idempotency-Key does not burn it", async () => {
    await fund(Money.usd(1))
    const revoked = await run(auth.createKey({ accountId: account, type: "INFERENCE", description: "revoked" }))
    await run(auth.revokeKey(account, revoked.record.id))
    const refused = await post("/api/v1/test/idempotent", { authorization: `Bearer ${revoked.key}`, "idempotency-key": "k-revoked" })
    expect(refused.status).toBe(401)
    const admitted = await post("/api/v1/test/idempotent", asKey({ "idempotency-key": "k-revoked" }))
    expect(admitted.status).toBe(200)
    expect(admitted.headers.get("idempotent-replayed")).toBeNull()
  })
})

describe("Metered: an admitted call is charged its actual price, at most the quote, with the usage entry and the headers", () => {
  it("captures the charge, releases the rest, reports the balance before processing", async () => {
    await fund(Money.usd(1))
    behaviour = () => ok(4_000_000)
    const response = await post("/api/v1/test/metered", asKey())
    expect(response.status).toBe(200)
    expect(response.headers.get("x-route")).toBe("yes")
    expect(response.headers.get("x-service-balance-usd")).toBe("1")
    expect(response.headers.get("x-service-balance-token")).toBe("0")
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("20")
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("19")
    expect(response.headers.get("x-balance-remaining")).toBeNull()
    const after = await balance()
    expect([after.usd, after.heldUsd]).toEqual([Money.usd(1) - 4_000_000, 0])
    const [entry] = await usage()
    expect(entry).toMatchObject({ sku: "text-parser", amount: 4_000_000, currency: "USD", notes: "test", units: 1 })
    expect(entry?.requestId).toBe(response.headers.get("x-request-id"))
  })

  it("two calls sending the same x-request-id get two usage entries, each under the server's own id", async () => {
    await fund(Money.usd(1))
    behaviour = () => ok(1_000)
    const responses = [
      await post("/api/v1/test/metered", asKey({ "x-request-id": "client-7" })),
      await post("/api/v1/test/metered", asKey({ "x-request-id": "client-7" }))
    ]
    const entries = await usage()
    expect(entries.map((entry) => entry.requestId)).toEqual(responses.map((response) => response.headers.get("x-request-id")))
    expect(new Set(entries.map((entry) => entry.requestId)).size).toBe(2)
    expect(entries.map((entry) => entry.requestId)).not.toContain("client-7")
    expect(responses.map((response) => response.headers.get("x-client-request-id"))).toEqual(["client-7", "client-7"])
  })

  it("a charge above the quote is cut to the quote", async () => {
    await fund(Money.usd(1))
    behaviour = () => ok(Number(quote.amount) * 3)
    expect((await post("/api/v1/test/metered", asKey())).status).toBe(200)
    expect((await balance()).usd).toBe(Money.usd(1) - quote.amount)
  })
})

describe("Metered: too little balance is a 402 and consumes nothing", () => {
  it("an API key gets StandardError INSUFFICIENT_BALANCE; no rate-limit slot, no hold, no upstream call", async () => {
    await fund(quote.amount - 1)
    const refused = await post("/api/v1/test/metered", asKey())
    expect(refused.status).toBe(402)
    expect(await refused.json()).toEqual({ error: "Insufficient balance to pay for this request", code: "INSUFFICIENT_BALANCE" })
    expect(upstreamCalls).toBe(0)
    const after = await balance()
    expect([after.usd, after.heldUsd]).toEqual([quote.amount - 1, 0])
    await fund(1)
    const admitted = await post("/api/v1/test/metered", asKey())
    expect(admitted.headers.get("x-ratelimit-remaining-requests")).toBe("19")
  })
})

describe("Metered: a rate-limited call is a 429 and holds nothing", () => {
  it("the 21st image call in a minute is refused with Retry-After; the balance is untouched", async () => {
    await fund(Money.usd(1))
    await RateWindow.fresh()
    for (let i = 0; i < 20; i++) expect((await post("/api/v1/test/metered", asKey())).status).toBe(200)
    const before = await balance()
    const refused = await post("/api/v1/test/metered", asKey())
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
    const after = await balance()
    expect([after.usd, after.heldUsd]).toEqual([before.usd, 0])
    expect(upstreamCalls).toBe(20)
  })
})

describe("Metered: a failure after admission releases the hold; nothing is charged", () => {
  it("the route's error is rendered and the balance is whole again", async () => {
    await fund(Money.usd(1))
    behaviour = () => Effect.fail(new Errors.BadGateway({ message: "upstream down" }))
    const response = await post("/api/v1/test/metered", asKey())
    expect(response.status).toBe(502)
    const after = await balance()
    expect([after.usd, after.heldUsd]).toEqual([Money.usd(1), 0])
    expect(await usage()).toEqual([])
  })
})

describe("Metered: a client that disconnects once the backend was called does not stop it; the call is charged what it used", () => {
  it("the backend runs to its end after the client is gone, and its usage is captured", async () => {
    await fund(Money.usd(1))
    const started = Deferred.makeUnsafe<void>()
    const finish = Deferred.makeUnsafe<void>()
    behaviour = () => Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(finish)), Effect.andThen(ok(1_000)))
    const controller = new AbortController()
    const pending = post("/api/v1/test/metered", asKey(), { signal: controller.signal }).catch(() => undefined)
    await run(Deferred.await(started))
    expect((await balance()).heldUsd).toBe(quote.amount)
    controller.abort()
    await run(Deferred.succeed(finish, undefined))
    await pending
    await run(
      Effect.gen(function*() {
        while ((yield* ledger.balance(account)).heldUsd !== 0) yield* Effect.sleep("5 millis")
      }).pipe(Effect.timeout("2 seconds"))
    )
    expect((await balance()).usd).toBe(Money.usd(1) - 1_000)
  })
})

describe("Metered: a streamed response is charged for what it produced, when it ends or is cut", () => {
  const streaming = (
    chunks: number,
    produced: Ref.Ref<number>,
    pace: Duration.Input = "0 millis"
  ): Effect.Effect<Metered.StreamingOutcome> =>
    Effect.succeed({
      _tag: "Streaming",
      contentType: "text/event-stream",
      stream: Stream.range(1, chunks).pipe(
        Stream.tap(() => Ref.update(produced, (n) => n + 1).pipe(Effect.andThen(Effect.sleep(pace)))),
        Stream.map((n) => new TextEncoder().encode(`data: ${n}\n\n`))
      ),
      produced: Effect.map(Ref.get(produced), (n) => ({
        charge: Money.unsafeNano(n * 1000),
        usage: { units: n, pricePerUnit: Money.unsafeNano(1000), completionTokens: n, promptTokens: 1 },
        actualTokens: n
      }))
    })

  it("a stream read to its end captures every chunk", async () => {
    await fund(Money.usd(1))
    const produced = Ref.makeUnsafe(0)
    behaviour = () => streaming(5, produced)
    const response = await post("/api/v1/test/metered", asKey())
    expect(response.headers.get("x-service-balance-usd")).toBe("1")
    expect(await response.text()).toContain("data: 5")
    await run(
      Effect.gen(function*() {
        while ((yield* ledger.balance(account)).heldUsd !== 0) yield* Effect.sleep("5 millis")
      }).pipe(Effect.timeout("2 seconds"))
    )
    expect((await balance()).usd).toBe(Money.usd(1) - 5000)
    expect(await usage()).toMatchObject([{ amount: 5000, completionTokens: 5, promptTokens: 1 }])
  })

  it("a client that stops reading mid-stream is charged for the chunks produced, and the hold is gone", async () => {
    await fund(Money.usd(1))
    const produced = Ref.makeUnsafe(0)
    behaviour = () => streaming(10_000, produced, "5 millis")
    const response = await post("/api/v1/test/metered", asKey())
    const reader = response.body!.getReader()
    await reader.read()
    await reader.read()
    await reader.cancel()
    await run(
      Effect.gen(function*() {
        while ((yield* ledger.balance(account)).heldUsd !== 0) yield* Effect.sleep("5 millis")
      }).pipe(Effect.timeout("2 seconds"))
    )
    const [entry] = await usage()
    expect(entry!.amount).toBeGreaterThanOrEqual(2000)
    expect(entry!.amount).toBeLessThan(10_000 * 1000)
    expect((await balance()).usd).toBe(Money.usd(1) - entry!.amount)
  })
})

describe("Metered: Idempotency-Key replays the stored response for free; another body is refused", () => {
  it("the replay is byte-identical with Idempotent-Replayed: true and is charged once", async () => {
    await fund(Money.usd(1))
    const first = await post("/api/v1/test/idempotent", asKey({ "idempotency-key": "abc" }), { body: "[1]" })
    const firstBody = await first.text()
    const again = await post("/api/v1/test/idempotent", asKey({ "idempotency-key": "abc" }), { body: "[1]" })
    expect(again.status).toBe(200)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(await again.text()).toBe(firstBody)
    expect(upstreamCalls).toBe(1)
    expect((await balance()).usd).toBe(Money.usd(1) - 20 * 625)
    const other = await post("/api/v1/test/idempotent", asKey({ "idempotency-key": "abc" }), { body: "[2]" })
    expect(other.status).toBe(400)
    expect(upstreamCalls).toBe(1)
  })
})
