/**
 * A chat completion as a paid call: what `POST /chat/completions` and `POST /responses` share, so
 * the two wire shapes are one product with one price, one set of options and one backend. A request
 * is checked before anything is held, and a call pays for what it used, a client that hung up
 * included.
 *
 * **When to use**
 *
 * `prepare` checks a parsed request before anything is held (model, options, character, search
 * capability, context) and works out its admission: the prompt's tokens (plus room for search
 * results) and the capped completion (`max_tokens`, at most the model's limit, times `n`) reserved
 * against the token limit, and their worst-case price held. `serve` makes the two routes'
 * declarations (`Endpoint.make`) from it: their decoding ends in `prepare`, their quote and
 * admission are the prepared ones, and their work is the search the options ask for, then the
 * route's own rendering of the upstream's answer.
 *
 * **Details**
 *
 * The prompt is taken at its bound in o200k_base tokens, its UTF-8 length
 * (`Tokens.conversationBound`), so its size costs nothing before the first token; it is tokenized
 * before the call only when the bound might not leave the completion room in the model's context,
 * and after the call only when the upstream reports no usage (or a route asks for the count). What
 * a call used is priced from a `Tally`: the upstream's usage once it arrives; until then the text
 * of every piece produced, counted only if the usage never comes (a client that hung up), so a
 * stream that ends normally never pays for tokenizing.
 *
 * @since 0.1.0
 */
import type * as ChatBackend from "@tollgate/backends/ChatBackend"
import { ChatOptions, Errors, Generations, Models, Money, PricingEngine } from "@tollgate/core"
import * as JsonText from "@tollgate/core/JsonText"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import * as Tokens from "@tollgate/documents/Tokens"
import { ByteSize, Duration, Effect, Fiber, Option, Result, Stream } from "effect"
import * as Crypto from "node:crypto"
import type * as Endpoint from "./Endpoint.ts"
import type * as Metered from "./Metered.ts"
import type * as Route from "./Route.ts"

/**
 * Conversations with long contexts are large; the app's default cap would refuse them.
 *
 * @category constants
 */
export const MAX_BODY = ByteSize.megabytes(8)

/** Tokens reserved for the search results put into the prompt, and the text cut to fit them. */
const SEARCH_TOKENS = 4_096
const SCRAPE_TOKENS_PER_URL = 2_048
const CHARS_PER_RESERVED_TOKEN = 3

/** @category models */
export type Json = Record<string, unknown>

/** @category predicates */
export const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const lastUserText = (messages: ReadonlyArray<ChatOptions.Message>): string =>
  Tokens.contentText([...messages].reverse().find((message) => message.role === "user")?.content)

/**
 * An upstream refusal as the caller sees it: 429 (with the upstream's headers), 400, 503 (retry
 * with backoff) or 500.
 *
 * @category errors
 */
