import { Money } from "@tollgate/core"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { RateWindow } from "@tollgate/testkit"
import { parse } from "csv-parse/sync"
import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as Billing from "../src/routes/Billing.ts"
import * as TestApp from "./support/TestApp.ts"

const { run } = TestApp
const auth = await TestApp.authMemory()
const ledger = await TestApp.ledgerMemory()

const app = App.layer(Billing.routes).pipe(
  Layer.provide(Layer.mergeAll(
    TestApp.layerStoresAround(auth, ledger),
    RateLimiter.layerMemory(),
    Metered.layerLimitsDefault,
    Layer.succeed(Billing.BillingOptions, {
      usageCutoff: new Date("2026-07-07T00:00:00Z"),
      usageSunset: new Date("2027-01-01T00:00:00Z"),
      operatorAccountIds: ["operator"]
    })
  )),
  Layer.provide(TestApp.layerServiceInfo)
)
const { dispose, handler } = Handlers.toWebHandler(app)
afterAll(dispose)

let counter = 0
/** A fresh account created before the cutoff, with an ADMIN key and an INFERENCE key. */
const account = async (createdAt = new Date("2026-01-01T00:00:00Z")) => {
  const id = `billing-${counter++}`
  await run(auth.createAccount({ id, createdAt }))
  const admin = await run(auth.createKey({ accountId: id, type: "ADMIN", description: "admin" }))
  const inference = await run(auth.createKey({ accountId: id, type: "INFERENCE", description: "inference" }))
  return { id, admin: admin.key, inference: inference.key }
}

/** Charges `n` usage entries to the account, one per millisecond. */
const charge = async (accountId: string, n: number, notes = "ok") => {
  await run(ledger.topUp({ accountId, amount: Money.usd(100), reference: `fund-${accountId}-${counter++}` }))
  for (let i = 0; i < n; i++) {
    const reference = `h-${counter++}`
    await run(ledger.hold({ accountId, amount: Money.unsafeNano(10_000_000), reference, priceVersion: "v" }))
    await run(ledger.capture({
      accountId,
      reference,
      amount: Money.unsafeNano(10_000_000),
      usage: { sku: "text-parser", units: 1, pricePerUnit: Money.unsafeNano(10_000_000), notes, requestId: reference, executionMs: 7 }
    }))
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
}

const get = (path: string, key: string | undefined, headers: Record<string, string> = {}) =>
  handler(
    new Request(`http://localhost${path}`, {
      headers: key === undefined ? headers : { authorization: `Bearer ${key}`, ...headers }
    })
  )

describe("GET /billing/usage (deprecated): JSON pages with pagination and deprecation headers", () => {
  it("answers the entries, newest first, with x-pagination-*, Deprecation, Sunset and Link", async () => {
    const caller = await account()
    await charge(caller.id, 7)
    const response = await get("/api/v1/billing/usage?limit=3&page=2", caller.admin)
    expect(response.status).toBe(200)
    expect(response.headers.get("x-pagination-limit")).toBe("3")
    expect(response.headers.get("x-pagination-page")).toBe("2")
    expect(response.headers.get("x-pagination-total")).toBe("7")
    expect(response.headers.get("x-pagination-total-pages")).toBe("3")
    expect(response.headers.get("deprecation")).toMatch(/^@\d+$/)
    expect(response.headers.get("sunset")).toBe("Fri, 01 Jan 2027 00:00:00 GMT")
    expect(response.headers.get("link")).toBe("</api/v1/billing/usage-history>; rel=\"successor-version\"")
    const body = await response.json() as { warning: string; data: Array<Record<string, unknown>> }
    expect(body.warning).toContain("/billing/usage-history")
    expect(body.data).toHaveLength(3)
    expect(body.data[0]).toEqual({
      timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      sku: "text-parser",
      pricePerUnitUsd: 0.01,
      unit: 1,
      amount: 0.01,
      currency: "USD",
      notes: "ok",
      inferenceDetails: { requestId: expect.any(String), inferenceExecutionTime: 7 }
    })
    const times = body.data.map((entry) => Date.parse(entry["timestamp"] as string))
    expect(times).toEqual([...times].sort((a, b) => b - a))
  })

  it("Accept: text/csv answers CSV with a header row that a CSV parser reads back, quoting included", async () => {
    const caller = await account()
    await charge(caller.id, 2, "a note, with \"quotes\"\nand a line break")
    const response = await get("/api/v1/billing/usage?sortOrder=asc", caller.admin, { accept: "text/csv" })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/csv/)
    expect(response.headers.get("x-pagination-total")).toBe("2")
    const rows = parse(await response.text(), { columns: true }) as Array<Record<string, string>>
    expect(rows).toHaveLength(2)
    expect(rows[0]).toMatchObject({
      sku: "text-parser",
      amount: "0.01",
      currency: "USD",
      notes: "a note, with \"quotes\"\nand a line break",
      inferenceExecutionTime: "7",
      promptTokens: ""
    })
  })

  it("accounts created on or after 2026-07-07 get 410", async () => {
    const caller = await account(new Date("2026-07-07T00:00:00Z"))
    const response = await get("/api/v1/billing/usage", caller.admin)
    expect(response.status).toBe(410)
    expect(await response.json()).toEqual({ error: expect.stringContaining("usage-history") })
  })

  it("5 requests per minute per user: the 6th is a 429", async () => {
    const caller = await account()
    await RateWindow.fresh()
    for (let i = 0; i < 5; i++) expect((await get("/api/v1/billing/usage", caller.admin)).status).toBe(200)
    const refused = await get("/api/v1/billing/usage", caller.admin)
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
  })
})

