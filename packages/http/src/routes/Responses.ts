/**
 * `POST /responses`: OpenAI's Responses API, stateless, over the chat models. The request is
 * translated into a chat completion and runs as one (`ChatCall`): same checks, same options
 * (`service_parameters` or the model suffix), same admission, backend and price per token, so a
 * call costs what the same conversation costs on `/chat/completions`. Only the wire shapes differ.
 *
 * **Details**
 *
 * Translation: `input` is a string (one user message) or a list of items: messages (`role` and
 * `content`, a string or `input_text`/`output_text`/`input_image` parts; `developer` becomes
 * `system`, what chat upstreams understand), the model's earlier `function_call`s (an assistant
 * message's `tool_calls`) and their `function_call_output`s (`tool` messages). `instructions` is a
 * system message before them; `max_output_tokens` caps the completion; `temperature` and `top_p`
 * pass through; function `tools`, `tool_choice` and `parallel_tool_calls` become chat's. Nothing is
 * stored, so `previous_response_id` is refused, and so are the built-in tools (web search, file
 * search) and other item types (reasoning items), which this route does not translate; each is a
 * 400 naming the field.
 *
 * The answer is a `response` object whose `output` holds one assistant `message` of `output_text`
 * (and a `reasoning` item first when the model sent its reasoning apart and the options keep it),
 * then a `function_call` item per call the model made, with `usage` in input and output tokens.
 * Streamed, it is the Responses event sequence: `response.created`, `response.in_progress`,
 * `response.output_item.added`, `response.content_part.added`, `response.output_text.delta` per
 * piece (a call: its own `output_item.added` and `response.function_call_arguments.delta`s), then
 * the `.done` events and `response.completed` with the usage (reasoning a model streams apart is
 * billed but not sent as events). A client that leaves mid-stream pays for what passed through.
 *
 * @since 0.1.0
 */
import * as ChatBackend from "@tollgate/backends/ChatBackend"
import { ChatOptions, Errors, Models, ThinkStripper } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import * as ChatCall from "../ChatCall.ts"
import {
  isObject,
  type Json,
  MAX_BODY,
  newTally,
  preparer,
  REASONING_FIELDS,
  recordUsage,
  type Tally,
  upstreamFailure
} from "../ChatCall.ts"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"

const Part = Schema.Union([
  Schema.Struct({ type: Schema.Literals(["input_text", "output_text"]), text: Schema.String }),
  Schema.Struct({ type: Schema.Literal("input_image"), image_url: Schema.String, detail: Schema.optionalKey(Schema.String) })
])

const InputMessage = Schema.Struct({
  type: Schema.optionalKey(Schema.Literal("message")),
  role: Schema.Literals(["user", "assistant", "system", "developer"]),
  content: Schema.Union([Schema.String, Schema.Array(Part)])
})

/** A call the model made in an earlier turn, sent back with the conversation. */
const FunctionCall = Schema.Struct({
  type: Schema.Literal("function_call"),
  call_id: Schema.String.check(Schema.isMinLength(1)),
  name: Schema.String.check(Schema.isMinLength(1)),
  arguments: Schema.String
})

/** What the caller's function answered to a call. */
const FunctionCallOutput = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  call_id: Schema.String.check(Schema.isMinLength(1)),
  output: Schema.String
})

const InputItem = Schema.Union([InputMessage, FunctionCall, FunctionCallOutput])

/** A function the model may call; the Responses API's flat shape of chat's `{type, function}`. */
const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64)),
  description: Schema.optionalKey(Schema.NullOr(Schema.String)),
  parameters: Schema.optionalKey(Schema.NullOr(Schema.Record(Schema.String, Schema.Unknown))),
  strict: Schema.optionalKey(Schema.NullOr(Schema.Boolean))
})

const ToolChoice = Schema.Union([
  Schema.Literals(["auto", "none", "required"]),
  Schema.Struct({ type: Schema.Literal("function"), name: Schema.String })
])

