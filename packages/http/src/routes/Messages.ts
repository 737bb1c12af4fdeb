/**
 * `POST /messages` and `POST /messages/count_tokens`: Anthropic's Messages API over the chat
 * models, so `@anthropic-ai/sdk` (its `baseURL` the server's `/api`) and the coding agents built on
 * it work unchanged. A request is translated into a chat completion and runs as one (`ChatCall`,
 * shared with `/chat/completions` and `/responses`): the same models, upstreams, options,
 * admission, limits and price per token, so a call costs what the same conversation costs on
 * `/chat/completions` (usage sku `chat:<model>`). The key may come as `x-api-key`, as the SDK sends
 * it; `anthropic-version` is read (a malformed one is a 400); failures are in Anthropic's error
 * shape (`ErrorResponse.renderAnthropic`).
 *
 * **Details**
 *
 * Translation: `system` is a system message; `messages` alternate `user` and `assistant`, their
 * content a string or blocks: `text`, `image` (base64 or URL, an `image_url` part: the upstream
 * decides whether the model takes images), `document` (a text part: plain text, text blocks, or the
 * text of a base64 PDF extracted as `/augment/text-parser` extracts it, since the OpenAI-compatible
 * upstreams take no PDF), `tool_use` (an assistant message's `tool_calls`), `tool_result` (a `tool`
 * message, its text), and `thinking` and `redacted_thinking` (accepted, not sent upstream).
 * `max_tokens`, `stop_sequences` (`stop`), `temperature`, `top_p` and `top_k` carry over; `tools`
 * become function tools, `tool_choice` `auto`/`any`/`tool`/`none` chat's `auto`/`required`/the
 * function/`none`, and `disable_parallel_tool_use` turns off parallel calls; `models` names
 * fallback models as on chat; `thinking` turned off is chat's `disable_thinking`, turned on it
 * sends the model's reasoning back as thinking blocks. Server tools, a document by URL or file id,
 * `container` and `mcp_servers` are not translated: each is a 400 naming its field.
 *
 * The answer is a `message`: a `thinking` block when thinking is on and the model reasoned apart
 * (its `signature` empty: nothing signs it), a `text` block, then a `tool_use` block per call the
 * model made, its `stop_reason` from the chat finish reason (`end_turn`, `max_tokens`, `tool_use`,
 * or `stop_sequence` when the upstream names the sequence that matched), and `usage` (input tokens
 * without the cached ones, which are `cache_read_input_tokens`, output tokens and tollgate's
 * `cost`). Streamed, it is Anthropic's event sequence: `message_start`, per block a
 * `content_block_start`, its `thinking_delta`s, `text_delta`s or `input_json_delta`s and
 * `content_block_stop`, then `message_delta` with the stop reason and the usage that was billed,
 * and `message_stop`. `count_tokens` answers the prompt's tokens as the hold counts them, for free.
 *
 * @since 0.1.0
 */
import * as ChatBackend from "@tollgate/backends/ChatBackend"
import { ChatOptions, Errors, Models, ThinkStripper } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Effect, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as ChatCall from "../ChatCall.ts"
import { isObject, type Json, MAX_BODY, newTally, preparer, REASONING_FIELDS, recordUsage, upstreamFailure } from "../ChatCall.ts"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"

const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })

const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  source: Schema.Union([
    Schema.Struct({
      type: Schema.Literal("base64"),
      media_type: Schema.Literals(["image/jpeg", "image/png", "image/gif", "image/webp"]),
      data: Schema.String.check(Schema.isMinLength(1))
    }),
    Schema.Struct({ type: Schema.Literal("url"), url: Schema.String.check(Schema.isMinLength(1)) })
  ])
})

const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String.check(Schema.isMinLength(1)),
  name: Schema.String.check(Schema.isMinLength(1)),
  input: Schema.Record(Schema.String, Schema.Unknown)
})

const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String.check(Schema.isMinLength(1)),
  content: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(TextBlock)])),
  is_error: Schema.optionalKey(Schema.Boolean)
})

/** Earlier thinking sent back with its turn: accepted, and not sent upstream (see `messagesOf`). */
const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.optionalKey(Schema.String)
})

const RedactedThinkingBlock = Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String })