describe("Billing endpoints need an ADMIN key", () => {
  it("no key -> 401; an INFERENCE key -> 403", async () => {
    const caller = await account()
    for (const path of ["/api/v1/billing/usage", "/api/v1/billing/usage-history"]) {
      expect((await get(path, undefined)).status).toBe(401)
      expect((await get(path, caller.inference)).status).toBe(403)
    }
  })
})

describe("Bad query parameters -> 400 DetailedError naming each bad field", () => {
  it("every bad field is named, and the rejected call consumed no rate-limit slot", async () => {
    const caller = await account()
    const response = await get(
      "/api/v1/billing/usage?currency=EUR&startDate=yesterday&endDate=2026-13-45&limit=501&page=0&sortOrder=up",
      caller.admin
    )
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string; details: Record<string, { _errors: Array<string> }> }
    for (const field of ["currency", "startDate", "endDate", "limit", "page", "sortOrder"]) {
      expect(body.details[field]?._errors.length, field).toBeGreaterThan(0)
    }
    const history = await get("/api/v1/billing/usage-history?limit=0&cursor=nope", caller.admin)
    const historyBody = await history.json() as { details: Record<string, { _errors: Array<string> }> }
    expect(history.status).toBe(400)
    expect(historyBody.details["limit"]?._errors.length).toBeGreaterThan(0)
    const reversed = await get("/api/v1/billing/usage-history?startDate=2026-02-01&endDate=2026-01-01", caller.admin)
    expect(((await reversed.json()) as { details: Record<string, unknown> }).details).toHaveProperty("endDate")
    for (let i = 0; i < 5; i++) expect((await get("/api/v1/billing/usage", caller.admin)).status).toBe(200)
  })
})

describe("GET /billing/usage-history: keyset pages; every entry appears exactly once while entries are inserted", () => {
  it("walks the history with the opaque cursor while new entries arrive", async () => {
    const caller = await account()
    await charge(caller.id, 9)
    const before = (await run(ledger.usage(caller.id, { order: "desc", limit: 100 }))).entries.map((entry) => entry.requestId)
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const response: Response = await get(
        `/api/v1/billing/usage-history?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`,
        caller.admin
      )
      expect(response.status).toBe(200)
      const body = await response.json() as { data: Array<{ inferenceDetails: { requestId: string } }>; nextCursor: string | null }
      for (const entry of body.data) seen.push(entry.inferenceDetails.requestId)
      cursor = body.nextCursor
      await charge(caller.id, 1)
    } while (cursor !== null)
    expect(seen).toEqual(before)
  })

  it("a cursor used with the other sortOrder is a 400 naming cursor", async () => {
    const caller = await account()
    await charge(caller.id, 3)
    const first = await (await get("/api/v1/billing/usage-history?limit=1", caller.admin)).json() as { nextCursor: string }
    const response = await get(`/api/v1/billing/usage-history?limit=1&sortOrder=asc&cursor=${first.nextCursor}`, caller.admin)
    expect(response.status).toBe(400)
    expect(((await response.json()) as { details: Record<string, unknown> }).details).toHaveProperty("cursor")
  })
})

describe("POST /billing/credits: an operator grants credits, once per reference", () => {
  let operator: Awaited<ReturnType<typeof account>>
  beforeAll(async () => {
    await run(auth.createAccount({ id: "operator", createdAt: new Date("2026-01-01T00:00:00Z") }))
    operator = {
      id: "operator",
      admin: (await run(auth.createKey({ accountId: "operator", type: "ADMIN", description: "ops" }))).key,
      inference: ""
    }
  })
  const grant = (key: string, body: unknown) =>
    handler(
      new Request("http://localhost/api/v1/billing/credits", {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    )

  it("grants, and a retry with the same reference does not grant again", async () => {
    const target = await account()
    const first = await grant(operator.admin, { accountId: target.id, amountUsd: "12.5", reference: "promo-1" })
    expect(first.status).toBe(200)
    expect(await first.json()).toMatchObject({ accountId: target.id, amountUsd: "12.5", balanceUsd: "12.5" })
    const again = await grant(operator.admin, { accountId: target.id, amountUsd: "12.5", reference: "promo-1" })
    expect(await again.json()).toMatchObject({ balanceUsd: "12.5" })
    expect((await grant(operator.admin, { accountId: target.id, amountUsd: "1", reference: "promo-1" })).status).toBe(409)
    expect((await run(ledger.balance(target.id))).usd).toBe(Money.unsafeNano(12_500_000_000))
  })

  it("an ADMIN key of a non-operator account is refused; a bad body names its fields", async () => {
    const target = await account()
    expect((await grant(target.admin, { accountId: target.id, amountUsd: "1", reference: "r" })).status).toBe(403)
    const bad = await grant(operator.admin, { accountId: "", amountUsd: "-1", reference: "no spaces" })
    expect(bad.status).toBe(400)
    const body = await bad.json() as { details: Record<string, unknown> }
    expect(Object.keys(body.details).sort()).toEqual(["_errors", "accountId", "amountUsd", "reference"])
    expect((await run(ledger.balance(target.id))).usd).toBe(0)
  })
})
