/**
 * The MCP server at `POST /mcp` (Streamable HTTP, stateless, JSON answers): tollgate's metered
 * operations and an embedder's declared endpoints as tools an agent can call and pay for
 * (`McpTools`). A tool call runs the one pipeline a request from the network runs: credentials,
 * rate limits, spend caps, idempotency, the abuse guard, the hold and the capture, the usage entry
 * and the request log.
 *
 * **Details**
 *
 * A tool call is a request to the tool's route through the application itself (`App.Dispatch`).
 * What the call carries becomes the route's request headers: the transport request's
 * `Authorization` and `SIGN-IN-WITH-X`; from the call's `_meta`, `x402/payment` (the x402 MCP
 * transport's payment payload) as `PAYMENT-SIGNATURE`, `sign-in-with-x` as `SIGN-IN-WITH-X` and
 * `idempotency-key` as `Idempotency-Key`. The route's answer becomes the tool result: a 402 is the
 * x402 MCP transport's payment-required result (`isError`, the `PaymentRequired` object of the
 * 402's `PAYMENT-REQUIRED` header in `structuredContent` and as text), any other error an `isError`
 * result holding the error body (a 400 names every wrong field), a success its JSON, image or
 * audio; the settlement's `PAYMENT-RESPONSE` is `_meta["x402/payment-response"]`. An unknown tool
 * is the protocol's invalid-params error. The SDK's server is used as it is, one per request, which
 * is what its stateless mode asks for.
 *
 * @since 0.1.0
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { CallToolRequestSchema, type CallToolResult, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Errors, PricingEngine, X402 } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { ByteSize, Effect, type Option, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { Dispatch } from "./App.ts"
import * as McpTools from "./McpTools.ts"
import * as RequestBody from "./RequestBody.ts"
import * as Route from "./Route.ts"
import { ServiceInfo } from "./ServiceInfo.ts"
import * as ToolPrice from "./ToolPrice.ts"

/**
 * Where the MCP server answers.
 *
 * @category constants
 */
export const PATH = McpTools.PATH

/**
 * The `_meta` keys a tool call and its result carry.
 *
 * @category constants
 */
export const meta = {
  /** In: an x402 `PaymentPayload` (x402's MCP transport). */
  payment: "x402/payment",
  /** Out: the x402 `SettlementResponse` of a payment. */
  paymentResponse: "x402/payment-response",
  /** In: a base64 SIWX proof, as the `SIGN-IN-WITH-X` header carries it. */
  signIn: "sign-in-with-x",
  /** In: the call's `Idempotency-Key`. */
  idempotencyKey: "idempotency-key",
  /** Out: the `x-request-id` of the route's answer, which its usage entry names. */
  requestId: "tollgate/request-id"
} as const

/** A base64 document of the text parser's largest size fits, with the call around it. */
const MAX_BODY = ByteSize.bytes(Math.ceil(DocumentExtractor.MAX_BYTES * 4 / 3) + 64 * 1024)

/** The transport request's headers a tool call passes on to its route. */
const passed = ["authorization", X402.headers.signIn, X402.headers.legacySignIn, "user-agent", "x-request-id"] as const

type Json = Readonly<Record<string, unknown>>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const decodeBase64Json = (header: string | null): unknown => {
  if (header === null) return undefined
  try {
    return JSON.parse(Buffer.from(header, "base64").toString("utf8"))
  } catch {
    return undefined
  }
}

const textResult = (value: unknown, isError: boolean, resultMeta: Json): CallToolResult => ({
  content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value) }],
  ...(isObject(value) ? { structuredContent: value } : {}),
  ...(isError ? { isError: true } : {}),
  _meta: resultMeta
})

/** The tool result of a route's answer. */
const resultOf = async (response: Response): Promise<CallToolResult> => {
  const settled = decodeBase64Json(response.headers.get(X402.headers.paymentResponse))
  const requestId = response.headers.get("x-request-id")
  const resultMeta: Json = {
    ...(requestId === null ? {} : { [meta.requestId]: requestId }),
    ...(settled === undefined ? {} : { [meta.paymentResponse]: settled })
  }
  const type = response.headers.get("content-type") ?? ""
  if (response.status === 402) {
    const required = decodeBase64Json(response.headers.get(X402.headers.paymentRequired))
    const body = await response.json().catch(() => undefined)
    return textResult(required ?? body, true, resultMeta)
  }
  if (!response.ok) {
    const text = await response.text()
    const body = type.startsWith("application/json") ? JSON.parse(text) as unknown : text
    return textResult(body, true, resultMeta)
  }
  if (type.startsWith("image/") || type.startsWith("audio/")) {
    const data = Buffer.from(await response.arrayBuffer()).toString("base64")
    const mimeType = type.split(";")[0]!
    return {
      content: [type.startsWith("image/") ? { type: "image", data, mimeType } : { type: "audio", data, mimeType }],
      _meta: resultMeta
    }
  }
  if (type.startsWith("application/json")) return textResult(await response.json(), false, resultMeta)
  return textResult(await response.text(), false, resultMeta)
}

