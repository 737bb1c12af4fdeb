import { Validator } from "@seriousme/openapi-schema-validator"
import { describe, expect, it } from "vitest"
import * as Documentation from "../src/Documentation.ts"
import * as OpenApi from "../src/OpenApi.ts"
import * as Routes from "../src/routes/index.ts"

const routes = [...Routes.all, ...Documentation.routes(Routes.all)]
const document = OpenApi.make(routes, { version: "20261122.000000", publicOrigin: "https://api.example.com" })

describe("The OpenAPI 3.1 document is valid", () => {
  it("passes a maintained OpenAPI validator", async () => {
    const validator = new Validator()
    const result = await validator.validate(JSON.parse(JSON.stringify(document)))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })
})

describe("Every route of the router is in the OpenAPI document", () => {
  it.each(routes.map((route) => [route.method, route.path] as const))("%s %s", (method, path) => {
    const openApiPath = path.replace(/:([A-Za-z0-9_]+)/g, "{$1}")
    expect(document.paths[openApiPath]?.[method.toLowerCase()]).toBeDefined()
  })
})

describe("A route documented as paid is one the pipeline meters: its credentials are checked before its body is read", () => {
  it("every route whose docs say metered is marked metered, and no other", () => {
    const mismatched = Routes.all
      .filter((route) => (route.docs?.security === "metered") !== (route.metered === true))
      .map((route) => `${route.method} ${route.path}`)
    expect(mismatched).toEqual([])
  })
})

describe("The security schemes are the spec's: bearer JWT and SIGN-IN-WITH-X", () => {
  it("declares both", () => {
    expect(document.components.securitySchemes["bearer"]).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: "JWT" })
    expect(document.components.securitySchemes["siwx"]).toMatchObject({ type: "apiKey", in: "header", name: "SIGN-IN-WITH-X" })
  })

  it("documents the error bodies StandardError and DetailedError, and a 400 refers to DetailedError", () => {
    expect(document.components.schemas["StandardError"]).toMatchObject({
      type: "object",
      properties: { error: { type: "string" }, code: { type: "string" }, customMessage: { type: "string" } },
      required: ["error"]
    })
    expect(document.components.schemas["DetailedError"]).toMatchObject({
      type: "object",
      properties: { error: { type: "string" }, details: { type: "object" } },
      required: ["error"]
    })
    expect(document.paths["/api/v1/billing/credits"]?.["post"]).toMatchObject({
      responses: { 400: { content: { "application/json": { schema: { $ref: "#/components/schemas/DetailedError" } } } } }
    })
    expect(document.paths["/api/v1/billing/refunds"]?.["post"]).toMatchObject({
      responses: {
        400: { content: { "application/json": { schema: { $ref: "#/components/schemas/DetailedError" } } } },
        403: { content: { "application/json": { schema: { $ref: "#/components/schemas/StandardError" } } } },
        404: { content: { "application/json": { schema: { $ref: "#/components/schemas/StandardError" } } } }
      }
    })
  })
})

describe("The reference reads as the API's: every operation tagged and summarised, paths in {braces}, RPC in one group, no invented examples", () => {
  const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      path,
      method,
      operation: operation as { tags: Array<string>; summary: string }
    }))
  )

  it("every operation has a tag and a summary that is not its method and path", () => {
    for (const { method, operation, path } of operations) {
      expect([path, operation.tags.length]).not.toEqual([path, 0])
      expect(operation.summary).not.toBe(`${method.toUpperCase()} ${path}`)
    }
  })

  it("the 404 of a model, a character or a video job states its StandardError body", () => {
    for (
      const [path, method] of [["/api/v1/models/{id}", "get"], ["/api/v1/characters/{slug}", "get"], ["/api/v1/video/retrieve", "post"], [
        "/api/v1/video/complete",
        "post"
      ]] as const
    ) {
      expect(document.paths[path]?.[method], `${method} ${path}`).toMatchObject({
        responses: { 404: { content: { "application/json": { schema: { $ref: "#/components/schemas/StandardError" } } } } }
      })
    }
  })

  it("every tag is a group title, capitalised as the others (the reference lists its groups by tag)", () => {
    const tags = new Set(operations.flatMap(({ operation }) => operation.tags))
    expect([...tags].filter((tag) => tag[0] !== tag[0]!.toUpperCase())).toEqual([])
    expect(tags).toContain("Portal")
    expect(tags).toContain("Documentation")
  })

  it("the x402 operations are under one tag with their summaries; the balance path has {walletAddress}", () => {
    expect(document.paths["/api/v1/x402/top-up"]?.["post"]).toMatchObject({
      tags: ["Wallets (x402)"],
      summary: "Buy prepaid USDC credit for a wallet"
    })
    expect(document.paths["/api/v1/x402/balance/{walletAddress}"]?.["get"]).toMatchObject({
      tags: ["Wallets (x402)"],
      summary: "Read a wallet's prepaid credit",
      parameters: [expect.objectContaining({ name: "walletAddress", in: "path", required: true })]
    })
    expect(Object.keys(document.paths).filter((path) => path.includes(":"))).toEqual([])
  })

  it("the RPC network list and the RPC proxy are one group", () => {
    expect(document.paths["/api/v1/crypto/rpc/networks"]?.["get"]).toMatchObject({ tags: ["Crypto RPC"] })
    expect(document.paths["/api/v1/crypto/rpc/{network}"]?.["post"]).toMatchObject({ tags: ["Crypto RPC"] })
  })

  // A reference page invents `"propertyName*": "anything"` for an object that says nothing of its keys.
  it("no object schema is left without properties or an example", () => {
    const open: Array<string> = []
    const walk = (value: unknown, at: string): void => {
      if (Array.isArray(value)) return value.forEach((inner, index) => walk(inner, `${at}/${index}`))
      if (typeof value !== "object" || value === null) return
      const schema = value as Record<string, unknown>
      if (schema["type"] === "object" && !("properties" in schema) && !("examples" in schema)) {
        const extra = schema["additionalProperties"]
        if (extra === undefined || extra === true || (typeof extra === "object" && extra !== null && Object.keys(extra).length === 0))
          open.push(at)
      }
      for (const [key, inner] of Object.entries(schema)) walk(inner, `${at}/${key}`)
    }
    walk(document, "")
    expect(open).toEqual([])
  })
})
