import { Errors, Money, type PricingEngine } from "@tollgate/core"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import { HttpServerResponse } from "effect/http"
import { afterAll, beforeEach, describe, expect, it } from "vitest"
import * as Endpoint from "../src/Endpoint.ts"
import { App, Handlers } from "../src/index.ts"
import * as RequestBody from "../src/RequestBody.ts"
import * as Route from "../src/Route.ts"
import * as TestApp from "./support/TestApp.ts"

const Body = Schema.Struct({ units: Schema.Int, model: Schema.String })

const price = Money.unsafeNano(1_000)

/** How many requests got as far as their body being decoded, and as far as being executed. */
let decoded = 0
let executed = 0

const declared = Endpoint.make({
  method: "POST",
  path: "/api/v1/test/declared",
  kind: "image",
  idempotency: true,
  serve: Effect.succeed({
    decode: Effect.tap(RequestBody.schema(Body), () => Effect.sync(() => void decoded++)),
    quote: (body: typeof Body.Type): PricingEngine.Quote | PricingEngine.Unpriced =>
      body.model === "unpriced"
        ? { _tag: "Unpriced", field: "model", message: "unpriced has no price" }
        : {
          sku: `test:${body.model}`,
          amount: Money.unsafeNano(body.units * price),
          version: "test",
          units: body.units,
          pricePerUnit: price
        },
    execute: (body: typeof Body.Type, quote: PricingEngine.Quote) =>
      Effect.sync(() => {
        executed++
        return {
          response: HttpServerResponse.jsonUnsafe({ n: executed }),
          charge: quote.amount,
          usage: { units: body.units, pricePerUnit: price }
        }
      })
  }),
  docs: { summary: "test", tags: ["Test"], responses: { 200: { description: "ok" } } }
})

/** Documented as metered, but not marked: the documentation does not decide how it runs. */
const documentedOnly = Route.make("POST", "/api/v1/test/documented", Effect.succeed(Effect.succeed(HttpServerResponse.text("ran"))), {
  summary: "test",
  tags: ["Test"],
  security: "metered",
  responses: { 200: { description: "ok" } }
})

const scope = Effect.runSync(Scope.make())
const context = await TestApp.buildContext(TestApp.layerMetered(Layer.empty), scope)
const app = App.layer([declared, documentedOnly]).pipe(Layer.provide(Layer.succeedContext(context)))
const { dispose, handler } = Handlers.toWebHandler(app)
afterAll(async () => {
  await dispose()
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

let account: TestApp.SeededAccount
beforeEach(async () => {
  account = await TestApp.seedAccount(context, { label: "endpoint", grant: Money.usd(1) })
  decoded = 0
  executed = 0
})

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  handler(
    new Request(`http://localhost${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
  )

describe("Endpoint: credentials are checked before the body is read, because the declaration marks the route", () => {
  it("no credentials: the discovery 402 and the body never decoded; a route only documented as metered runs as public", async () => {
    const anonymous = await post("/api/v1/test/declared", { units: 1, model: "m" })
    expect(anonymous.status).toBe(402)
    expect(await anonymous.json()).toMatchObject({ x402Version: 2 })
    expect(decoded).toBe(0)
    const documented = await post("/api/v1/test/documented", {})
    expect(documented.status).toBe(200)
    expect(await documented.text()).toBe("ran")
    expect(declared.metered).toBe(true)
    expect(declared.docs?.security).toBe("metered")
  })
})

describe("Endpoint: a malformed Idempotency-Key is a 400 before the body is read", () => {
  it("400 StandardError naming the pattern, nothing decoded or charged", async () => {
    const response = await post("/api/v1/test/declared", { units: 1, model: "m" }, {
      authorization: account.authorization,
      "idempotency-key": "no spaces allowed"
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: "Idempotency-Key must match [A-Za-z0-9_-]{1,255}" })
    expect(decoded).toBe(0)
    expect(await account.charged()).toBe(0)
  })
})

describe("Endpoint: a body that does not decode is a 400 DetailedError naming every bad field", () => {
  it("units and model both named; nothing executed or charged", async () => {
    const response = await post("/api/v1/test/declared", { units: "many" }, { authorization: account.authorization })
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string; details: Record<string, unknown> }
    // The first problem is in the text (the openai SDK shows only that), every one in details.
    expect(body.error).toBe(`${Errors.INVALID_PARAMETERS}: units: Expected number (and 1 more in details)`)
    expect(Object.keys(body.details).sort()).toEqual(["_errors", "model", "units"])
    expect(executed).toBe(0)
    expect(await account.charged()).toBe(0)
  })
})

describe("Endpoint: a request the prices do not cover is a 400 naming the field, and nothing is held", () => {
  it("model unpriced: 400 DetailedError under model", async () => {
    const response = await post("/api/v1/test/declared", { units: 1, model: "unpriced" }, { authorization: account.authorization })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: `${Errors.INVALID_PARAMETERS}: model: unpriced has no price`,
      details: { _errors: [], model: { _errors: ["unpriced has no price"] } }
    })
    expect(executed).toBe(0)
    expect(await account.charged()).toBe(0)
  })
})

describe("Endpoint: an admitted call is charged its capture, with the pipeline's headers, and an Idempotency-Key replays it for free", () => {
  it("7 units: 7,000 nano-USD, x-ratelimit-* of the image kind; the same key again: the same body, Idempotent-Replayed, no second charge", async () => {
    const headers = { authorization: account.authorization, "idempotency-key": "k-1" }
    const first = await post("/api/v1/test/declared", { units: 7, model: "m" }, headers)
    expect(first.status).toBe(200)
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("20")
    expect(first.headers.get("x-service-balance-usd")).toBe("1")
    const firstBody = await first.text()
    const again = await post("/api/v1/test/declared", { units: 7, model: "m" }, headers)
    expect(await again.text()).toBe(firstBody)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(executed).toBe(1)
    expect(await account.charged()).toBe(7_000)
    const reused = await post("/api/v1/test/declared", { units: 8, model: "m" }, headers)
    expect(reused.status).toBe(400)
    expect(await account.charged()).toBe(7_000)
  })
})
