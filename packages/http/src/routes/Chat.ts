/**
 * `POST /chat/completions`: an OpenAI-compatible proxy with the service's own options, billed and
 * limited by tokens through the metered pipeline.
 *
 * Before anything is held, the body, the options (object and model suffix), the model, the
 * character and the search capability are checked; a bad one is a 400 that leaves nothing behind
 * (`ChatCall`, shared with `POST /responses`). Admission reserves the prompt's tokens (at their bound, the prompt's UTF-8 length, plus room for search results) and the capped
 * completion (`max_tokens`, at most the model's limit, times `n`) against the token limit, and holds
 * their worst-case price. The upstream is asked for usage; its counts settle the call. A streamed
 * call settles when its stream ends or the client hangs up: a client that leaves mid-stream pays
 * for the chunks that passed through (their text is kept and tokenized if the upstream's usage never
 * arrives), and the rest of the hold goes back.
 * An upstream refusal maps to 429 (with the upstream's headers), 400, 503 (retry with backoff) or
 * 500, and nothing is charged for a call that produced nothing.
 *
 * @since 0.1.0
 */
import * as ChatBackend from "@tollgate/backends/ChatBackend"
import { ChatOptions, Models, ThinkStripper } from "@tollgate/core"
import type * as SearchProvider from "@tollgate/core/SearchProvider"
import { Array as Arr, Cause, Effect, Schema, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import * as ChatCall from "../ChatCall.ts"
import {
  deltaPieces,
  isObject,
  type Json,
  MAX_BODY,
  newTally,
  parseChunk,
  preparer,
  REASONING_FIELDS,
  recordUsage,
  upstreamFailure
} from "../ChatCall.ts"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"

const documentsCall = (results: ReadonlyArray<SearchProvider.SearchResult>) => ({
  index: 0,
  id: "call_service_web_search_documents",
  type: "function",
  function: { name: "service_web_search_documents", arguments: JSON.stringify({ documents: results }) }
})

/** The answer's usage: the upstream's (its details kept), or the counts billed when it sent none. */
const usageOf = (usage: unknown, produced: ChatCall.Priced): Json => {
  if (isObject(usage)) return usage
  const prompt = produced.usage.promptTokens ?? 0
  const completion = produced.usage.completionTokens ?? 0
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

const encoder = new TextEncoder()
const sseText = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`

/**
 * For one stream: a chunk's text with its `field` holding `ours` instead of the upstream's value,
 * the one `learn` last took from a parsed chunk. An upstream names the same id and model in every
 * chunk, so the texts to find and to put are made once per value, not per chunk.
 */
const replacer = (field: string, ours: string) => {
  const to = `"${field}":${JSON.stringify(ours)}`
  let from: string | undefined
  return {
    learn: (value: unknown) => {
      from = typeof value === "string" ? `"${field}":${JSON.stringify(value)}` : undefined
    },
    /** `undefined` when `data` does not hold the upstream's value as JSON.stringify writes it. */
    apply: (data: string): string | undefined =>
      from === undefined || !data.includes(from) ? undefined : from === to ? data : data.replaceAll(from, to)
  }
}

const USAGE = `"usage"`
const isSpace = (code: number) => code === 32 || code === 10 || code === 13 || code === 9

/**
 * Whether a chunk's text may hold a `usage` object: a `"usage"` key followed by `{` (a false alarm,
 * a value that reads so inside a string, costs only a parse). OpenAI-compatible upstreams write
 * `"usage":null` on the chunks before the last, which need no parse.
 */
const carriesUsage = (data: string): boolean => {
  for (let at = data.indexOf(USAGE); at !== -1; at = data.indexOf(USAGE, at + USAGE.length)) {
    let i = at + USAGE.length
    while (isSpace(data.charCodeAt(i))) i++
    if (data.charCodeAt(i) !== 58) continue // `:`
    i++
    while (isSpace(data.charCodeAt(i))) i++
    if (data.charCodeAt(i) === 123) return true // `{`
  }
  return false
}

/** The request as documented: the fields tollgate reads, the options, and room for any other. */
const RequestDoc = Schema.StructWithRest(
  Schema.Struct({
    ...ChatOptions.ChatRequestFields.fields,
    service_parameters: Schema.optionalKey(ChatOptions.ServiceParameters)
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "ChatCompletionRequest" })

const ResponseDoc = Schema.StructWithRest(
  Schema.Struct({
    id: Schema.String,
    object: Schema.String,
    created: Schema.Int,
    model: Schema.String,
    choices: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
    usage: Schema.optionalKey(Schema.Struct({
      prompt_tokens: Schema.Int,
      completion_tokens: Schema.Int,
      total_tokens: Schema.Int,
      prompt_tokens_details: Schema.optionalKey(Schema.Struct({ cached_tokens: Schema.Int })),
      cost: Schema.Finite.annotate({ description: "What the call was charged, in USD (to the nano-USD, as the ledger captured it)" })
    }))
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "ChatCompletion" })

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/chat/completions",
  kind: "text",
  settlesActual: true,
  serve: Effect.gen(function*() {
    const prepare = yield* preparer
    const backend = yield* ChatBackend.ChatBackend
    const decode = RequestBody.jsonWithBytes(MAX_BODY).pipe(
      Effect.flatMap(({ bytes, json }) =>
        Effect.flatMap(Effect.fromResult(ChatOptions.parseRequest(json)), (request) => prepare(request, bytes))
      ),
      Effect.map((plan) => ({ plan }))
    )
    return yield* ChatCall.serve("chatcmpl-", decode, (_, found, call) => {
      const { headers, model, price, request, strips, upstreamBody, upstreamMessages } = call.prepared
      const { options } = request

      const complete = () =>
        Effect.gen(function*() {
          const { body, upstream } = yield* backend.complete({
            model,
            body: upstreamBody(found),
            messages: upstreamMessages(found),
            promptCacheKey: request.promptCacheKey
          }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = upstream
          const tally = newTally()
          recordUsage(tally, body["usage"])
          const choices = Array.isArray(body["choices"]) ? body["choices"] : []
          const reply: Json = {
            ...body,
            id: call.id,
            model: model.id,
            choices: choices.map((choice: unknown, i) => {
              if (!isObject(choice) || !isObject(choice["message"])) return choice
              const message: Json = { ...choice["message"] }
              const content = typeof message["content"] === "string" ? message["content"] : ""
              tally.pieces.push(content)
              for (const field of REASONING_FIELDS) {
                if (typeof message[field] === "string") tally.pieces.push(message[field])
                if (strips) delete message[field]
              }
              if (strips && typeof message["content"] === "string") message["content"] = ThinkStripper.strip(content)
              if (i === 0 && options.return_search_results_as_documents && found.results.length > 0) {
                const calls = Array.isArray(message["tool_calls"]) ? message["tool_calls"] : []
                message["tool_calls"] = [...calls, documentsCall(found.results)]
              }
              return { ...choice, message }
            })
          }
          const produced = price(found, tally)
          reply["usage"] = { ...usageOf(body["usage"], produced), cost: call.cost(produced) }
          return { response: HttpServerResponse.jsonUnsafe(reply, { headers }), ...produced } satisfies ChatCall.Answer
        })

      const stream = () =>
        Effect.gen(function*() {
          const upstream = yield* backend.stream({
            model,
            body: upstreamBody(found),
            messages: upstreamMessages(found),
            promptCacheKey: request.promptCacheKey
          }).pipe(
            Effect.mapError(upstreamFailure)
          )
          call.upstream = upstream.upstream
          const tally = newTally()
          const strippers = new Map<number, ThinkStripper.Stripper>()
          const stripperOf = (index: number) => {
            const existing = strippers.get(index)
            if (existing !== undefined) return existing
            const made = ThinkStripper.make()
            strippers.set(index, made)
            return made
          }
          const count = (chunk: ChatBackend.Json) => {
            recordUsage(tally, chunk["usage"])
            deltaPieces(chunk, tally.pieces)
          }
          const rewrite = (chunk: ChatBackend.Json): Json => {
            const choices = Array.isArray(chunk["choices"]) ? chunk["choices"] : []
            return {
              ...chunk,
              id: call.id,
              model: model.id,
              ...(isObject(chunk["usage"]) ? { usage: { ...chunk["usage"], cost: call.cost(price(found, tally)) } } : {}),
              choices: choices.map((choice: unknown) => {
                if (!strips || !isObject(choice) || !isObject(choice["delta"])) return choice
                const delta: Json = { ...choice["delta"] }
                const index = typeof choice["index"] === "number" ? choice["index"] : 0
                if (typeof delta["content"] === "string") delta["content"] = stripperOf(index).push(delta["content"])
                for (const field of REASONING_FIELDS) delete delta[field]
                if (choice["finish_reason"] != null) {
                  const rest = stripperOf(index).flush()
                  if (rest.length > 0) delta["content"] = `${typeof delta["content"] === "string" ? delta["content"] : ""}${rest}`
                }
                return { ...choice, delta }
              })
            }
          }
          // Without stripping, a chunk other than the usage one (which gains its cost) changes only in
          // its id and model name: its text goes on as it came, unparsed, with those two replaced when
          // it holds the values of the last chunk parsed as JSON.stringify writes them (its pieces are
          // read only if the usage never comes); else it is parsed, and encoded again if need be.
          const withId = replacer("id", call.id)
          const withModel = replacer("model", model.id)
          const replaced = (data: string) => {
            const idReplaced = withId.apply(data)
            return idReplaced === undefined ? undefined : withModel.apply(idReplaced)
          }
          const relay = (data: string): string | undefined => {
            if (!strips && !carriesUsage(data)) {
              const relayed = replaced(data)
              if (relayed !== undefined) {
                tally.unread.push(data)
                return relayed
              }
            }
            const chunk = parseChunk(data)
            if (chunk === undefined) return undefined
            count(chunk)
            withId.learn(chunk["id"])
            withModel.learn(chunk["model"])
            return (strips || isObject(chunk["usage"]) ? undefined : replaced(data)) ?? JSON.stringify(rewrite(chunk))
          }
          // The chunks of one upstream read go out as one write: a write per chunk would cost a syscall
          // each. `undefined` when one of them is unreadable.
          const relayBatch = (events: ReadonlyArray<string>): string | undefined => {
            let text = ""
            for (const data of events) {
              const relayed = relay(data)
              if (relayed === undefined) return undefined
              text += `data: ${relayed}\n\n`
            }
            return text
          }
          const first: Array<Json> = []
          const created = Math.floor(Date.now() / 1000)
          if (options.include_search_results_in_stream && found.results.length > 0) {
            first.push({
              id: call.id,
              object: "chat.completion.chunk",
              created,
              model: model.id,
              choices: [],
              search_results: found.results
            })
          }
          if (options.return_search_results_as_documents && found.results.length > 0) {
            first.push({
              id: call.id,
              object: "chat.completion.chunk",
              created,
              model: model.id,
              choices: [{ index: 0, delta: { role: "assistant", tool_calls: [documentsCall(found.results)] }, finish_reason: null }]
            })
          }
          // One stage over the upstream's events: the first events go out with the first relayed
          // batch, and the stream ends with `[DONE]`, or with an error event when the upstream fails
          // once the status was sent. Each stage between the upstream's bytes and the client's is
          // run on every pull, and its set-up on the way to the first chunk.
          const body = Stream.transformPull(upstream.events, (pull) =>
            Effect.sync(() => {
              let opening = first.map((chunk) => sseText(chunk)).join("")
              let ended = false
              const send = (text: string) => {
                const out = opening + text
                opening = ""
                return Effect.succeed(Arr.of(encoder.encode(out)))
              }
              const failed = (message: string) => {
                ended = true
                return send(sseText({ error: { message, type: "upstream_error" } }))
              }
              return Effect.suspend(() => {
                if (ended) return Cause.done()
                return Effect.matchEffect(pull, {
                  onFailure: (error) => {
                    if (!Cause.isDone(error)) return failed(error.message)
                    ended = true
                    call.finished = true
                    return send(sseText("[DONE]"))
                  },
                  onSuccess: (events) => {
                    const text = relayBatch(events)
                    return text === undefined ? failed("upstream sent an unreadable stream chunk") : send(text)
                  }
                })
              })
            }))
          return {
            _tag: "Streaming",
            stream: body,
            contentType: "text/event-stream",
            headers: { ...headers, "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" },
            produced: Effect.sync(() => price(found, tally))
          } satisfies ChatCall.Answer
        })

      return request.stream ? stream() : complete()
    })
  }),
  docs: {
    summary: "Chat completion (OpenAI-compatible)",
    description: "An OpenAI-compatible chat completion, streamed as Server-Sent Events with stream: true. " +
      "service_parameters (or the model suffix <model>:<option>=<value>&...) add the service's options; fields " +
      "not listed pass through to the model unvalidated. Billed per prompt and completion token; a stream cut by " +
      "the client is billed for what was produced.",
    tags: ["Chat"],
    request: {
      contentType: "application/json",
      schema: RequestDoc,
      example: { model: "llama-3.3-70b", max_tokens: 100, messages: [{ role: "user", content: "Say hello" }] }
    },
    responses: {
      200: {
        description: "The completion (application/json), or with stream: true a text/event-stream of chat.completion.chunk " +
          "events ending with data: [DONE]",
        schema: ResponseDoc,
        headers: Models.headerNames
      }
    }
  }
})
