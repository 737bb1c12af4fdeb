/**
 * Discovery of the paid resources, for agents and the directories that index them: the bazaar
 * extension (`@x402/extensions/bazaar`) of each paid operation, which every 402 of that operation
 * carries in `extensions.bazaar`, and `GET /.well-known/x402`, the list of every paid resource.
 *
 * **Details**
 *
 * An operation's extension is made once, from what its route documents (`Route.Docs`): the method,
 * the request's content type and JSON Schema (the schema the route decodes with), the declared
 * request example, and the schema and example of its 200 answer. The price is the 402's own
 * `accepts`. The list names each paid route of the application (tollgate's and an embedder's
 * declared endpoints, which are routes like any other), each paid MCP tool when the application
 * serves `/mcp` (`McpTools.list`, declared as the bazaar declares a tool), and any other paid
 * resource the embedder hands `App` (`Options.paidResources`).
 *
 * @since 0.1.0
 */
import { Money, PricingEngine, X402 } from "@tollgate/core"
import { declareDiscoveryExtension } from "@x402/extensions/bazaar"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as McpTools from "./McpTools.ts"
import * as Route from "./Route.ts"

/** The path of the list of paid resources. @category constants */
export const wellKnownPath = "/.well-known/x402"

/**
 * The bazaar extension of one operation, as `extensions.bazaar` of its 402 carries it.
 *
 * @category models
 */
export type Extension = Readonly<Record<string, unknown>>

/**
 * A paid resource as the list shows it (the shape of the bazaar's `DiscoveryResource`): its URL,
 * its protocol (`http`, `mcp`), what it offers to be paid with when its price is fixed, and its
 * bazaar declaration.
 *
 * @category models
 */
export interface Resource {
  readonly resource: string
  readonly type: string
  readonly x402Version: number
  readonly description?: string | undefined
  readonly mimeType?: string | undefined
  readonly method?: string | undefined
  /** The requirements of one call when its price is the same for every call; else empty. */
  readonly accepts: ReadonlyArray<X402.PaymentRequirements>
  /** `priceUsd` for a fixed price, else how the price is quoted. */
  readonly price: { readonly priceUsd: string } | { readonly quoted: string }
  readonly extensions: { readonly bazaar: Extension }
}

/**
 * The paid MCP tools of `routes` as resources: the MCP endpoint, the tool's name, description and
 * input schema in the bazaar's MCP declaration, and its price as the tool listing states it.
 *
 * @category constructors
 */
export const toolResources = (
  routes: ReadonlyArray<Route.Route<any>>,
  config: X402.Config,
  tables: PricingEngine.Tables
): ReadonlyArray<Resource> =>
  McpTools.list(routes, tables).flatMap((tool): Array<Resource> =>
    tool.price === undefined ? [] : [{
      resource: `${config.publicOrigin}${McpTools.PATH}`,
      type: "mcp",
      x402Version: X402.VERSION,
      description: tool.description,
      mimeType: "application/json",
      accepts: [],
      price: { quoted: tool.price.text },
      extensions: {
        bazaar: declareDiscoveryExtension({
          toolName: tool.name,
          description: tool.description,
          transport: "streamable-http",
          inputSchema: tool.inputSchema as Record<string, unknown>
        })["bazaar"] as unknown as Extension
      }
    }]
  )

/**
 * A schema as one self-contained JSON Schema: the bazaar nests it inside its own, where a `$ref`
 * to `#/$defs/…` would resolve against the outer document, so each reference is replaced by its
 * definition. A recursive definition stays a reference, to a definition kept beside it.
 */
const jsonSchema = (schema: Schema.Top): Record<string, unknown> => {
  const document = Schema.toJsonSchemaDocument(schema)
  const definitions = document.definitions as Record<string, unknown>
  const kept: Record<string, unknown> = {}
  const inline = (value: unknown, open: ReadonlySet<string>): unknown => {
    if (Array.isArray(value)) return value.map((item) => inline(item, open))
    if (typeof value !== "object" || value === null) return value
    const ref = (value as Record<string, unknown>)["$ref"]
    if (typeof ref === "string" && ref.startsWith("#/$defs/")) {
      const name = ref.slice("#/$defs/".length)
      if (open.has(name)) {
        kept[name] = definitions[name]
        return value
      }
      return inline(definitions[name], new Set([...open, name]))
    }
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, inline(inner, open)]))
  }
  const root = inline(document.schema, new Set()) as Record<string, unknown>
  return Object.keys(kept).length === 0 ? root : { ...root, $defs: kept }
}

const bodyTypeOf = (contentType: string): "json" | "form-data" | "text" =>
  contentType === "application/json" ? "json" : contentType === "multipart/form-data" ? "form-data" : "text"