/**
 * A document: plain text, text blocks, or a base64 PDF whose text is extracted here (the upstream
 * takes text). A PDF by URL or a Files API id is refused (`refusedDocument`).
 */
const DocumentBlock = Schema.Struct({
  type: Schema.Literal("document"),
  source: Schema.Union([
    Schema.Struct({ type: Schema.Literal("text"), media_type: Schema.Literal("text/plain"), data: Schema.String }),
    Schema.Struct({ type: Schema.Literal("content"), content: Schema.Union([Schema.String, Schema.Array(TextBlock)]) }),
    Schema.Struct({
      type: Schema.Literal("base64"),
      media_type: Schema.Literal("application/pdf"),
      data: Schema.String.check(Schema.isMinLength(1))
    })
  ]),
  title: Schema.optionalKey(Schema.NullOr(Schema.String)),
  context: Schema.optionalKey(Schema.NullOr(Schema.String))
})

const Block = Schema.Union([TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock, DocumentBlock])

const Message = Schema.Struct({
  role: Schema.Literals(["user", "assistant"]),
  content: Schema.Union([Schema.String, Schema.Array(Block)])
})

/** A client tool; server tools (`web_search_...`, `bash_...`) have another `type` and are refused (`refusedTool`). */
const Tool = Schema.Struct({
  type: Schema.optionalKey(Schema.Literal("custom")),
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  description: Schema.optionalKey(Schema.String),
  input_schema: Schema.Record(Schema.String, Schema.Unknown)
})

const ToolChoice = Schema.Union([
  Schema.Struct({ type: Schema.Literals(["auto", "any", "none"]), disable_parallel_tool_use: Schema.optionalKey(Schema.Boolean) }),
  Schema.Struct({ type: Schema.Literal("tool"), name: Schema.String, disable_parallel_tool_use: Schema.optionalKey(Schema.Boolean) })
])

const ModelName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512))

/** Anthropic's smallest thinking budget. */
const MIN_THINKING_BUDGET = 1024

/** Whether thinking comes back (`omitted`: only Anthropic's signature would, and nothing signs here). */
const Display = Schema.optionalKey(Schema.NullOr(Schema.Literals(["summarized", "omitted"])))

/** Thinking on with a budget, on as the model decides (`adaptive`, `between_tools`), or off. */
const Thinking = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("enabled"),
    budget_tokens: Schema.Int.check(Schema.isGreaterThanOrEqualTo(MIN_THINKING_BUDGET)),
    display: Display
  }),
  Schema.Struct({ type: Schema.Literals(["adaptive", "between_tools"]), display: Display }),
  Schema.Struct({ type: Schema.Literal("disabled") })
])

/** Whether the model's reasoning goes back as thinking blocks. */
const showsThinking = (thinking: typeof Thinking.Type | undefined): boolean =>
  thinking !== undefined && thinking.type !== "disabled" && thinking.display !== "omitted"

const fields = {
  model: ModelName,
  /** Fallback models, as on chat (`ChatCall`): tried in order while nothing was sent. */
  models: Schema.optionalKey(Schema.Array(ModelName).check(Schema.isMinLength(1), Schema.isMaxLength(ChatOptions.MAX_MODELS))),
  messages: Schema.Array(Message).check(Schema.isMinLength(1)),
  system: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(TextBlock)])),
  tools: Schema.optionalKey(Schema.Array(Tool)),
  tool_choice: Schema.optionalKey(ToolChoice),
  thinking: Schema.optionalKey(Thinking),
  service_parameters: Schema.optionalKey(ChatOptions.ServiceParameters)
}

/**
 * The request fields this route reads; `metadata` and `service_tier` are accepted and have no
 * effect.
 *
 * @category schemas
 */
export const Request = Schema.Struct({
  ...fields,
  max_tokens: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  stop_sequences: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isMinLength(1)))),
  temperature: Schema.optionalKey(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))),
  top_p: Schema.optionalKey(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))),
  top_k: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  stream: Schema.optionalKey(Schema.Boolean)
}).annotate({ identifier: "MessagesRequest" })

/** @category schemas */
export const CountTokensRequest = Schema.Struct(fields).annotate({ identifier: "MessagesCountTokensRequest" })

