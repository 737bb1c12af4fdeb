/**
 * `POST /chat/completions`: an OpenAI-compatible proxy with the service's own options, billed and
 * limited by tokens through the metered pipeline.
 *
 * Before anything is held, the body, the options (object and model suffix), the model, the
 * character and the search capability are checked; a bad one is a 400 that leaves nothing behind.
 * Admission reserves the prompt's tokens (o200k_base, plus room for search results) and the capped
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
import { ChatOptions, Errors, Models, Money, PricingEngine, ThinkStripper } from "@tollgate/core"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import * as Tokens from "@tollgate/documents/Tokens"
import { ByteSize, Effect, Option, Result, Schema, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Metered from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"

/** Conversations with long contexts are large; the app's default cap would refuse them. */
const MAX_BODY = ByteSize.megabytes(8)

/** Tokens reserved for the search results put into the prompt, and the text cut to fit them. */
const SEARCH_TOKENS = 4_096
const SCRAPE_TOKENS_PER_URL = 2_048
const CHARS_PER_RESERVED_TOKEN = 3

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const lastUserText = (messages: ReadonlyArray<ChatOptions.Message>): string =>
  Tokens.contentText([...messages].reverse().find((message) => message.role === "user")?.content)

const upstreamFailure = (error: ChatBackend.UpstreamError): Errors.ApiError => {
  if (error.status === 429) {
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(error.headers ?? {})) {
      if (name.startsWith("x-ratelimit-") || name === "retry-after") headers[name] = value
    }
    const retryAfter = Number(headers["retry-after"])
    return new Errors.RateLimited({
      message: "The model's upstream is rate limited; retry with exponential backoff",
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : 1,
      headers
    })
  }
  if (error.status !== undefined && [400, 404, 413, 422].includes(error.status)) {
    return new Errors.InvalidRequest({ message: `The model refused the request: ${error.message}` })
  }
  if (error.kind === "transport" || error.kind === "timeout" || (error.status !== undefined && error.status >= 502)) {
    return new Errors.ServiceUnavailable({
      message: "The model is temporarily unavailable; retry with exponential backoff",
      retryAfterSeconds: 2
    })
  }
  return new Errors.InferenceFailed({ message: "Inference failed" })
}

interface Search {
  readonly mode: "scrape" | "x" | "web" | "none"
  readonly urls: ReadonlyArray<string>
  readonly reserveTokens: number
}

interface Found {
  readonly results: ReadonlyArray<SearchProvider.SearchResult>
  readonly scrapedUrls: number
  readonly performed: boolean
  /** The system message that hands the results to the model. */
  readonly message: ChatOptions.Message | undefined
}

const nothingFound: Found = { results: [], scrapedUrls: 0, performed: false, message: undefined }

const cut = (text: string, tokens: number) => text.slice(0, tokens * CHARS_PER_RESERVED_TOKEN)

/** Runs the search a request asked for. A failed search leaves the reply without results and unbilled. */
const runSearch = (
  provider: SearchProvider.SearchProvider["Service"],
  search: Search,
  query: string,
  citations: boolean
): Effect.Effect<Found> => {
  if (search.mode === "scrape") {
    const scrape = Option.getOrThrow(provider.scrape)
    return Effect.forEach(search.urls, (url) => Effect.result(scrape(url)), { concurrency: 5 }).pipe(
      Effect.map((results) => {
        const pages = results.filter(Result.isSuccess).map((result) => result.success)
        return {
          results: pages.map((page) => ({ title: page.url, url: page.url, content: cut(page.text, SCRAPE_TOKENS_PER_URL) })),
          scrapedUrls: pages.length,
          performed: false,
          message: pages.length === 0 ? undefined : {
            role: "system",
            content: pages.map((page) => `Content of ${page.url}:\n${cut(page.text, SCRAPE_TOKENS_PER_URL)}`).join("\n\n")
          }
        }
      })
    )
  }
  const run = search.mode === "x" ? provider.x : provider.web
  if (search.mode === "none" || Option.isNone(run)) return Effect.succeed(nothingFound)
  return run.value(query.slice(0, 400)).pipe(
    Effect.map((results): Found => {
      const budget = Math.floor(SEARCH_TOKENS / Math.max(1, results.length))
      const kept = results.map((result) => ({ ...result, content: cut(result.content, budget) }))
      return {
        results: kept,
        scrapedUrls: 0,
        performed: true,
        message: {
          role: "system",
          content: [
            "Web search results for the user's last message:",
            ...kept.map((result, i) => `[${i}] ${result.title} (${result.url})\n${result.content}`),
            ...(citations ? ["Cite the results you use as [REF]<index>[/REF], e.g. [REF]0[/REF]."] : [])
          ].join("\n\n")
        }
      }
    }),
    Effect.orElseSucceed(() => nothingFound)
  )
}

