/**
 * The MCP tools tollgate offers (`Mcp` serves them at `/mcp`): each is an HTTP route of the API
 * seen as a tool. A tool's input schema is the JSON Schema of the schema its route decodes with
 * (never written twice), its price is stated the way the route's 402 states it, in words in the
 * description and as data in `_meta["tollgate/price"]`, and a call becomes a request to that route:
 * the arguments as its body (or its path and query, for the RPC proxy and the free lists).
 *
 * The list is also what `/.well-known/x402` and other directories can publish: `list` answers it
 * for a set of routes and price tables.
 *
 * @since 0.1.0
 */
import { Money, Networks, type PricingEngine } from "@tollgate/core"
import { Schema } from "effect"
import type * as Route from "./Route.ts"
import * as Rpc from "./routes/Rpc.ts"
import * as TextParser from "./routes/TextParser.ts"
import * as ToolPrice from "./ToolPrice.ts"

/**
 * Where the MCP server answers (`Mcp` serves it; `Bazaar` lists its paid tools there).
 *
 * @category constants
 */
export const PATH = "/mcp"

/**
 * A JSON Schema object, as a tool's `inputSchema`.
 *
 * @category models
 */
export type JsonSchema = { readonly type: "object" } & Readonly<Record<string, unknown>>

/**
 * The HTTP request a tool call becomes.
 *
 * @category models
 */
export interface HttpCall {
  readonly method: Route.Method
  /** Path and query, under the API root as the routes name it. */
  readonly path: string
  readonly body?: { readonly json: unknown } | { readonly form: FormData } | undefined
}

/**
 * A tool: what `tools/list` shows and how `tools/call` reaches its route.
 *
 * @category models
 */
export interface Tool {
  readonly name: string
  readonly description: string
  readonly inputSchema: JsonSchema
  /** Absent: the tool is free. */
  readonly price?: ToolPrice.ToolPrice | undefined
  /** The route's request for the arguments, or the argument that cannot make one (`invalid`) and why. */
  readonly request: (args: Readonly<Record<string, unknown>>) => HttpCall | { readonly invalid: string; readonly message: string }
}

/**
 * The JSON Schema of an Effect Schema as a tool's input: the document's root, with the definitions
 * it references under `$defs` (a named root is inlined, since a tool's schema must be an object).
 *
 * @category constructors
 */
export const inputSchemaOf = (schema: Schema.Top): JsonSchema => {
  const document = Schema.toJsonSchemaDocument(schema)
  const definitions: Record<string, unknown> = { ...document.definitions }
  let root = document.schema as Record<string, unknown>
  const ref = root["$ref"]
  if (typeof ref === "string" && ref.startsWith("#/$defs/")) {
    root = { ...(definitions[ref.slice("#/$defs/".length)] as Record<string, unknown>) }
  }
  return {
    ...root,
    type: "object",
    ...(Object.keys(definitions).length === 0 ? {} : { $defs: definitions })
  }
}

const usd = (amount: Money.Nano) => Money.formatUsd(amount)

/** A JSON body tool over the route at `path`, its arguments the body (with `fixed` set over them). */
const jsonTool = (
  routes: ReadonlyMap<string, Route.Route<any>>,
  path: string,
  tool: {
    readonly name: string
    readonly description: string
    readonly price?: ToolPrice.ToolPrice | undefined
    readonly fixed?: Readonly<Record<string, unknown>>
  }
): ReadonlyArray<Tool> => {
  const route = routes.get(`POST ${path}`)
  const schema = route?.docs?.request?.schema
  if (route === undefined || schema === undefined) return []
  return [{
    name: tool.name,
    description: `${tool.description}${tool.price === undefined ? "" : ` ${tool.price.text}`}`,
    inputSchema: inputSchemaOf(schema),
    price: tool.price,
    request: (args) => ({ method: "POST", path, body: { json: { ...args, ...tool.fixed } } })
  }]
}

/** A free tool reading a public or key route with `GET`. */
const getTool = (
  routes: ReadonlyMap<string, Route.Route<any>>,
  path: string,
  tool: {
    readonly name: string
    readonly description: string
    readonly input?: Schema.Top
    readonly query?: (args: Readonly<Record<string, unknown>>) => string
  }
): ReadonlyArray<Tool> => {
  if (!routes.has(`GET ${path}`)) return []
  return [{
    name: tool.name,
    description: tool.description,
    inputSchema: tool.input === undefined ? { type: "object", properties: {} } : inputSchemaOf(tool.input),
    request: (args) => ({ method: "GET", path: `${path}${tool.query?.(args) ?? ""}` })
  }]
}