/**
 * The request fields this route reads; others (`store`, `metadata`, `user`, `include`, `text`,
 * `reasoning`, `truncation`) are accepted and have no effect.
 *
 * @category schemas
 */
export const Request = Schema.Struct({
  model: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512)),
  models: Schema.optionalKey(
    Schema.Array(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512))).check(
      Schema.isMinLength(1),
      Schema.isMaxLength(ChatOptions.MAX_MODELS)
    )
  ),
  input: Schema.Union([Schema.String.check(Schema.isMinLength(1)), Schema.Array(InputItem).check(Schema.isMinLength(1))]),
  tools: Schema.optionalKey(Schema.Array(FunctionTool)),
  tool_choice: Schema.optionalKey(ToolChoice),
  parallel_tool_calls: Schema.optionalKey(Schema.NullOr(Schema.Boolean)),
  instructions: Schema.optionalKey(Schema.NullOr(Schema.String)),
  max_output_tokens: Schema.optionalKey(Schema.NullOr(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)))),
  temperature: Schema.optionalKey(Schema.NullOr(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 2 })))),
  top_p: Schema.optionalKey(Schema.NullOr(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })))),
  stream: Schema.optionalKey(Schema.NullOr(Schema.Boolean)),
  service_parameters: Schema.optionalKey(ChatOptions.ServiceParameters)
}).annotate({ identifier: "ResponsesRequest" })

const Usage = Schema.Struct({
  input_tokens: Schema.Int,
  output_tokens: Schema.Int,
  total_tokens: Schema.Int,
  input_tokens_details: Schema.Struct({ cached_tokens: Schema.Int }),
  output_tokens_details: Schema.Struct({ reasoning_tokens: Schema.Int }),
  cost: Schema.Finite.annotate({ description: "What the call was charged, in USD (to the nano-USD, as the ledger captured it)" })
})

/** @category schemas */
export const Response = Schema.StructWithRest(
  Schema.Struct({
    id: Schema.String,
    object: Schema.Literal("response"),
    created_at: Schema.Int,
    model: Schema.String,
    status: Schema.Literals(["completed", "in_progress", "incomplete"]),
    output: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
    usage: Schema.NullOr(Usage)
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "Response" })

/** Fields of the OpenAI request this stateless translation cannot honor. */
const unsupported = ["previous_response_id", "conversation", "prompt", "background"] as const

const chatContent = (content: typeof InputMessage.Type["content"]) =>
  typeof content === "string"
    ? content
    : content.map((part) =>
      part.type === "input_image" ? { type: "image_url", image_url: { url: part.image_url } } : { type: "text", text: part.text }
    )

/**
 * The chat messages of the input: a message as it is (`developer` as `system`), a run of function
 * calls as one assistant message with their `tool_calls`, a call's output as a `tool` message.
 */
const messagesOf = (input: ReadonlyArray<typeof InputItem.Type>): Array<Json> => {
  const messages: Array<Json> = []
  for (const item of input) {
    if (item.type === "function_call") {
      const call = { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } }
      const last = messages.at(-1)
      if (last !== undefined && last["role"] === "assistant" && Array.isArray(last["tool_calls"])) last["tool_calls"].push(call)
      else messages.push({ role: "assistant", content: null, tool_calls: [call] })
    } else if (item.type === "function_call_output") {
      messages.push({ role: "tool", tool_call_id: item.call_id, content: item.output })
    } else {
      messages.push({ role: item.role === "developer" ? "system" : item.role, content: chatContent(item.content) })
    }
  }
  return messages
}

const chatToolChoice = (choice: typeof ToolChoice.Type) =>
  typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } }

/**
 * The chat completion body of a Responses request.
 *
 * @category decoding
 */