const documentsCall = (results: ReadonlyArray<SearchProvider.SearchResult>) => ({
  index: 0,
  id: "call_service_web_search_documents",
  type: "function",
  function: { name: "service_web_search_documents", arguments: JSON.stringify({ documents: results }) }
})

const encoder = new TextEncoder()
const sse = (data: unknown) => encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`)

/** The chunks of one upstream read as one write: a per-chunk write would cost a syscall each. */
const sseBatch = (chunks: ReadonlyArray<unknown>) =>
  encoder.encode(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join(""))

/**
 * What a call used, as it goes: the upstream's usage once it arrives; until then the text of every
 * piece produced, counted only if the usage never comes (a client that hung up), so a stream that
 * ends normally never pays for tokenizing.
 */
interface Tally {
  usage: { readonly prompt: number; readonly completion: number } | undefined
  readonly pieces: Array<string>
}

const newTally = (): Tally => ({ usage: undefined, pieces: [] })

/** Completion tokens of the pieces, each tokenized on its own, as it was sent. */
const countPieces = (pieces: ReadonlyArray<string>) => pieces.reduce((sum, piece) => sum + Tokens.count(piece), 0)

const recordUsage = (tally: Tally, usage: unknown) => {
  if (isObject(usage) && typeof usage["prompt_tokens"] === "number" && typeof usage["completion_tokens"] === "number") {
    tally.usage = { prompt: usage["prompt_tokens"], completion: usage["completion_tokens"] }
  }
}

const REASONING_FIELDS = ["reasoning_content", "reasoning"] as const

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
    usage: Schema.optionalKey(Schema.Struct({ prompt_tokens: Schema.Int, completion_tokens: Schema.Int, total_tokens: Schema.Int }))
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "ChatCompletion" })

/** @category routes */
export const route = Route.metered(Route.make(
  "POST",
  "/api/v1/chat/completions",
  Effect.gen(function*() {
    const metered = yield* Metered.Metered
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* ChatBackend.ChatBackend
    const prompts = yield* ChatOptions.ChatPrompts
    const provider = yield* SearchProvider.SearchProvider
    return Effect.gen(function*() {
      const request = yield* Effect.fromResult(ChatOptions.parseRequest(yield* RequestBody.json(MAX_BODY)))
      const model = yield* models.text(request.model)
      const { options } = request
      const added = yield* Effect.fromResult(ChatOptions.serviceMessages(prompts, options))
      const mode = ChatOptions.searchMode(options)
      if (mode === "x" && !model.supportsXSearch) {
        return yield* new Errors.InvalidRequest({
          message: `X search is not supported by ${model.id}`,
          details: Errors.fieldErrors([{ path: ["service_parameters", "enable_x_search"], message: `Not supported by ${model.id}` }])
        })
      }
      if (mode !== "none" && !SearchProvider.offers(provider, mode)) return yield* SearchProvider.notConfigured(mode)
      const query = lastUserText(request.messages)
      const urls = mode === "scrape" ? SearchProvider.urlsIn(query) : []
      const search: Search = {
        mode,
        urls,
        reserveTokens: mode === "scrape" ? urls.length * SCRAPE_TOKENS_PER_URL : mode === "none" ? 0 : SEARCH_TOKENS
      }
      const messages = [...added, ...request.messages]
      const prompt = Tokens.conversation(messages)
      const promptReserve = prompt + search.reserveTokens + (search.reserveTokens > 0 ? Tokens.TOKENS_PER_MESSAGE : 0)
      if (prompt >= model.contextTokens) {
        return yield* new Errors.InvalidRequest({
          message: `The prompt (${prompt} tokens) does not fit the context of ${model.id} (${model.contextTokens} tokens)`,
          details: Errors.fieldErrors([{ path: ["messages"], message: "Prompt too long for the model" }])
        })
      }
      // upstreams refuse a max_tokens that does not fit beside the prompt in the context
      const maxTokens = Math.min(request.maxTokens ?? model.maxCompletionTokens, model.maxCompletionTokens, model.contextTokens - prompt)
      const completionReserve = maxTokens * request.choices
      const quote = PricingEngine.chat(tables, {
        model: model.id,
        inputTokens: promptReserve,
        outputTokens: completionReserve,
        webSearch: mode === "web",
        scrapedUrls: urls.length,
        xSearch: mode === "x"
      })
      if (PricingEngine.isUnpriced(quote)) {
        return yield* Errors.invalidParameters([{ path: [quote.field], message: quote.message }])
      }
      const strips = ChatOptions.stripsThinking(options)
      const headers = Models.headersOf(model)

      const price = (found: Found, tally: Tally): Metered.Produced => {
        const promptUsed = tally.usage?.prompt ?? (found.message === undefined ? prompt : Tokens.conversation([found.message, ...messages]))
        const completionUsed = tally.usage?.completion ?? countPieces(tally.pieces)
        const extras = found.performed || found.scrapedUrls > 0
        if (tally.usage === undefined && completionUsed === 0 && !extras) {
          return { charge: Money.zero, usage: { units: 0, pricePerUnit: quote.pricePerUnit, promptTokens: 0, completionTokens: 0 }, actualTokens: 0 }
        }
        const actual = PricingEngine.chat(tables, {
          model: model.id,
          inputTokens: promptUsed,
          outputTokens: completionUsed,
          webSearch: found.performed && mode === "web",
          scrapedUrls: found.scrapedUrls,
          xSearch: found.performed && mode === "x"
        })
        const charge = PricingEngine.isUnpriced(actual) ? quote.amount : actual.amount
        return {
          charge,
          usage: {
            units: promptUsed + completionUsed,
            pricePerUnit: PricingEngine.isUnpriced(actual) ? quote.pricePerUnit : actual.pricePerUnit,
            promptTokens: promptUsed,
            completionTokens: completionUsed,
            notes: [
              ...(found.performed ? [`${mode} search`] : []),
              ...(found.scrapedUrls > 0 ? [`${found.scrapedUrls} URLs scraped`] : [])
            ].join(", ") || undefined
          },
          actualTokens: promptUsed + completionUsed
        }
      }

      const upstreamBody = (found: Found): Json => {
        const conversation = found.message === undefined
          ? messages
          : [...messages.slice(0, -1), found.message, ...messages.slice(-1)]
        const body: Json = { ...request.passthrough, messages: conversation }
        if (request.passthrough["max_completion_tokens"] !== undefined) body["max_completion_tokens"] = maxTokens
        if (request.passthrough["max_completion_tokens"] === undefined || request.passthrough["max_tokens"] !== undefined) {
          body["max_tokens"] = maxTokens
        }
        if (options.disable_thinking && model.supportsThinking) {
          const kwargs = isObject(body["chat_template_kwargs"]) ? body["chat_template_kwargs"] : {}
          body["chat_template_kwargs"] = { ...kwargs, enable_thinking: false }
        }
        return body
      }

      const complete = (found: Found) =>
        Effect.gen(function*() {
          const { body } = yield* backend.complete({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          const tally = newTally()
          recordUsage(tally, body["usage"])
          const choices = Array.isArray(body["choices"]) ? body["choices"] : []
          const reply = {
            ...body,
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
          return {
            response: HttpServerResponse.jsonUnsafe(reply, { headers }),
            ...price(found, tally)
          } satisfies Metered.Outcome
        })

      const stream = (found: Found) =>
        Effect.gen(function*() {
          const upstream = yield* backend.stream({ model, body: upstreamBody(found), promptCacheKey: request.promptCacheKey }).pipe(
            Effect.mapError(upstreamFailure)
          )
          const tally = newTally()
          const strippers = new Map<number, ThinkStripper.Stripper>()
          const stripperOf = (index: number) => {
            const existing = strippers.get(index)
            if (existing !== undefined) return existing
            const made = ThinkStripper.make()
            strippers.set(index, made)
            return made
          }
          const rewrite = (chunk: ChatBackend.Json): Json => {
            recordUsage(tally, chunk["usage"])
            const choices = Array.isArray(chunk["choices"]) ? chunk["choices"] : []
            return {
              ...chunk,
              model: model.id,
              choices: choices.map((choice: unknown) => {
                if (!isObject(choice) || !isObject(choice["delta"])) return choice
                const delta: Json = { ...choice["delta"] }
                const index = typeof choice["index"] === "number" ? choice["index"] : 0
                if (typeof delta["content"] === "string") {
                  tally.pieces.push(delta["content"])
                  if (strips) delta["content"] = stripperOf(index).push(delta["content"])
                }
                for (const field of REASONING_FIELDS) {
                  if (typeof delta[field] === "string") tally.pieces.push(delta[field])
                  if (strips) delete delta[field]
                }
                if (strips && choice["finish_reason"] != null) {
                  const rest = stripperOf(index).flush()
                  if (rest.length > 0) delta["content"] = `${typeof delta["content"] === "string" ? delta["content"] : ""}${rest}`
                }
                return { ...choice, delta }
              })
            }
          }
          const first: Array<Json> = []
          const created = Math.floor(Date.now() / 1000)
          if (options.include_search_results_in_stream && found.results.length > 0) {
            first.push({ object: "chat.completion.chunk", created, model: model.id, choices: [], search_results: found.results })
          }
          if (options.return_search_results_as_documents && found.results.length > 0) {
            first.push({
              object: "chat.completion.chunk",
              created,
              model: model.id,
              choices: [{ index: 0, delta: { role: "assistant", tool_calls: [documentsCall(found.results)] }, finish_reason: null }]
            })
          }
          const body = Stream.fromIterable(first).pipe(
            Stream.map(sse),
            Stream.concat(upstream.chunks.pipe(
              Stream.mapArray((chunks) => [sseBatch(chunks.map(rewrite))] as const),
              Stream.concat(Stream.succeed(sse("[DONE]"))),
              Stream.catch((error) => Stream.succeed(sse({ error: { message: error.message, type: "upstream_error" } })))
            ))
          )
          return {
            _tag: "Streaming",
            stream: body,
            contentType: "text/event-stream",
            headers: { ...headers, "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" },
            produced: Effect.sync(() => price(found, tally))
          } satisfies Metered.StreamingOutcome
        })

      return yield* metered.run({
        sku: quote.sku,
        kind: "text",
        modelTier: model.tier,
        reserveTokens: promptReserve + completionReserve,
        quote,
        execute: () =>
          Effect.gen(function*() {
            const found = mode === "none" ? nothingFound : yield* runSearch(provider, search, query, options.enable_web_citations)
            return request.stream ? yield* stream(found) : yield* complete(found)
          })
      })
    })
  }),
  {
    summary: "Chat completion (OpenAI-compatible)",
    description: "An OpenAI-compatible chat completion, streamed as Server-Sent Events with stream: true. " +
      "service_parameters (or the model suffix <model>:<option>=<value>&...) add the service's options; fields " +
      "not listed pass through to the model unvalidated. Billed per prompt and completion token; a stream cut by " +
      "the client is billed for what was produced.",
    tags: ["Chat"],
    security: "metered",
    request: { contentType: "application/json", schema: RequestDoc },
    responses: {
      200: {
        description: "The completion (application/json), or with stream: true a text/event-stream of chat.completion.chunk " +
          "events ending with data: [DONE]",
        schema: ResponseDoc,
        headers: Models.headerNames
      }
    }
  }
))