/** The RPC tool's arguments: the network of the path and the JSON-RPC item's method and params. */
const RpcArguments = Schema.Struct({
  network: Schema.Literals(Networks.slugs),
  method: Rpc.JsonRpcItem.fields.method,
  params: Rpc.JsonRpcItem.fields.params
})

/** The text parser's arguments: the document as base64 or as an embedded resource, instead of the form's file. */
const DocumentArguments = Schema.Struct({
  document: Schema.optionalKey(Schema.String.annotate({ description: "The document's bytes, base64", contentEncoding: "base64" })),
  resource: Schema.optionalKey(
    Schema.Struct({
      uri: Schema.String,
      mimeType: Schema.optionalKey(Schema.String),
      blob: Schema.optionalKey(Schema.String.annotate({ contentEncoding: "base64" })),
      text: Schema.optionalKey(Schema.String)
    }).annotate({ description: "An MCP embedded resource holding the document (blob or text)" })
  ),
  filename: Schema.optionalKey(Schema.String),
  response_format: TextParser.UploadForm.fields.response_format
})

const UsageArguments = Schema.Struct({
  limit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 500 })))
})

const textParserTool = (routes: ReadonlyMap<string, Route.Route<any>>, tables: PricingEngine.Tables): ReadonlyArray<Tool> => {
  const path = "/api/v1/augment/text-parser"
  if (!routes.has(`POST ${path}`)) return []
  const price = ToolPrice.flat(tables.textParser.perRequest)
  return [{
    name: "parse_document",
    description:
      `Extract the text of a PDF, DOCX, PPTX, XLSX or plain-text document, given as base64 in \`document\` or as an embedded resource in \`resource\`. ${price.text}`,
    inputSchema: inputSchemaOf(DocumentArguments),
    price,
    request: (args) => {
      const resource = args["resource"] as {
        readonly blob?: unknown
        readonly text?: unknown
        readonly mimeType?: unknown
        readonly uri?: unknown
      } | undefined
      const bytes = typeof args["document"] === "string"
        ? Buffer.from(args["document"], "base64")
        : typeof resource?.blob === "string"
        ? Buffer.from(resource.blob, "base64")
        : typeof resource?.text === "string"
        ? Buffer.from(resource.text)
        : undefined
      if (bytes === undefined) return { invalid: "document", message: "Required: the document as base64, or resource with blob or text" }
      const name = typeof args["filename"] === "string"
        ? args["filename"]
        : typeof resource?.uri === "string"
        ? resource.uri.split("/").pop() || "document"
        : "document"
      const form = new FormData()
      form.append(
        "file",
        new Blob([bytes], { type: typeof resource?.mimeType === "string" ? resource.mimeType : "application/octet-stream" }),
        name
      )
      if (typeof args["response_format"] === "string") form.append("response_format", args["response_format"])
      return { method: "POST", path, body: { form } }
    }
  }]
}

const rpcTool = (path: string, tables: PricingEngine.Tables): Tool => {
  const { multipliers, nanoPerCredit } = tables.rpc
  const price: ToolPrice.ToolPrice = {
    text: `Price: ${usd(nanoPerCredit)} USD per credit; a call costs its network's base credits times its method's tier ` +
      `(Standard ${multipliers.S}, Advanced ${multipliers.A}, Large ${multipliers.L}).`,
    data: { mode: "per_credit", usdPerCredit: usd(nanoPerCredit), multipliers }
  }
  return {
    name: "rpc",
    description: `One JSON-RPC 2.0 call to a node of a supported chain (see the list_networks tool). ${price.text}`,
    inputSchema: inputSchemaOf(RpcArguments),
    price,
    request: (args) => ({
      method: "POST",
      path: path.replace(":network", encodeURIComponent(String(args["network"]))),
      body: { json: { jsonrpc: "2.0", id: 1, method: args["method"], ...(args["params"] === undefined ? {} : { params: args["params"] }) } }
    })
  }
}