const pathParameters = (path: string): ReadonlyArray<string> => [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map(([, name]) => name!)

/**
 * The bazaar extension of a paid route, made by `declareDiscoveryExtension` from its docs, with
 * the method and route template filled in (what the SDK's resource server adds per request).
 * `undefined` for a route that is not paid.
 *
 * @category constructors
 */
export const extension = (route: Route.Route<any>): Extension | undefined => {
  const docs = route.docs
  if (route.metered !== true || docs === undefined) return undefined
  const ok = docs.responses[200]
  const output = {
    ...(ok?.example === undefined ? {} : { example: ok.example }),
    ...(ok?.schema === undefined ? {} : { schema: jsonSchema(ok.schema) })
  }
  const params = pathParameters(route.path)
  const pathParams = params.length === 0 ? {} : {
    pathParamsSchema: { properties: Object.fromEntries(params.map((name) => [name, { type: "string" }])), required: params }
  }
  // A body whose schema is not documented (an embedder's endpoint validated by its own library) is
  // declared as any JSON object.
  const declared = route.method === "GET" || route.method === "DELETE"
    ? declareDiscoveryExtension({
      ...(docs.query === undefined ? {} : { inputSchema: jsonSchema(docs.query) }),
      ...pathParams,
      output
    })
    : declareDiscoveryExtension({
      bodyType: docs.request === undefined ? "json" : bodyTypeOf(docs.request.contentType),
      inputSchema: docs.request === undefined ? { type: "object" } : jsonSchema(docs.request.schema),
      ...(docs.request?.example === undefined ? {} : { input: docs.request.example as Record<string, unknown> }),
      ...pathParams,
      output
    })
  const bazaar = declared["bazaar"] as unknown as { readonly info: { readonly input: Record<string, unknown> } }
  return {
    ...bazaar,
    info: { ...bazaar.info, input: { ...bazaar.info.input, method: route.method } },
    ...(params.length === 0 ? {} : { routeTemplate: route.path })
  }
}

/**
 * The list of paid resources of `routes` at `config`'s origin, followed by `others`.
 *
 * @category constructors
 */
export const resources = (
  routes: ReadonlyArray<Route.Route<any>>,
  config: X402.Config,
  tables: PricingEngine.Tables | undefined,
  others: ReadonlyArray<Resource> = []
): ReadonlyArray<Resource> => [
  ...routes.flatMap((route): Array<Resource> => {
    const bazaar = extension(route)
    if (bazaar === undefined) return []
    const price = tables === undefined ? undefined : route.docs?.x402Price?.(tables)
    return [{
      resource: `${config.publicOrigin}${route.path}`,
      type: "http",
      x402Version: X402.VERSION,
      description: route.docs?.summary,
      mimeType: route.docs?.responses[200]?.contentType ?? "application/json",
      method: route.method,
      accepts: price === undefined ? [] : X402.endpointRequirements(config, price, route.docs?.x402SettlesActual === true),
      price: price === undefined
        ? { quoted: "per request: its 402 names the price of the call sent" }
        : { priceUsd: Money.formatUsd(price) },
      extensions: { bazaar }
    }]
  }),
  ...others
]

/**
 * `GET /.well-known/x402`: `version` and `resources` (the URLs), as the x402 discovery document
 * has them, and `items`, each resource as the bazaar lists it. Public and the same for every
 * caller; without wallet payments configured it lists nothing.
 *
 * @category routes
 */
export const routes = (
  paid: ReadonlyArray<Route.Route<any>>,
  others: ReadonlyArray<Resource> = []
): ReadonlyArray<Route.Route<never>> => [
  Route.make(
    "GET",
    wellKnownPath,
    Effect.gen(function*() {
      const config = yield* Effect.serviceOption(X402.X402Config)
      const tables = Option.getOrUndefined(yield* Effect.serviceOption(PricingEngine.PricingEngine))
      const mcp = paid.some((route) => route.path === McpTools.PATH) && Option.isSome(config) && tables !== undefined
        ? toolResources(paid, config.value, tables)
        : []
      const items = Option.isSome(config) && X402.paymentsEnabled(config.value)
        ? resources(paid, config.value, tables, [...mcp, ...others])
        : []
      const body = { version: 1, x402Version: X402.VERSION, resources: items.map((item) => item.resource), items }
      return Effect.sync(() => HttpServerResponse.jsonUnsafe(body, { headers: { "cache-control": "public, max-age=300" } }))
    }),
    {
      summary: "Every paid resource of this server, for x402 discovery (bazaar)",
      tags: ["Wallets (x402)"],
      security: "public",
      responses: { 200: { description: "The discovery document", schema: Schema.Record(Schema.String, Schema.Unknown) } }
    }
  )
]