export const upstreamFailure = (error: ChatBackend.UpstreamError): Errors.ApiError => {
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

/**
 * What the call's search found, and the system message that hands it to the model.
 *
 * @category models
 */
export interface Found {
  readonly results: ReadonlyArray<SearchProvider.SearchResult>
  readonly scrapedUrls: number
  readonly performed: boolean
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

/**
 * What a call used, as it goes: the upstream's usage once it arrives, and the text of every piece
 * produced, tokenized only if the usage never comes.
 *
 * @category models
 */
export interface Tally {
  usage: { readonly prompt: number; readonly completion: number; readonly cached: number } | undefined
  readonly pieces: Array<string>
  /**
   * Chat chunks relayed as their text, unparsed (`ChatBackend.ChunkStream.events`): their pieces
   * (`deltaPieces`) are read only if the usage never comes.
   */
  readonly unread: Array<string>
}

/** @category constructors */
export const newTally = (): Tally => ({ usage: undefined, pieces: [], unread: [] })

/** Completion tokens of the pieces, each tokenized on its own, as it was sent. */
const countPieces = (pieces: ReadonlyArray<string>) => pieces.reduce((sum, piece) => sum + Tokens.count(piece), 0)

/**
 * The text of every choice's delta in a streamed chat chunk (its content and thinking), added to
 * `pieces`.
 *
 * @category accounting
 */
export const deltaPieces = (chunk: Json, pieces: Array<string>) => {
  const choices = Array.isArray(chunk["choices"]) ? chunk["choices"] : []
  for (const choice of choices) {
    if (!isObject(choice) || !isObject(choice["delta"])) continue
    const delta = choice["delta"]
    if (typeof delta["content"] === "string") pieces.push(delta["content"])
    for (const field of REASONING_FIELDS) {
      if (typeof delta[field] === "string") pieces.push(delta[field])
    }
  }
}

/**
 * A stream chunk's text parsed, or `undefined` when it is not a JSON object.
 *
 * @category accounting
 */
export const parseChunk = (data: string): Json | undefined => {
  try {
    const chunk: unknown = JSON.parse(data)
    return isObject(chunk) ? chunk : undefined
  } catch {
    return undefined
  }
}

/** Completion tokens of the tally's pieces and of its unread chunks' pieces. */
const countCompletion = (tally: Tally) => {
  const pieces = [...tally.pieces]
  for (const data of tally.unread) {
    const chunk = parseChunk(data)
    if (chunk !== undefined) deltaPieces(chunk, pieces)
  }
  return countPieces(pieces)
}

/**
 * Keeps an OpenAI `usage` object's counts when it has them, with the prompt tokens the upstream
 * read from its cache (`prompt_tokens_details.cached_tokens`).
 *
 * @category accounting
 */
export const recordUsage = (tally: Tally, usage: unknown) => {
  if (isObject(usage) && typeof usage["prompt_tokens"] === "number" && typeof usage["completion_tokens"] === "number") {
    const details = usage["prompt_tokens_details"]
    const cached = isObject(details) && typeof details["cached_tokens"] === "number" ? details["cached_tokens"] : 0
    tally.usage = {
      prompt: usage["prompt_tokens"],
      completion: usage["completion_tokens"],
      cached: Math.min(Math.max(0, cached), usage["prompt_tokens"])
    }
  }
}

/**
 * The fields a reasoning model's thinking arrives in, beside `content`.
 *
 * @category constants
 */
export const REASONING_FIELDS = ["reasoning_content", "reasoning"] as const

/**
 * A streamed chat chunk counted into `tally` (its usage, its text and thinking), with its first
 * choice, that choice's delta and the delta's text; `undefined` for a chunk without a delta.
 *
 * @category accounting
 */
export const tallyChunk = (
  tally: Tally,
  chunk: Json
): { readonly choice: Json; readonly delta: Json; readonly piece: string } | undefined => {
  recordUsage(tally, chunk["usage"])
  const choices = Array.isArray(chunk["choices"]) ? chunk["choices"] : []
  const choice = isObject(choices[0]) ? choices[0] : undefined
  if (choice === undefined || !isObject(choice["delta"])) return undefined
  const delta = choice["delta"]
  const piece = typeof delta["content"] === "string" ? delta["content"] : ""
  tally.pieces.push(piece)
  for (const field of REASONING_FIELDS) {
    if (typeof delta[field] === "string") tally.pieces.push(delta[field])
  }
  return { choice, delta, piece }
}

const encoder = new TextEncoder()

/**
 * The JSON array `messages` (its bytes, as they came) with `first` before its elements, in two
 * parts: the bytes are not copied here, only once into the upstream body.
 */
const prepended = (first: ReadonlyArray<ChatOptions.Message>, messages: Uint8Array): ReadonlyArray<Uint8Array> => [
  encoder.encode(`${JSON.stringify(first).slice(0, -1)},`),
  messages.subarray(1)
]

/**
 * What a call used, priced: the pipeline's `Produced`, and the prompt tokens read from the
 * upstream's cache (billed at the cached-input price when the model has one).
 *
 * @category models
 */
export interface Priced extends Metered.Produced {
  readonly cachedTokens: number
}

/**
 * A checked request for one model with its admission worked out.
 *
 * @category models
 */
export interface Prepared {
  readonly request: ChatOptions.ChatRequest
  readonly model: Models.TextModel
  readonly quote: PricingEngine.Quote
  /** The prompt's tokens as counted here (o200k_base, the service's messages included), counted when first read. */
  readonly promptTokens: number
  /** The model's tier and the prompt and capped completion reserved against the token limit. */
  readonly shape: Endpoint.Shape
  /** The search the options ask for (none: nothing found), run once the call is admitted. */
  readonly search: Effect.Effect<Found>
  /** Whether the reply must lose its think-tag blocks and reasoning fields. */
  readonly strips: boolean
  /** The model headers every answer carries. */
  readonly headers: Record<string, string>
  /** The upstream body: the conversation with the service's messages and what was found, capped. */
  readonly upstreamBody: (found: Found) => Json
  /**
   * The JSON bytes of the upstream body's `messages` when they can be sent without encoding the
   * caller's again (`ChatBackend.Call.messages`): the caller's as they came, after the service's.
   */
  readonly upstreamMessages: (found: Found) => ReadonlyArray<Uint8Array> | undefined
  /** The actual price of what the tally says was used, under this model's sku. */
  readonly price: (found: Found, tally: Tally) => Priced
}

/**
 * A checked request with the models that may serve it, in the order they are tried (`model`, then
 * the fallbacks of `models` that passed the same checks), and the admission that covers any of
 * them: the most expensive one's price held and its tokens reserved, under the first one's tier
 * (a fallback of another tier that serves has the call counted under its own instead).
 *
 * @category models
 */
export interface Plan {
  readonly candidates: readonly [Prepared, ...Array<Prepared>]
  readonly quote: PricingEngine.Quote
  readonly shape: Endpoint.Shape
  /** The search the options ask for (none: nothing found), run once the call is admitted. */
  readonly search: Effect.Effect<Found>
}

/**
 * Checks a parsed request and works out its admission; a bad one is a 400 that leaves nothing
 * behind. With fallbacks (`models`), each model is checked the same way; one that fails the checks,
 * is unknown, or is deprecated (while another is not) is left out, and only when none is left is the
 * request refused, with the first model's problem. With the body's `bytes`, the caller's messages
 * are sent upstream as they came.
 *
 * @category constructors
 */
export const preparer = Effect.gen(function*() {
  const models = yield* Models.ModelList
  const tables = yield* PricingEngine.PricingEngine
  const prompts = yield* ChatOptions.ChatPrompts
  const provider = yield* SearchProvider.SearchProvider
  const prepare = (request: ChatOptions.ChatRequest, id: string, bytes: Uint8Array | undefined): Effect.Effect<Prepared, Errors.ApiError> =>
    Effect.gen(function*() {
      const model = yield* models.text(id)
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
      const asked = Math.min(request.maxTokens ?? model.maxCompletionTokens, model.maxCompletionTokens)
      // The prompt is held and reserved at its bound, read from its bytes: tokenizing it would
      // put its size on the path to the first token. It is counted only when the bound leaves no
      // room for the completion in the context, since upstreams refuse a max_tokens that does not
      // fit beside the prompt.
      const bound = Tokens.conversationBound(messages)
      const counted = bound + asked <= model.contextTokens ? undefined : Tokens.conversation(messages)
      if (counted !== undefined && counted >= model.contextTokens) {
        return yield* new Errors.InvalidRequest({
          message: `The prompt (${counted} tokens) does not fit the context of ${model.id} (${model.contextTokens} tokens)`,
          details: Errors.fieldErrors([{ path: ["messages"], message: "Prompt too long for the model" }])
        })
      }
      let exact = counted
      const count = () => exact ??= Tokens.conversation(messages)
      const promptReserve = (counted ?? bound) + search.reserveTokens + (search.reserveTokens > 0 ? Tokens.TOKENS_PER_MESSAGE : 0)
      const maxTokens = counted === undefined ? asked : Math.min(asked, model.contextTokens - counted)
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
        return yield* Errors.invalidField(quote.field, quote.message)
      }

      const price = (found: Found, tally: Tally): Priced => {
        // Counted here only when the upstream reported no usage (a client that hung up).
        const promptUsed = tally.usage?.prompt ??
          (found.message === undefined ? count() : Tokens.conversation([found.message, ...messages]))
        const completionUsed = tally.usage?.completion ?? countCompletion(tally)
        const extras = found.performed || found.scrapedUrls > 0
        const cachedUsed = tally.usage?.cached ?? 0
        if (tally.usage === undefined && completionUsed === 0 && !extras) {
          return {
            charge: Money.zero,
            usage: { units: 0, pricePerUnit: quote.pricePerUnit, promptTokens: 0, completionTokens: 0, sku: quote.sku },
            actualTokens: 0,
            cachedTokens: 0
          }
        }
        const actual = PricingEngine.chat(tables, {
          model: model.id,
          inputTokens: promptUsed,
          cachedInputTokens: cachedUsed,
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
            sku: quote.sku,
            notes: [
              ...(cachedUsed > 0 ? [`${cachedUsed} cached prompt tokens`] : []),
              ...(found.performed ? [`${mode} search`] : []),
              ...(found.scrapedUrls > 0 ? [`${found.scrapedUrls} URLs scraped`] : [])
            ].join(", ") || undefined
          },
          actualTokens: promptUsed + completionUsed,
          cachedTokens: cachedUsed
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

      // A found message goes before the caller's last one: that conversation is encoded whole.
      const sent = bytes === undefined ? undefined : JsonText.member(bytes, "messages")
      const upstreamMessages = (found: Found): ReadonlyArray<Uint8Array> | undefined =>
        sent === undefined || found.message !== undefined ? undefined : added.length === 0 ? [sent] : prepended(added, sent)

      return {
        request,
        model,
        quote,
        get promptTokens() {
          return count()
        },
        shape: { modelTier: model.tier, reserveTokens: promptReserve + completionReserve },
        search: mode === "none" ? Effect.succeed(nothingFound) : runSearch(provider, search, query, options.enable_web_citations),
        strips: ChatOptions.stripsThinking(options),
        headers: Models.headersOf(model),
        upstreamBody,
        upstreamMessages,
        price
      } satisfies Prepared
    })
  return (request: ChatOptions.ChatRequest, bytes?: Uint8Array): Effect.Effect<Plan, Errors.ApiError> => {
    if (request.fallbacks.length === 0) return Effect.map(prepare(request, request.model, bytes), (prepared) => planOf([prepared]))
    return Effect.flatMap(
      Effect.forEach([request.model, ...request.fallbacks], (id) => Effect.result(prepare(request, id, bytes))),
      (results) => {
        const usable = results.filter(Result.isSuccess).map((result) => result.success)
        const current = usable.filter((prepared) => prepared.model.deprecation === undefined)
        const [first, ...rest] = current.length > 0 ? current : usable
        return first === undefined
          // every model was refused: the first one's problem is the answer
          ? Effect.map(Effect.fromResult(results[0]!), (prepared) => planOf([prepared]))
          : Effect.succeed(planOf([first, ...rest]))
      }
    )
  }
})

const planOf = (candidates: Plan["candidates"]): Plan => {
  const [first] = candidates
  const dearest = candidates.reduce((a, b) => b.quote.amount > a.quote.amount ? b : a)
  return {
    candidates,
    quote: dearest.quote,
    shape: {
      modelTier: first.shape.modelTier,
      reserveTokens: Math.max(...candidates.map((prepared) => prepared.shape.reserveTokens ?? 0))
    },
    search: first.search
  }
}

/**
 * One call as a route answers it: its answer's id (tollgate's own), the model that serves it, and
 * what `GET /generation` says of it (the upstream that answered, whether the answer ran to its end).
 *
 * @category models
 */
export interface Call {
  readonly id: string
  readonly prepared: Prepared
  /** The answer's `usage.cost`: what the ledger captures of `produced`, in USD. */
  readonly cost: (produced: Metered.Produced) => number
  /** The base URL of the upstream that answered (`ChatBackend`'s), or `local`. */
  upstream: string
  /** A stream reached its end (a non-streamed answer always does). */
  finished: boolean
}

/**
 * A route's answer: a response with what it used, priced, or a stream whose use is priced when it
 * ends.
 *
 * @category models
 */
export type Answer =
  | (Metered.Outcome & Priced)
  | (Metered.StreamingOutcome & { readonly produced: Effect.Effect<Priced> })

/** Events as Server-Sent Events, each named by its `type`. */
const sseEvents = (events: ReadonlyArray<Json>) =>
  encoder.encode(events.map((event) => `event: ${String(event["type"])}\ndata: ${JSON.stringify(event)}\n\n`).join(""))

/**
 * A streamed answer in an API's own named events (Anthropic's Messages, OpenAI's Responses):
 * `opening`, then each upstream chunk as `rewrite` renders it, then `closing`'s events once the
 * upstream ends. An upstream that fails after the stream started ends it with `failed`'s event,
 * since the status was sent already.
 *
 * @category constructors
 */
export const eventStream = (options: {
  readonly opening: ReadonlyArray<Json>
  readonly chunks: Stream.Stream<ChatBackend.Json, ChatBackend.UpstreamError>
  readonly rewrite: (chunk: ChatBackend.Json) => ReadonlyArray<Json>
  readonly closing: Effect.Effect<ReadonlyArray<Json>>
  readonly failed: (error: ChatBackend.UpstreamError) => Json
  readonly headers: Readonly<Record<string, string>>
  readonly produced: Effect.Effect<Priced>
}): Answer => ({
  _tag: "Streaming",
  stream: Stream.succeed(sseEvents(options.opening)).pipe(
    Stream.concat(options.chunks.pipe(
      Stream.mapArray((chunks) => [sseEvents(chunks.flatMap(options.rewrite))] as const),
      Stream.concat(Stream.fromEffect(Effect.map(options.closing, sseEvents))),
      Stream.catch((error) => Stream.succeed(sseEvents([options.failed(error)])))
    ))
  ),
  contentType: "text/event-stream",
  headers: { ...options.headers, "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" },
  produced: options.produced
})

/** How long a non-streamed answer waits for its `/generation` record before it goes anyway. */
const RECORD_WAIT = Duration.millis(100)

const hostOf = (upstream: string) => {
  try {
    return new URL(upstream).host
  } catch {
    return upstream
  }
}

/**
 * How a chat route serves a request (`Endpoint.Serve`): `decode` reads its wire shape and ends in
 * `prepare`; the quote and the admission are the plan's; the work is the search, then `answer`,
 * the route's rendering of the upstream's answer from what was found, by the first model of the
 * plan that answers: a model whose answer fails before anything was sent to the client (every
 * upstream refused, timed out or failed) gives way to the next, and a stream that has started
 * stays with its model. The call is recorded for `GET /generation` under `prefix` and a random id
 * once its charge is known.
 *
 * @category constructors
 */
export const serve = <A extends { readonly plan: Plan }>(
  prefix: string,
  decode: Effect.Effect<A, Errors.ApiError, Route.RequestServices>,
  answer: (input: A, found: Found, call: Call) => Effect.Effect<Answer, Errors.ApiError>
): Effect.Effect<Endpoint.Serve<A>, never, Generations.Generations> =>
  Effect.map(Generations.Generations, (generations) => {
    const record = (call: Call, priced: Priced, context: Metered.CallContext, quote: PricingEngine.Quote, startedAt: number) => {
      const now = Date.now()
      return generations.record({
        id: call.id,
        accountId: context.principal.accountId,
        model: call.prepared.model.id,
        upstream: hostOf(call.upstream),
        promptTokens: priced.usage.promptTokens ?? 0,
        completionTokens: priced.usage.completionTokens ?? 0,
        cachedTokens: priced.cachedTokens,
        cost: Money.min(priced.charge, quote.amount),
        latencyMs: now - startedAt,
        cutShort: !call.finished,
        createdAt: now
      }).pipe(Effect.catch((error) => Effect.logWarning("a call's generation record was not stored", error.message)))
    }
    return {
      decode,
      quote: ({ plan }) => plan.quote,
      shape: ({ plan }) => plan.shape,
      subject: ({ plan }) => ({ models: plan.candidates.map((prepared) => prepared.model.id) }),
      execute: (input, quote, context) => {
        const startedAt = Date.now()
        return Effect.flatMap(input.plan.search, (found) => {
          const id = `${prefix}${Crypto.randomUUID().replaceAll("-", "")}`
          const cost = (produced: Metered.Produced) => Money.toUsdNumber(Money.min(produced.charge, quote.amount))
          const attempt = (index: number): Effect.Effect<Metered.Outcome | Metered.StreamingOutcome, Errors.ApiError> => {
            const prepared = input.plan.candidates[index]!
            const call: Call = { id, prepared, cost, upstream: "local", finished: false }
            // A fallback of another tier has the call's rate limits counted under its own.
            const { modelTier } = prepared.shape
            const servedBy = modelTier === input.plan.shape.modelTier ? undefined : modelTier
            const served = Effect.flatMap(
              answer(input, found, call),
              (answered): Effect.Effect<Metered.Outcome | Metered.StreamingOutcome> => {
                const outcome = servedBy === undefined ? answered : { ...answered, modelTier: servedBy }
                if ("_tag" in outcome) {
                  return Effect.succeed({
                    ...outcome,
                    produced: Effect.tap(outcome.produced, (produced) => record(call, produced, context, quote, startedAt))
                  })
                }
                call.finished = true
                // The answer waits for its record briefly, so a `/generation` read right after it finds
                // it, but never for a store that stalls: the record then lands on its own.
                return Effect.forkDetach(record(call, outcome, context, quote, startedAt)).pipe(
                  Effect.flatMap((recording) => Effect.timeoutOption(Fiber.join(recording), RECORD_WAIT)),
                  Effect.as(outcome)
                )
              }
            )
            return index + 1 < input.plan.candidates.length ? Effect.catch(served, () => attempt(index + 1)) : served
          }
          return attempt(0)
        })
      }
    }
  })