const builtIn = (routes: ReadonlyMap<string, Route.Route<any>>, tables: PricingEngine.Tables): ReadonlyArray<Tool> => {
  const rpcPath = "/api/v1/crypto/rpc/:network"
  return [
    ...jsonTool(routes, "/api/v1/chat/completions", {
      name: "chat_completion",
      description: "An OpenAI-compatible chat completion (not streamed): model and messages as in POST /chat/completions.",
      price: ToolPrice.perModel(
        "per million tokens",
        Object.entries(tables.chat.models).map(([id, p]) => [id, { input: p.inputPerMillion, output: p.outputPerMillion }])
      ),
      fixed: { stream: false }
    }),
    ...jsonTool(routes, "/api/v1/embeddings", {
      name: "embeddings",
      description: "Embedding vectors of one or more inputs, as POST /embeddings.",
      price: ToolPrice.perModel(
        "per million tokens",
        Object.entries(tables.media.embedding).map(([id, p]) => [id, { input: p.perMillionTokens }])
      )
    }),
    ...jsonTool(routes, "/api/v1/image/generate", {
      name: "generate_image",
      description: "Generate an image from a text prompt, answered as MCP image content.",
      price: ToolPrice.perModel("per image", Object.entries(tables.image.models).map(([id, p]) => [id, p.perImage])),
      fixed: { return_binary: true }
    }),
    ...jsonTool(routes, "/api/v1/audio/speech", {
      name: "speech",
      description: "Speech of a text in a model's voice, answered as MCP audio content.",
      price: ToolPrice.perModel(
        "per million characters",
        Object.entries(tables.media.speech).map(([id, p]) => [id, { input: p.perMillionCharacters }])
      )
    }),
    ...jsonTool(routes, "/api/v1/augment/search", {
      name: "web_search",
      description: "The results of a web search.",
      price: ToolPrice.flat(tables.operations.augmentSearch)
    }),
    ...jsonTool(routes, "/api/v1/augment/scrape", {
      name: "web_scrape",
      description: "The text of a public web page.",
      price: ToolPrice.flat(tables.operations.augmentScrape)
    }),
    ...textParserTool(routes, tables),
    ...(routes.has(`POST ${rpcPath}`) ? [rpcTool(rpcPath, tables)] : []),
    ...getTool(routes, "/api/v1/models", { name: "list_models", description: "The models, their specs and prices. Free." }),
    ...getTool(routes, "/api/v1/crypto/rpc/networks", { name: "list_networks", description: "The networks the rpc tool reaches. Free." }),
    ...getTool(routes, "/api/v1/billing/balance", {
      name: "balance",
      description: "What the caller's account may spend: an API key's account, or a wallet's credit (signed in with SIWX). Free."
    }),
    ...getTool(routes, "/api/v1/billing/usage-history", {
      name: "recent_usage",
      description: "The calling account's most recent usage entries, newest first (an ADMIN key, or a wallet signed in with SIWX). Free.",
      input: UsageArguments,
      query: (args) => typeof args["limit"] === "number" ? `?limit=${args["limit"]}` : ""
    })
  ]
}

/** An embedder's endpoint as a tool: its declared name, schema and price, its arguments the body. */
const declared = (route: Route.Route<any>, tool: Route.ToolDoc): Tool => ({
  name: tool.name,
  description: `${tool.description} ${tool.price.text}`,
  inputSchema: tool.inputSchema,
  price: tool.price,
  request: (args) =>
    route.method === "GET" || route.method === "DELETE"
      ? { method: route.method, path: `${route.path}?${new URLSearchParams(Object.entries(args).map(([k, v]) => [k, String(v)]))}` }
      : { method: route.method, path: route.path, body: { json: args } }
})

/**
 * The tools of a set of routes: tollgate's own metered operations and free lists that are among
 * them, then every declared endpoint (`OwnEndpoint`), each once by name.
 *
 * @category constructors
 */
export const list = (routes: ReadonlyArray<Route.Route<any>>, tables: PricingEngine.Tables): ReadonlyArray<Tool> => {
  const byKey = new Map(routes.map((route) => [`${route.method} ${route.path}`, route]))
  const tools = [...builtIn(byKey, tables), ...routes.flatMap((route) => route.tool === undefined ? [] : [declared(route, route.tool)])]
  const seen = new Set<string>()
  return tools.filter((tool) => !seen.has(tool.name) && seen.add(tool.name))
}
