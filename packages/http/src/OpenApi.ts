/**
 * The OpenAPI 3.1 document of the public API, generated from the route list: each route's docs
 * name the schemas it decodes with, so the document and the validation cannot drift apart. Error
 * responses come from the same error schemas `ErrorResponse` renders, and the security schemes
 * are the two the spec defines (bearer JWT API keys and the `SIGN-IN-WITH-X` wallet header).
 *
 * @since 0.1.0
 */
import { Errors, Money, type PricingEngine, X402 } from "@tollgate/core"
import { Schema } from "effect"
import * as Bazaar from "./Bazaar.ts"
import type * as Route from "./Route.ts"

/**
 * The introduction of the API, as the document's `info.description` and the `/docs` page show it.
 *
 * @category constants
 */
export const description = "A paid inference API: text parser, image generation, blockchain JSON-RPC proxy, " +
  "OpenAI-compatible chat, billing, and x402 wallet access. Authenticate with an API key (/api-keys) " +
  "or a wallet (/docs/authentication); wallets buy prepaid credit over x402 (/docs/wallets)."

/** @category models */
export interface Document {
  readonly openapi: "3.1.0"
  readonly info: { readonly title: string; readonly version: string; readonly description: string }
  readonly servers: ReadonlyArray<{ readonly url: string }>
  readonly paths: Record<string, Record<string, unknown>>
  readonly components: {
    readonly schemas: Record<string, unknown>
    readonly securitySchemes: Record<string, unknown>
  }
}

/** @category options */
export interface Options {
  readonly version: string
  readonly publicOrigin: string
  /** The bodies of the 402 forms for metered routes (discovery and authenticated wallet). */
  readonly paymentRequiredSchemas?: ReadonlyArray<Schema.Top>
  /** Where wallets pay and the prices: each metered operation then states its x402 payment (`x-x402`). */
  readonly x402?: { readonly config: X402.Config; readonly tables: PricingEngine.Tables } | undefined
}

/**
 * A metered operation's x402 payment, for agents and directories that read the document: the
 * call's price and the `accepts` its 402 offers when the price is the same for every call, else
 * how the price is quoted. Calls below `minimumPerCall` are paid from credit (top-up, then SIWX).
 * `extensions.bazaar` is the operation's discovery extension, the one its 402s carry (`Bazaar`).
 */
const x402Payment = (x402: NonNullable<Options["x402"]>, route: Route.Route<any>, docs: Route.Docs) => {
  const bazaar = Bazaar.extension(route)
  const price = docs.x402Price?.(x402.tables)
  const perCall = X402.perCallOffered(x402.config, price)
  const upto = docs.x402SettlesActual === true && x402.config.evm?.upto !== undefined
  return {
    x402Version: X402.VERSION,
    scheme: "exact",
    // `upto` (Base, Permit2): a permit for the quoted worst case, of which the actual charge is settled.
    schemes: upto ? ["upto", "exact"] : ["exact"],
    minimumPerCallUsd: Money.formatUsd(x402.config.minimumPerCall),
    ...(price === undefined
      ? { price: "quoted per request: its worst case is paid, and what the call does not use stays as the wallet's credit" }
      : { priceUsd: Money.formatUsd(price) }),
    ...(perCall || price === undefined ? {} : { paidPerCall: false }),
    ...(price === undefined ? {} : { accepts: X402.endpointRequirements(x402.config, price) }),
    topUp: X402.topUpUrl(x402.config),
    ...(bazaar === undefined ? {} : { extensions: { bazaar } })
  }
}

const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, "{$1}")

const pathParameters = (path: string) =>
  [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map(([, name]) => ({
    name,
    in: "path",
    required: true,
    schema: { type: "string" }
  }))

const isEmptyObject = (value: unknown) => typeof value === "object" && value !== null && Object.keys(value).length === 0

/**
 * An object schema that says nothing of its keys. Reference pages invent an example for it
 * (`"propertyName*": "anything"`), so it gets `{}` as its example; inside `allOf` it constrains
 * nothing and is dropped.
 */
const isOpenObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && (value as Record<string, unknown>)["type"] === "object" &&
  Object.entries(value).every(([key, inner]) => key === "type" || (key === "additionalProperties" && isEmptyObject(inner)))

/**
 * Converts a schema to a JSON Schema whose references point into `components.schemas`, adding
 * the named definitions it uses there.
 *
 * @category internals
 */
const register = (schemas: Record<string, unknown>, schema: Schema.Top): unknown => {
  const document = Schema.toJsonSchemaDocument(schema)
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite)
    if (typeof value !== "object" || value === null) return value
    const rewritten = Object.fromEntries(
      Object.entries(value).flatMap(([key, inner]): Array<[string, unknown]> => {
        if (key === "$ref" && typeof inner === "string") return [[key, inner.replace("#/$defs/", "#/components/schemas/")]]
        // `{}` allows any extra key, which JSON Schema does anyway.
        if (key === "additionalProperties" && isEmptyObject(inner)) return []
        if (key === "allOf" && Array.isArray(inner)) return [[key, inner.filter((part) => !isOpenObject(part)).map(rewrite)]]
        return [[key, rewrite(inner)]]
      })
    )
    return isOpenObject(rewritten) && !("examples" in rewritten) ? { ...rewritten, examples: [{}] } : rewritten
  }
  for (const [name, definition] of Object.entries(document.definitions ?? {})) {
    schemas[name] = rewrite(definition)
  }
  return rewrite(document.schema)
}