const Usage = Schema.Struct({
  input_tokens: Schema.Int,
  output_tokens: Schema.Int,
  cache_read_input_tokens: Schema.Int,
  cache_creation_input_tokens: Schema.Int,
  cost: Schema.Finite.annotate({ description: "What the call was charged, in USD (to the nano-USD, as the ledger captured it)" })
})

/** @category schemas */
export const Response = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("assistant"),
  model: Schema.String,
  content: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
  stop_reason: Schema.NullOr(Schema.Literals(["end_turn", "max_tokens", "stop_sequence", "tool_use"])),
  stop_sequence: Schema.NullOr(Schema.String),
  usage: Usage
}).annotate({ identifier: "Message" })

type Body = typeof CountTokensRequest.Type & Partial<typeof Request.Type>

/** Fields of Anthropic's request this translation cannot honor. */
const unsupported = ["container", "mcp_servers"] as const

/** The text of each base64 PDF of a request, extracted before it is translated. */
type Documents = ReadonlyMap<typeof DocumentBlock.Type, string>

const textOf = (blocks: ReadonlyArray<typeof TextBlock.Type>) => blocks.map((block) => block.text).join("\n")

const imagePart = (block: typeof ImageBlock.Type) => ({
  type: "image_url",
  image_url: { url: block.source.type === "url" ? block.source.url : `data:${block.source.media_type};base64,${block.source.data}` }
})

/** A document as the text part the upstream reads: its title and context, then its text. */
const documentPart = (block: typeof DocumentBlock.Type, documents: Documents) => {
  const { source } = block
  const text = source.type === "text"
    ? source.data
    : source.type === "content"
    ? typeof source.content === "string" ? source.content : textOf(source.content)
    : documents.get(block) ?? ""
  const head = [block.title, block.context].filter((line): line is string => typeof line === "string" && line !== "")
  return { type: "text", text: head.length === 0 ? text : `${head.join("\n")}\n\n${text}` }
}

/**
 * The chat messages of one Anthropic message: a user's tool results become `tool` messages (first,
 * as they answer the calls of the assistant message before), its text, images and documents one
 * user message; an assistant's text its content and its `tool_use` blocks its `tool_calls`. An
 * assistant's earlier thinking is not sent: the chat templates of reasoning models drop earlier
 * turns' reasoning, and some upstreams refuse it in a request.
 */
const messagesOf = (message: typeof Message.Type, documents: Documents): Array<Json> => {
  if (typeof message.content === "string") return [{ role: message.role, content: message.content }]
  const blocks = message.content
  if (message.role === "assistant") {
    const text = blocks.flatMap((block) => block.type === "text" ? [block.text] : []).join("")
    const calls = blocks.flatMap((block) =>
      block.type === "tool_use"
        ? [{ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input) } }]
        : []
    )
    return [{
      role: "assistant",
      content: text === "" && calls.length > 0 ? null : text,
      ...(calls.length > 0 ? { tool_calls: calls } : {})
    }]
  }
  const results = blocks.flatMap((block) =>
    block.type === "tool_result"
      ? [{
        role: "tool",
        tool_call_id: block.tool_use_id,
        content: typeof block.content === "string" ? block.content : textOf(block.content ?? [])
      }]
      : []
  )
  const parts = blocks.flatMap((block): ReadonlyArray<Json> =>
    block.type === "text"
      ? [{ type: "text", text: block.text }]
      : block.type === "image"
      ? [imagePart(block)]
      : block.type === "document"
      ? [documentPart(block, documents)]
      : []
  )
  return [...results, ...(parts.length > 0 ? [{ role: "user", content: parts }] : [])]
}

const chatToolChoice = (choice: typeof ToolChoice.Type) =>
  choice.type === "tool" ? { type: "function", function: { name: choice.name } } : choice.type === "any" ? "required" : choice.type

/**
 * The chat completion body of a Messages request.
 *
 * @category decoding
 */