/** The route's request headers of a tool call. */
const headersOf = (transport: Headers, callMeta: Json | undefined): Headers => {
  const headers = new Headers()
  for (const name of passed) {
    const value = transport.get(name)
    if (value !== null) headers.set(name, value)
  }
  const payment = callMeta?.[meta.payment]
  if (payment !== undefined) {
    headers.set(
      X402.headers.paymentSignature,
      typeof payment === "string" ? payment : Buffer.from(JSON.stringify(payment)).toString("base64")
    )
  }
  const signIn = callMeta?.[meta.signIn]
  if (typeof signIn === "string") headers.set(X402.headers.signIn, signIn)
  const key = callMeta?.[meta.idempotencyKey]
  if (typeof key === "string") headers.set("idempotency-key", key)
  return headers
}

/** A call whose arguments cannot make its route's request: the route's own 400, naming the argument. */
const invalidArguments = (invalid: string, message: string): CallToolResult => {
  const error = Errors.invalidParameters([{ path: [invalid], message }])
  return textResult({ error: error.message, details: error.details }, true, {})
}

/**
 * The route of the MCP server, serving the tools of every route of the application.
 *
 * @category routes
 */
export const route = Route.make(
  "POST",
  PATH,
  Effect.gen(function*() {
    const dispatch = yield* Dispatch
    const tables = yield* PricingEngine.PricingEngine
    const info = yield* ServiceInfo
    const tools = McpTools.list(dispatch.routes, tables)
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    const listed = tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      ...(tool.price === undefined ? {} : { _meta: { [ToolPrice.META_KEY]: tool.price.data } })
    }))

    const call = async (name: string, args: Json, callMeta: Json | undefined, transport: Headers, remoteAddress: Option.Option<string>) => {
      const tool = byName.get(name)
      if (tool === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`)
      const http = tool.request(args)
      if ("invalid" in http) return invalidArguments(http.invalid, http.message)
      const headers = headersOf(transport, callMeta)
      const body = http.body === undefined ? null : "json" in http.body ? JSON.stringify(http.body.json) : http.body.form
      if (http.body !== undefined && "json" in http.body) headers.set("content-type", "application/json")
      const response = await dispatch.fetch(new Request(new URL(http.path, info.publicOrigin), { method: http.method, headers, body }), {
        remoteAddress,
        tool: name
      })
      return resultOf(response)
    }

    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const body = yield* RequestBody.json(MAX_BODY)
      const transportHeaders = new Headers(Object.entries(request.headers))
      const server = new Server({ name: "tollgate", version: info.version }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }))
      server.setRequestHandler(
        CallToolRequestSchema,
        (toolCall) =>
          call(toolCall.params.name, toolCall.params.arguments ?? {}, toolCall.params._meta, transportHeaders, request.remoteAddress)
      )
      const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
      const response = yield* Effect.promise(async () => {
        await server.connect(transport)
        const web = new Request(new URL(PATH, info.publicOrigin), { method: "POST", headers: transportHeaders })
        return transport.handleRequest(web, { parsedBody: body })
      })
      // The answer is complete (JSON, not a stream): the server of this request is done.
      const text = yield* Effect.promise(() => response.text())
      yield* Effect.promise(() => server.close())
      return HttpServerResponse.text(text, {
        status: response.status,
        contentType: response.headers.get("content-type") ?? "application/json",
        headers: Object.fromEntries([...response.headers].filter(([name]) => name !== "content-type" && name !== "content-length"))
      })
    })
  }),
  {
    summary: "The MCP server: tollgate's paid operations as tools",
    description: "Model Context Protocol over Streamable HTTP (stateless). tools/list names each tool with its price; " +
      "tools/call runs the tool's route, paid with an API key (Authorization), a wallet's credit (SIGN-IN-WITH-X), or " +
      "per call with x402 in _meta[\"x402/payment\"] (see docs/mcp.md).",
    tags: ["MCP"],
    security: "public",
    request: { contentType: "application/json", schema: Schema.Unknown },
    responses: { 200: { description: "The JSON-RPC answer" } }
  }
)