const json = (schemas: Record<string, unknown>, schema: Schema.Top, description: string, contentType = "application/json") => ({
  description,
  content: { [contentType]: { schema: register(schemas, schema) } }
})

const errorResponses = (
  schemas: Record<string, unknown>,
  security: Route.Docs["security"],
  paymentRequired: ReadonlyArray<Schema.Top>
): Record<string, unknown> => {
  const standard = (description: string) => json(schemas, Errors.StandardError, description)
  const common = {
    "404": standard("No such route"),
    "405": standard("Method not allowed on this path"),
    "413": standard("Request body too large"),
    "429": standard("Rate limit exceeded, or too many failed attempts (abuse guard); see Retry-After"),
    "500": standard("Internal error")
  }
  switch (security) {
    case "public":
      return common
    case "key":
    case "admin":
      return {
        ...common,
        "400": json(schemas, Errors.DetailedError, Errors.INVALID_PARAMETERS),
        "401": standard("Missing, malformed, expired or revoked credentials"),
        "403": standard(security === "admin" ? "Not an ADMIN API key" : "The key lacks the right for this operation")
      }
    case "metered":
      return {
        ...common,
        "400": json(schemas, Errors.DetailedError, Errors.INVALID_PARAMETERS),
        "401": standard("Authentication failed"),
        "402": {
          description: "Payment or balance required: INSUFFICIENT_BALANCE for API keys, the x402 discovery body " +
            "without credentials, or the PAYMENT_REQUIRED body for a wallet with too little credit",
          headers: { "PAYMENT-REQUIRED": { description: "base64 JSON of the x402 payment requirements", schema: { type: "string" } } },
          content: {
            "application/json": {
              schema: { oneOf: [Errors.StandardError, ...paymentRequired].map((schema) => register(schemas, schema)) }
            }
          }
        },
        "403": standard("Unauthorized access"),
        "502": standard("Upstream failed"),
        "503": standard("Service unavailable; retry with exponential backoff"),
        "504": standard("Upstream timed out")
      }
  }
}

const securityOf = (security: Route.Docs["security"], wallets: boolean) => {
  switch (security) {
    case "public":
      return []
    case "key":
    case "admin":
      return wallets ? [{ bearer: [] }, { siwx: [] }] : [{ bearer: [] }]
    case "metered":
      return [{ bearer: [] }, { siwx: [] }]
  }
}

const queryParameters = (schemas: Record<string, unknown>, query: Schema.Top) => {
  const shape = register(schemas, query) as { properties?: Record<string, unknown>; required?: Array<string> }
  return Object.entries(shape.properties ?? {}).map(([name, schema]) => ({
    name,
    in: "query",
    required: shape.required?.includes(name) ?? false,
    schema
  }))
}

/**
 * The document of a list of routes. Routes without docs are listed with their method and path
 * only, so coverage is complete even before a route is described.
 *
 * @category constructors
 */
export const make = (routes: ReadonlyArray<Route.Route<any>>, options: Options): Document => {
  const schemas: Record<string, unknown> = {}
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const docs = route.docs
    const operation: Record<string, unknown> = {
      operationId: `${route.method.toLowerCase()}${
        toOpenApiPath(route.path).replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())
      }`,
      summary: docs?.summary ?? `${route.method} ${toOpenApiPath(route.path)}`,
      tags: docs?.tags ?? [],
      security: securityOf(docs?.security ?? "public", docs?.wallets === true),
      parameters: [
        ...pathParameters(route.path),
        ...(docs?.query === undefined ? [] : queryParameters(schemas, docs.query)),
        ...(docs?.headers ?? []).map((header) => ({
          name: header.name,
          in: "header",
          required: header.required ?? false,
          description: header.description,
          schema: { type: "string" }
        }))
      ],
      responses: {
        ...errorResponses(schemas, docs?.security ?? "public", options.paymentRequiredSchemas ?? []),
        ...Object.fromEntries(
          Object.entries(docs?.responses ?? { 200: { description: "Success" } }).map(([status, response]) => [
            status,
            response.schema === undefined
              ? { description: response.description }
              : json(schemas, response.schema, response.description, response.contentType)
          ])
        )
      }
    }
    if (docs?.description !== undefined) operation["description"] = docs.description
    if (docs?.deprecated === true) operation["deprecated"] = true
    const requestSchema = docs?.request === undefined ? undefined : register(schemas, docs.request.schema)
    if (docs?.request !== undefined) {
      operation["requestBody"] = { required: true, content: { [docs.request.contentType]: { schema: requestSchema } } }
    }
    if (docs?.security === "metered" && options.x402 !== undefined && X402.paymentsEnabled(options.x402.config)) {
      operation["x-x402"] = x402Payment(options.x402, route, docs)
    }
    const path = toOpenApiPath(route.path)
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "tollgate",
      version: options.version,
      description
    },
    servers: [{ url: options.publicOrigin }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "API key" },
        siwx: {
          type: "apiKey",
          in: "header",
          name: "SIGN-IN-WITH-X",
          description: "base64 JSON of a signed SIWX message (legacy header X-Sign-In-With-X is also accepted)"
        }
      }
    }
  }
}