export const chatBody = (body: Body, documents: Documents = new Map()): Json => ({
  model: body.model,
  ...(body.models === undefined ? {} : { models: body.models }),
  messages: [
    ...(body.system === undefined
      ? []
      : [{ role: "system", content: typeof body.system === "string" ? body.system : textOf(body.system) }]),
    ...body.messages.flatMap((message) => messagesOf(message, documents))
  ],
  ...(body.max_tokens === undefined ? {} : { max_tokens: body.max_tokens }),
  ...(body.stop_sequences === undefined || body.stop_sequences.length === 0 ? {} : { stop: body.stop_sequences }),
  ...(body.temperature === undefined ? {} : { temperature: body.temperature }),
  ...(body.top_p === undefined ? {} : { top_p: body.top_p }),
  ...(body.top_k === undefined ? {} : { top_k: body.top_k }),
  ...(body.tools === undefined || body.tools.length === 0 ? {} : {
    tools: body.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description === undefined ? {} : { description: tool.description }),
        parameters: tool.input_schema
      }
    }))
  }),
  ...(body.tool_choice === undefined ? {} : { tool_choice: chatToolChoice(body.tool_choice) }),
  ...(body.tool_choice?.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {}),
  // Thinking turned off is chat's `disable_thinking`: the model is asked not to think, and what
  // it thinks anyway is stripped. Turned on, the model thinks as its upstream has it: a budget
  // has no OpenAI-compatible field, so it is not sent.
  ...(body.thinking?.type === "disabled"
    ? { service_parameters: { ...body.service_parameters, disable_thinking: true } }
    : body.service_parameters === undefined
    ? {}
    : { service_parameters: body.service_parameters }),
  stream: body.stream === true,
  ...(body.stream === true ? { stream_options: { include_usage: true } } : {})
})

const VERSION = /^\d{4}-\d{2}-\d{2}$/u

const notTranslated = "Not translated by this service's Messages API"

/**
 * The first server tool of a raw request, refused with a pointer to the service's own search:
 * tools whose `type` is not `custom` run on Anthropic's side.
 */
const refusedTool = (record: Json): Errors.InvalidRequest | undefined => {
  const tools = Array.isArray(record["tools"]) ? record["tools"] : []
  const index = tools.findIndex((tool: unknown) => isObject(tool) && tool["type"] !== undefined && tool["type"] !== "custom")
  if (index < 0) return undefined
  const type = String((tools[index] as Json)["type"])
  return Errors.invalidField(
    ["tools", index, "type"],
    `Server tools (${type}) are not translated by this service's Messages API` +
      (type.startsWith("web_search") ? "; for a web search use service_parameters.enable_web_search" : "")
  )
}

/** The first document of a raw request whose source is not translated: a PDF by URL, a Files API id. */
const refusedDocument = (record: Json): Errors.InvalidRequest | undefined => {
  const messages = Array.isArray(record["messages"]) ? record["messages"] : []
  for (const [m, message] of messages.entries()) {
    const content = isObject(message) && Array.isArray(message["content"]) ? message["content"] : []
    for (const [b, block] of content.entries()) {
      if (!isObject(block) || block["type"] !== "document" || !isObject(block["source"])) continue
      const type = block["source"]["type"]
      if (type === "url" || type === "file") {
        return Errors.invalidField(
          ["messages", m, "content", b, "source", "type"],
          `A document by ${type === "url" ? "URL" : "file id"} is not translated: send it as base64 or text`
        )
      }
    }
  }
  return undefined
}

/**
 * The text of each base64 PDF of a request, extracted the way `/augment/text-parser` extracts it; a
 * PDF that cannot be read is a 400 naming its block.
 */
const extractDocuments = (
  extractor: DocumentExtractor.DocumentExtractor["Service"],
  messages: ReadonlyArray<typeof Message.Type>
): Effect.Effect<Documents, Errors.InvalidRequest> => {
  const pdfs = messages.flatMap((message, m) =>
    typeof message.content === "string" ?
      [] :
      message.content.flatMap((block, b) =>
        block.type === "document" && block.source.type === "base64"
          ? [{ block, data: block.source.data, path: ["messages", m, "content", b, "source", "data"] }]
          : []
      )
  )
  if (pdfs.length === 0) return Effect.succeed(new Map())
  return Effect.map(
    Effect.forEach(pdfs, ({ block, data, path }) =>
      extractor.extract(Buffer.from(data, "base64")).pipe(
        Effect.map((extracted) => [block, extracted.text] as const),
        Effect.mapError((error) => Errors.invalidField(path, `The PDF could not be read: ${error.message}`))
      )),
    (entries) => new Map(entries)
  )
}

/**
 * Reads the body with `schema`, after the `anthropic-version` header, refuses what is not
 * translated, and extracts the text of its PDFs.
 */