export const chatBody = (body: typeof Request.Type): Json => ({
  model: body.model,
  ...(body.models === undefined ? {} : { models: body.models }),
  messages: [
    ...(body.instructions === undefined || body.instructions === null ? [] : [{ role: "system", content: body.instructions }]),
    ...(typeof body.input === "string" ? [{ role: "user", content: body.input }] : messagesOf(body.input))
  ],
  ...(body.max_output_tokens === undefined || body.max_output_tokens === null ? {} : { max_tokens: body.max_output_tokens }),
  ...(body.temperature === undefined || body.temperature === null ? {} : { temperature: body.temperature }),
  ...(body.top_p === undefined || body.top_p === null ? {} : { top_p: body.top_p }),
  ...(body.tools === undefined || body.tools.length === 0 ? {} : {
    tools: body.tools.map(({ type, ...fn }) => ({ type, function: fn }))
  }),
  ...(body.tool_choice === undefined ? {} : { tool_choice: chatToolChoice(body.tool_choice) }),
  ...(body.parallel_tool_calls === undefined || body.parallel_tool_calls === null ? {} : { parallel_tool_calls: body.parallel_tool_calls }),
  ...(body.service_parameters === undefined ? {} : { service_parameters: body.service_parameters }),
  stream: body.stream === true,
  ...(body.stream === true ? { stream_options: { include_usage: true } } : {})
})

/** An unsupported field is refused only when it asks for something: SDKs send some with their neutral value. */
const asksFor = (value: unknown) =>
  value !== undefined && value !== null && value !== false && !(Array.isArray(value) && value.length === 0)

const decodeRequest = Effect.fnUntraced(function*(raw: unknown) {
  const body = yield* RequestBody.decode(Request, raw)
  const record = raw as Record<string, unknown>
  const refused = unsupported.find((field) => asksFor(record[field]))
  if (refused === undefined) return body
  return yield* Errors.invalidField(
    [refused],
    refused === "previous_response_id" || refused === "conversation"
      ? "This API is stateless: send the whole conversation as input"
      : "Not supported by this service's Responses API; use /chat/completions"
  )
})

const usageOf = (produced: ChatCall.Priced, call: ChatCall.Call) => {
  const input = produced.usage.promptTokens ?? 0
  const output = produced.usage.completionTokens ?? 0
  return {
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output,
    input_tokens_details: { cached_tokens: produced.cachedTokens },
    output_tokens_details: { reasoning_tokens: 0 },
    cost: call.cost(produced)
  }
}

/** The parts of a response object that do not depend on what the model said. */
const envelope = (id: string, createdAt: number, prepared: ChatCall.Prepared, body: typeof Request.Type) => ({
  id,
  object: "response" as const,
  created_at: createdAt,
  model: prepared.model.id,
  error: null,
  incomplete_details: null,
  instructions: body.instructions ?? null,
  max_output_tokens: body.max_output_tokens ?? null,
  temperature: body.temperature ?? null,
  top_p: body.top_p ?? null,
  parallel_tool_calls: body.parallel_tool_calls ?? true,
  tool_choice: body.tool_choice ?? "auto",
  tools: body.tools ?? [],
  text: { format: { type: "text" } },
  store: false,
  metadata: {}
})

const messageItem = (id: string, text: string, status: "in_progress" | "completed") => ({
  type: "message",
  id,
  status,
  role: "assistant",
  content: status === "in_progress" ? [] : [{ type: "output_text", text, annotations: [] }]
})

const reasoningItem = (id: string, text: string) => ({ type: "reasoning", id, summary: [{ type: "summary_text", text }] })

/** A function call the model made, as the Responses API shows it. */
interface Call {
  readonly id: string
  readonly callId: string
  readonly name: string
  arguments: string
}

const callItem = (call: Call, status: "in_progress" | "completed") => ({
  type: "function_call",
  id: call.id,
  call_id: call.callId,
  name: call.name,
  arguments: status === "completed" ? call.arguments : "",
  status
})

