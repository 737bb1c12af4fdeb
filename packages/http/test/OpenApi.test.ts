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
  })
})