const decodeWith = <A extends Body>(schema: Schema.Decoder<A>, extractor: DocumentExtractor.DocumentExtractor["Service"]) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const version = request.headers["anthropic-version"]
    if (version !== undefined && !VERSION.test(version)) {
      return yield* new Errors.InvalidRequest({ message: "anthropic-version must be a date such as 2023-06-01" })
    }
    const raw = yield* RequestBody.json(MAX_BODY)
    const record = isObject(raw) ? raw : {}
    const refused = unsupported.find((field) => record[field] !== undefined && record[field] !== null)
    if (refused !== undefined) return yield* Errors.invalidField([refused], notTranslated)
    const refusal = refusedTool(record) ?? refusedDocument(record)
    if (refusal !== undefined) return yield* refusal
    const body = yield* RequestBody.decode(schema, raw)
    const { max_tokens, thinking } = body
    if (thinking?.type === "enabled" && max_tokens !== undefined && thinking.budget_tokens >= max_tokens) {
      return yield* Errors.invalidField(["thinking", "budget_tokens"], "Must be less than max_tokens")
    }
    return { body, documents: yield* extractDocuments(extractor, body.messages) }
  })

type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use"

/** Anthropic's stop reason of a chat choice; vLLM names the stop string that matched in `stop_reason`. */
const stopOf = (choice: Json, stops: ReadonlyArray<string>): { readonly reason: StopReason; readonly sequence: string | null } => {
  const matched = choice["stop_reason"]
  if (typeof matched === "string" && stops.includes(matched)) return { reason: "stop_sequence", sequence: matched }
  const finish = choice["finish_reason"]
  return { reason: finish === "length" ? "max_tokens" : finish === "tool_calls" ? "tool_use" : "end_turn", sequence: null }
}