const itemId = (prefix: string) => `${prefix}_${Crypto.randomUUID().replaceAll("-", "")}`

/** The function calls of a completed chat message. */
const callsOf = (message: Json): Array<Call> =>
  (Array.isArray(message["tool_calls"]) ? message["tool_calls"] : []).flatMap((call: unknown) =>
    isObject(call) && isObject(call["function"]) && typeof call["function"]["name"] === "string"
      ? [{
        id: itemId("fc"),
        callId: typeof call["id"] === "string" ? call["id"] : itemId("call"),
        name: call["function"]["name"],
        arguments: typeof call["function"]["arguments"] === "string" ? call["function"]["arguments"] : ""
      }]
      : []
  )

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/responses",
  kind: "text",
  settlesActual: true,
  serve: Effect.gen(function*() {
    const prepare = yield* preparer
    const backend = yield* ChatBackend.ChatBackend
    const decode = Effect.gen(function*() {
      const body = yield* decodeRequest(yield* RequestBody.json(MAX_BODY))
      const plan = yield* prepare(yield* Effect.fromResult(ChatOptions.parseRequest(chatBody(body))))
      return { body, plan }
    })
    return yield* ChatCall.serve("resp_", decode, ({ body }, found, call) => {
      const { prepared } = call
      const { headers, model, price, request, strips, upstreamBody } = prepared
      const id = call.id
      const messageId = `msg_${Crypto.randomUUID().replaceAll("-", "")}`
      const createdAt = Math.floor(Date.now() / 1000)
      const base = envelope(id, createdAt, prepared, body)

      const complete = () =>
        Effect.gen(function*() {
          const completion = yield* backend.complete({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = completion.upstream
          const tally = newTally()
          recordUsage(tally, completion.body["usage"])
          const choices = completion.body["choices"]
          const first = Array.isArray(choices) && isObject(choices[0]) && isObject(choices[0]["message"]) ? choices[0]["message"] : {}
          const content = typeof first["content"] === "string" ? first["content"] : ""
          tally.pieces.push(content)
          const reasoning = REASONING_FIELDS.map((field) => first[field]).filter((text): text is string => typeof text === "string")
          for (const piece of reasoning) tally.pieces.push(piece)
          const calls = callsOf(first)
          for (const call of calls) tally.pieces.push(call.arguments)
          const produced = price(found, tally)
          const output = [
            ...(strips || reasoning.length === 0 ? [] : [reasoningItem(`rs_${messageId.slice(4)}`, reasoning.join(""))]),
            ...(calls.length > 0 && content === ""
              ? []
              : [messageItem(messageId, strips ? ThinkStripper.strip(content) : content, "completed")]),
            ...calls.map((call) => callItem(call, "completed"))
          ]
          return {
            response: HttpServerResponse.jsonUnsafe({ ...base, status: "completed", output, usage: usageOf(produced, call) }, { headers }),
            ...produced
          } satisfies ChatCall.Answer
        })

      const stream = () =>
        Effect.gen(function*() {
          const upstream = yield* backend.stream({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = upstream.upstream
          const tally: Tally = newTally()
          const stripper = ThinkStripper.make()
          let sequence = 0
          let text = ""
          const event = (type: string, fields: Json): Json => ({ type, sequence_number: sequence++, ...fields })
          const at = { item_id: messageId, output_index: 0, content_index: 0 }
          const delta = (piece: string): ReadonlyArray<Json> => {
            if (piece === "") return []
            text += piece
            return [event("response.output_text.delta", { ...at, delta: piece, logprobs: [] })]
          }
          // function calls stream as chat tool-call deltas by index: the first names the call, the rest add arguments
          const calls = new Map<number, Call>()
          const callEvents = (deltas: unknown): ReadonlyArray<Json> =>
            (Array.isArray(deltas) ? deltas : []).flatMap((part: unknown): ReadonlyArray<Json> => {
              if (!isObject(part)) return []
              const index = typeof part["index"] === "number" ? part["index"] : 0
              const fn = isObject(part["function"]) ? part["function"] : {}
              const piece = typeof fn["arguments"] === "string" ? fn["arguments"] : ""
              tally.pieces.push(piece)
              const known = calls.get(index)
              const call = known ?? {
                id: itemId("fc"),
                callId: typeof part["id"] === "string" ? part["id"] : itemId("call"),
                name: typeof fn["name"] === "string" ? fn["name"] : "",
                arguments: ""
              }
              call.arguments += piece
              // the message is output 0; calls follow in the order they began
              const outputIndex = known === undefined ? calls.size + 1 : [...calls.keys()].indexOf(index) + 1
              if (known === undefined) calls.set(index, call)
              return [
                ...(known === undefined
                  ? [event("response.output_item.added", { output_index: outputIndex, item: callItem(call, "in_progress") })]
                  : []),
                ...(piece === ""
                  ? []
                  : [event("response.function_call_arguments.delta", { item_id: call.id, output_index: outputIndex, delta: piece })])
              ]
            })
          const rewrite = (chunk: ChatBackend.Json): ReadonlyArray<Json> => {
            const counted = ChatCall.tallyChunk(tally, chunk)
            if (counted === undefined) return []
            const { choice, piece } = counted
            return [
              ...delta(strips ? stripper.push(piece) : piece),
              ...(strips && choice["finish_reason"] != null ? delta(stripper.flush()) : []),
              ...callEvents(counted.delta["tool_calls"])
            ]
          }
          const opening = [
            event("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } }),
            event("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } }),
            event("response.output_item.added", { output_index: 0, item: messageItem(messageId, "", "in_progress") }),
            event("response.content_part.added", { ...at, part: { type: "output_text", text: "", annotations: [] } })
          ]
          const closing = Effect.sync(() => {
            call.finished = true
            const item = messageItem(messageId, text, "completed")
            const called = [...calls.values()]
            return [
              event("response.output_text.done", { ...at, text, logprobs: [] }),
              event("response.content_part.done", { ...at, part: { type: "output_text", text, annotations: [] } }),
              event("response.output_item.done", { output_index: 0, item }),
              ...called.flatMap((call, i) => [
                event("response.function_call_arguments.done", { item_id: call.id, output_index: i + 1, arguments: call.arguments }),
                event("response.output_item.done", { output_index: i + 1, item: callItem(call, "completed") })
              ]),
              event("response.completed", {
                response: {
                  ...base,
                  status: "completed",
                  output: [item, ...called.map((call) => callItem(call, "completed"))],
                  usage: usageOf(price(found, tally), call)
                }
              })
            ]
          })
          return ChatCall.eventStream({
            opening,
            chunks: upstream.chunks,
            rewrite,
            closing,
            failed: (error) => event("error", { code: "upstream_error", message: error.message, param: null }),
            headers,
            produced: Effect.sync(() => price(found, tally))
          })
        })

      return body.stream === true ? stream() : complete()
    })
  }),
  docs: {
    summary: "Create a response (OpenAI Responses API, stateless)",
    description: "The Responses API over the chat models: input as a string or items (messages, function calls and their " +
      "outputs), instructions, max_output_tokens, tools, " +
      "service_parameters (or the model suffix). Streamed with stream: true as the Responses events " +
      "(response.output_text.delta ..., response.completed with usage). Billed per token exactly like " +
      "/chat/completions; a stream cut by the client is billed for what was produced. Function tools become chat tools " +
      "and the model's calls function_call items. Stateless: previous_response_id and built-in tools are refused.",
    tags: ["Chat"],
    request: { contentType: "application/json", schema: Request },
    responses: {
      200: {
        description: "The response (application/json), or with stream: true a text/event-stream of Responses events",
        schema: Response,
        headers: Models.headerNames
      }
    }
  }
})