const inputOf = (args: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(args)
    return isObject(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

const usageOf = (produced: ChatCall.Priced, call: ChatCall.Call) => ({
  input_tokens: (produced.usage.promptTokens ?? 0) - produced.cachedTokens,
  output_tokens: produced.usage.completionTokens ?? 0,
  cache_read_input_tokens: produced.cachedTokens,
  cache_creation_input_tokens: 0,
  cost: call.cost(produced)
})

const docsHeaders = [
  { name: "x-api-key", description: "The API key, as Anthropic's SDK sends it (or Authorization: Bearer <key>)" },
  { name: "anthropic-version", description: "Read and checked (a date such as 2023-06-01); the translation is the same for every version" }
]

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/messages",
  kind: "text",
  settlesActual: true,
  errorShape: "anthropic",
  serve: Effect.gen(function*() {
    const prepare = yield* preparer
    const backend = yield* ChatBackend.ChatBackend
    const extractor = yield* DocumentExtractor.DocumentExtractor
    const decode = Effect.gen(function*() {
      const { body, documents } = yield* decodeWith(Request, extractor)
      const plan = yield* prepare(yield* Effect.fromResult(ChatOptions.parseRequest(chatBody(body, documents))))
      return { body, plan }
    })
    return yield* ChatCall.serve("msg_", decode, ({ body }, found, call) => {
      const { headers, model, price, request, strips, upstreamBody } = call.prepared
      const stops = body.stop_sequences ?? []
      // The model's reasoning goes out as thinking blocks only when the request turned thinking on:
      // the reasoning sent apart, then the think-tag blocks of its text.
      const thinks = showsThinking(body.thinking) && !strips
      const envelope = { id: call.id, type: "message", role: "assistant", model: model.id }

      const complete = () =>
        Effect.gen(function*() {
          const completion = yield* backend.complete({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = completion.upstream
          const tally = newTally()
          recordUsage(tally, completion.body["usage"])
          const choices = completion.body["choices"]
          const choice = Array.isArray(choices) && isObject(choices[0]) ? choices[0] : {}
          const message = isObject(choice["message"]) ? choice["message"] : {}
          const text = typeof message["content"] === "string" ? message["content"] : ""
          tally.pieces.push(text)
          let thought = ""
          for (const field of REASONING_FIELDS) {
            if (typeof message[field] === "string") {
              tally.pieces.push(message[field])
              thought += message[field]
            }
          }
          const calls = (Array.isArray(message["tool_calls"]) ? message["tool_calls"] : []).flatMap((called: unknown) =>
            isObject(called) && isObject(called["function"]) && typeof called["function"]["name"] === "string"
              ? [{
                type: "tool_use",
                id: typeof called["id"] === "string" ? called["id"] : `toolu_${call.id.slice(4)}`,
                name: called["function"]["name"],
                input: inputOf(typeof called["function"]["arguments"] === "string" ? called["function"]["arguments"] : "")
              }]
              : []
          )
          let shown = text
          if (strips) shown = ThinkStripper.strip(text)
          else if (thinks) {
            const splitter = ThinkStripper.make((inline) => void (thought += inline))
            shown = splitter.push(text) + splitter.flush()
          }
          const produced = price(found, tally)
          const stop = stopOf(choice, stops)
          return {
            response: HttpServerResponse.jsonUnsafe({
              ...envelope,
              content: [
                ...(thinks && thought !== "" ? [{ type: "thinking", thinking: thought, signature: "" }] : []),
                ...(shown === "" && calls.length > 0 ? [] : [{ type: "text", text: shown }]),
                ...calls
              ],
              stop_reason: stop.reason,
              stop_sequence: stop.sequence,
              usage: usageOf(produced, call)
            }, { headers }),
            ...produced
          } satisfies ChatCall.Answer
        })

      const stream = () =>
        Effect.gen(function*() {
          const upstream = yield* backend.stream({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = upstream.upstream
          const tally = newTally()
          // With thinking on, the think-tag blocks of the text are thought, not text.
          let inline = ""
          const stripper = ThinkStripper.make(thinks ? (thought) => void (inline += thought) : undefined)
          const splits = strips || thinks
          let blocks = 0
          // the block being streamed: thinking, text, or a tool call by its chat index
          let open: { readonly index: number; readonly kind: "thinking" | "text" | "tool"; readonly tool?: number } | undefined
          const tools = new Map<number, number>()
          let stop: { readonly reason: StopReason; readonly sequence: string | null } = { reason: "end_turn", sequence: null }
          const close = (): ReadonlyArray<Json> => {
            if (open === undefined) return []
            const closed = { type: "content_block_stop", index: open.index }
            open = undefined
            return [closed]
          }
          // the open block is always the last one started: starting one closes the one before
          const text = (piece: string): ReadonlyArray<Json> => {
            if (piece === "") return []
            const opening = open?.kind === "text" ? [] : [...close(), start({ type: "text", text: "" }, "text")]
            return [...opening, { type: "content_block_delta", index: blocks - 1, delta: { type: "text_delta", text: piece } }]
          }
          const thinking = (piece: string): ReadonlyArray<Json> => {
            if (piece === "") return []
            const opening = open?.kind === "thinking"
              ? []
              : [...close(), start({ type: "thinking", thinking: "", signature: "" }, "thinking")]
            return [...opening, { type: "content_block_delta", index: blocks - 1, delta: { type: "thinking_delta", thinking: piece } }]
          }
          const start = (block: Json, kind: "thinking" | "text" | "tool", tool?: number): Json => {
            open = tool === undefined ? { index: blocks++, kind } : { index: blocks++, kind, tool }
            if (tool !== undefined) tools.set(tool, open.index)
            return { type: "content_block_start", index: open.index, content_block: block }
          }
          const toolEvents = (deltas: unknown): ReadonlyArray<Json> =>
            (Array.isArray(deltas) ? deltas : []).flatMap((part: unknown): ReadonlyArray<Json> => {
              if (!isObject(part)) return []
              const index = typeof part["index"] === "number" ? part["index"] : 0
              const fn = isObject(part["function"]) ? part["function"] : {}
              const piece = typeof fn["arguments"] === "string" ? fn["arguments"] : ""
              tally.pieces.push(piece)
              const opening = tools.has(index) ? [] : [
                ...close(),
                start(
                  {
                    type: "tool_use",
                    id: typeof part["id"] === "string" ? part["id"] : `toolu_${call.id.slice(4)}_${index}`,
                    name: typeof fn["name"] === "string" ? fn["name"] : "",
                    input: {}
                  },
                  "tool",
                  index
                )
              ]
              return [
                ...opening,
                ...(piece === ""
                  ? []
                  : [{
                    type: "content_block_delta",
                    index: tools.get(index) ?? blocks - 1,
                    delta: { type: "input_json_delta", partial_json: piece }
                  }])
              ]
            })
          const rewrite = (chunk: ChatBackend.Json): ReadonlyArray<Json> => {
            const counted = ChatCall.tallyChunk(tally, chunk)
            if (counted === undefined) return []
            const { choice, delta, piece } = counted
            let thought = ""
            for (const field of REASONING_FIELDS) {
              if (typeof delta[field] === "string") thought += delta[field]
            }
            const finished = choice["finish_reason"] != null
            if (finished) stop = stopOf(choice, stops)
            const shown = splits ? stripper.push(piece) : piece
            const tail = splits && finished ? stripper.flush() : ""
            thought += inline
            inline = ""
            return [
              ...(thinks ? thinking(thought) : []),
              ...text(shown),
              ...text(tail),
              ...toolEvents(delta["tool_calls"])
            ]
          }
          const opening = {
            type: "message_start",
            message: {
              ...envelope,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: { input_tokens: call.prepared.promptTokens, output_tokens: 0 }
            }
          }
          return ChatCall.eventStream({
            opening: [opening],
            chunks: upstream.chunks,
            rewrite,
            closing: Effect.sync(() => {
              call.finished = true
              return [
                ...close(),
                {
                  type: "message_delta",
                  delta: { stop_reason: stop.reason, stop_sequence: stop.sequence },
                  usage: usageOf(price(found, tally), call)
                },
                { type: "message_stop" }
              ]
            }),
            failed: (error) => ({ type: "error", error: { type: "api_error", message: error.message } }),
            headers,
            produced: Effect.sync(() => price(found, tally))
          })
        })

      return body.stream === true ? stream() : complete()
    })
  }),
  docs: {
    summary: "Create a message (Anthropic Messages API)",
    description: "Anthropic's Messages API over the chat models (the SDK's baseURL is this server's /api): system, " +
      "messages of text, image, document (text, or a base64 PDF's extracted text), tool_use, tool_result and thinking " +
      "blocks, max_tokens, stop_sequences, temperature, top_p, top_k, tools and tool_choice, thinking (the model's " +
      "reasoning as thinking blocks), service_parameters (or the model suffix). Streamed with stream: true as Anthropic's " +
      "events (message_start ... message_stop, the billed usage in message_delta). Billed per token exactly like " +
      "/chat/completions. Server tools and documents by URL or file id are not translated. Errors are in Anthropic's shape.",
    tags: ["Chat"],
    headers: docsHeaders,
    request: { contentType: "application/json", schema: Request },
    responses: {
      200: {
        description: "The message (application/json), or with stream: true a text/event-stream of Anthropic's events",
        schema: Response,
        headers: Models.headerNames
      }
    }
  }
})

/**
 * `POST /api/v1/messages/count_tokens`: the prompt's tokens as the admission counts them (the
 * service's system prompt included); free, for a key.
 *
 * @category routes
 */
export const countTokens = {
  ...Route.make(
    "POST",
    "/api/v1/messages/count_tokens",
    Effect.gen(function*() {
      const auth = yield* Auth
      const prepare = yield* preparer
      const extractor = yield* DocumentExtractor.DocumentExtractor
      return Effect.gen(function*() {
        yield* Authenticate.requireKey(auth)
        const { body, documents } = yield* decodeWith(CountTokensRequest, extractor)
        const plan = yield* prepare(yield* Effect.fromResult(ChatOptions.parseRequest(chatBody(body, documents))))
        return HttpServerResponse.jsonUnsafe({ input_tokens: plan.candidates[0].promptTokens })
      })
    }),
    {
      summary: "Count a message's input tokens (Anthropic Messages API)",
      description: "The input tokens of a Messages request as this service counts and bills them (the service's system " +
        "prompt included). Free. Errors are in Anthropic's shape.",
      tags: ["Chat"],
      security: "key",
      headers: docsHeaders,
      request: { contentType: "application/json", schema: CountTokensRequest },
      responses: { 200: { description: "The count", schema: Schema.Struct({ input_tokens: Schema.Int }) } }
    }
  ),
  errorShape: "anthropic" as const
}

/** @category routes */
export const routes = [route, countTokens] as const
