import * as ChatBackend from "@tollgate/backends/ChatBackend"
import { ChatOptions, CreditLedger, Generations, Models, Money, PricingEngine } from "@tollgate/core"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import * as Tokens from "@tollgate/documents/Tokens"
import { FakeChatUpstream } from "@tollgate/testkit"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as Chat from "../src/routes/Chat.ts"
import * as TestApp from "./support/TestApp.ts"

const SYSTEM_PROMPT = "You are the service's helpful assistant."
const CHARACTER_PROMPT = "You are Captain Nemo. Speak like a submariner."
const GRANT = Money.usd(100)

const chatPrice = { inputPerMillion: Money.usd(1), outputPerMillion: Money.usd(2) }
const tables = PricingEngine.layer({
  chat: { ...PricingEngine.defaults.chat, models: { "fake-chat": chatPrice, "unreachable-chat": chatPrice } }
})

let upstream: FakeChatUpstream.FakeChatUpstream
let baseURL: string
let client: OpenAI
let apiKey: string
let accountId: string
let context: Context.Context<Services>
let dispose: () => Promise<void>

const textModel = (id: string, baseUrl: string): Models.TextModel => ({
  id,
  name: `Model ${id}`,
  type: "text",
  router: "fake-upstream",
  tier: "XS",
  upstreams: [{ baseUrl, model: `upstream-${id}` }],
  contextTokens: 32_768,
  maxCompletionTokens: 2_048,
  supportsThinking: true,
  supportsWebSearch: true,
  supportsXSearch: true
})

const searchResults: ReadonlyArray<SearchProvider.SearchResult> = [
  { title: "Tollgate docs", url: "https://docs.example/tollgate", content: "Tollgate meters chat by tokens." }
]

const services = () =>
  TestApp.layerMetered(Layer.mergeAll(
    tables,
    Generations.layerMemory,
    Models.layer([textModel("fake-chat", upstream.baseUrl), textModel("unreachable-chat", "http://127.0.0.1:9/v1")]),
    ChatBackend.layer({ coolDown: "1 millis" }),
    ChatOptions.layerPrompts({
      systemPrompt: SYSTEM_PROMPT,
      characters: { "captain-nemo": { name: "Captain Nemo", systemPrompt: CHARACTER_PROMPT } }
    }),
    SearchProvider.layer({
      web: () => Effect.succeed(searchResults),
      scrape: (url) =>
        url.includes("missing")
          ? Effect.fail(new SearchProvider.SearchFailed({ message: `${url} answered 404` }))
          : Effect.succeed({ url, text: `Text of ${url}` })
    })
  ))

type Services = Layer.Success<ReturnType<typeof services>>

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  const scope = Effect.runSync(Scope.make())
  context = await TestApp.buildContext(services(), scope)
  const app = App.layer([Chat.route]).pipe(Layer.provide(Layer.succeedContext(context)))
  const node = await Handlers.toNodeHandler(app)
  const server = Http.createServer(node.handler)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`
  const { id, key } = await TestApp.seedAccount(context, { label: "chat", grant: GRANT })
  accountId = id
  apiKey = key
  client = new OpenAI({ apiKey: key, baseURL, maxRetries: 0 })
  dispose = async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await node.dispose()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await upstream.close()
  }
})
afterAll(() => dispose())
beforeEach(() => {
  upstream.script = () => ({ pieces: ["Hello", " world"] })
})

const ledger = <A>(f: (ledger: CreditLedger.CreditLedger["Service"]) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.flatMap(CreditLedger.CreditLedger, f).pipe(Effect.provide(context)) as Effect.Effect<A>)

const balance = () => ledger((l) => l.balance(accountId)).then((b) => b.usd)
const lastUsage = () => ledger((l) => l.usage(accountId, { order: "desc", limit: 1 })).then((page) => page.entries[0])

const priceOf = (inputTokens: number, outputTokens: number) => {
  const quote = PricingEngine.chat({
    ...PricingEngine.defaults,
    chat: { ...PricingEngine.defaults.chat, models: { "fake-chat": chatPrice } }
  }, {
    model: "fake-chat",
    inputTokens,
    outputTokens
  })
  if (PricingEngine.isUnpriced(quote)) throw new Error(quote.message)
  return quote.amount
}

type Params = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming & { service_parameters?: Record<string, unknown> }
type StreamParams = OpenAI.Chat.ChatCompletionCreateParamsStreaming & { service_parameters?: Record<string, unknown> }

const ask = (params: Partial<Params> = {}) =>
  client.chat.completions.create({ model: "fake-chat", messages: [{ role: "user", content: "Hi" }], ...params } as Params).withResponse()

const askStream = async (params: Partial<StreamParams> = {}) => {
  const stream = await client.chat.completions.create({
    model: "fake-chat",
    messages: [{ role: "user", content: "Hi" }],
    stream: true,
    ...params
  } as StreamParams)
  let text = ""
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
  return text
}

/** The raw answer, for the body the SDK does not keep whole (DetailedError `details`). */
const post = async (body: Record<string, unknown>) => {
  const response = await fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], ...body })
  })
  return { status: response.status, body: await response.json() as unknown }
}

const waitFor = async <A>(probe: () => Promise<A | undefined>): Promise<A> => {
  for (let i = 0; i < 200; i++) {
    const found = await probe()
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error("timed out waiting")
}

describe("POST /chat/completions: an OpenAI-compatible completion, billed by the upstream's token usage", () => {
  it("answers the openai SDK with the completion, the model headers, token limits and balance", async () => {
    const before = await balance()
    const { data, response } = await ask({ temperature: 0.3 })
    expect(data.choices[0]?.message.content).toBe("Hello world")
    expect(data.model).toBe("fake-chat")
    expect(response.headers.get("x-service-model-id")).toBe("fake-chat")
    expect(response.headers.get("x-service-model-name")).toBe("Model fake-chat")
    expect(response.headers.get("x-service-model-router")).toBe("fake-upstream")
    expect(response.headers.get("x-ratelimit-limit-tokens")).toBe("1000000")
    expect(response.headers.get("x-service-balance-usd")).toBe(Money.formatUsd(before))
    expect(upstream.received.at(-1)?.body).toMatchObject({ model: "upstream-fake-chat", temperature: 0.3, max_tokens: 2048 })
    expect(before - await balance()).toBe(priceOf(10, 2))
    expect(await lastUsage()).toMatchObject({ sku: "chat:fake-chat", promptTokens: 10, completionTokens: 2 })
  })

  it("streams over SSE to the openai SDK and bills the usage the upstream reported", async () => {
    upstream.script = () => ({ pieces: ["One", " two", " three"], usage: { prompt_tokens: 12, completion_tokens: 3 } })
    const before = await balance()
    expect(await askStream()).toBe("One two three")
    expect(upstream.received.at(-1)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
    await waitFor(async () => (await balance()) < before ? true : undefined)
    expect(before - await balance()).toBe(priceOf(12, 3))
  })

  it("streams every chunk under the call's id and the model's id, each otherwise as the upstream wrote it", async () => {
    upstream.script = () => ({ pieces: ["One", " \"two\""], usage: { prompt_tokens: 12, completion_tokens: 2 } })
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-chat", stream: true, messages: [{ role: "user", content: "Hi" }] })
    })
    const events = (await response.text()).split("\n\n").filter((event) => event.startsWith("data: {"))
    const chunks = events.map((event) => JSON.parse(event.slice(6)) as { id: string; model: string })
    const id = chunks[0]!.id
    expect(id).toMatch(/^chatcmpl-/)
    expect(id).not.toContain("fake")
    expect(chunks.map((chunk) => [chunk.id, chunk.model])).toEqual(chunks.map(() => [id, "fake-chat"]))
    expect(events).toContain(
      `data: {"id":"${id}","object":"chat.completion.chunk","created":1,` +
        `"model":"fake-chat","choices":[{"index":0,"delta":{"content":" \\"two\\""},"finish_reason":null}]}`
    )
  })

  it("relays an upstream that writes its JSON spaced (as Python's json.dumps) under the call's id and the model's id, billed at its usage", async () => {
    upstream.script = () => ({ pieces: ["One", " two"], usage: { prompt_tokens: 12, completion_tokens: 2 }, spaced: true })
    const before = await balance()
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-chat", stream: true, messages: [{ role: "user", content: "Hi" }] })
    })
    const chunks = (await response.text()).split("\n\n").filter((event) => event.startsWith("data: {"))
      .map((event) => JSON.parse(event.slice(6)) as { id: string; model: string; usage?: { cost: number } })
    expect(chunks.map((chunk) => [chunk.id, chunk.model])).toEqual(chunks.map(() => [chunks[0]!.id, "fake-chat"]))
    expect(chunks[0]!.id).toMatch(/^chatcmpl-/)
    await waitFor(async () => (await balance()) < before ? true : undefined)
    expect(before - await balance()).toBe(priceOf(12, 2))
    expect(chunks.at(-1)!.usage!.cost).toBe(Money.toUsdNumber(priceOf(12, 2)))
  })

  it("sends the stream uncompressed even when the client accepts gzip, so no chunk waits in a compressor", async () => {
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "accept-encoding": "gzip, br" },
      body: JSON.stringify({ model: "fake-chat", stream: true, messages: [{ role: "user", content: "Hi" }] })
    })
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/)
    expect(response.headers.get("content-encoding")).toBeNull()
    const body = await response.text()
    expect(body).toContain("data: [DONE]")
    expect(body.split("\n\n").filter((event) => event.startsWith("data: {")).length).toBeGreaterThan(2)
  })

  it("caps max_tokens at the model's limit before it reaches the upstream", async () => {
    await ask({ max_tokens: 1_000_000 })
    expect(upstream.received.at(-1)?.body["max_tokens"]).toBe(2048)
  })

  it("refuses a prompt longer than the model's context with a 400, before anything is held", async () => {
    const before = await balance()
    const calls = upstream.received.length
    const { body, status } = await post({ model: "fake-chat", messages: [{ role: "user", content: "word ".repeat(40_000) }] })
    expect(status).toBe(400)
    expect(body).toMatchObject({ details: { messages: { _errors: ["Prompt too long for the model"] } } })
    expect(upstream.received.length).toBe(calls)
    expect(await balance()).toBe(before)
  })
})

describe("A long conversation is forwarded as it came: the caller's messages are not encoded again", () => {
  it("sends the caller's message bytes unchanged, escapes and spacing included, after the service's system prompt", async () => {
    const messages = `[ {"role":"user", "content":"caf\\u00e9 \\ud83d\\ude00 \\/ 1", "weight": 1.0} ]`
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: `{"model":"fake-chat","stream":true,"messages":${messages}}`
    })
    expect(response.status).toBe(200)
    await response.text()
    const sent = upstream.received.at(-1)!
    expect(sent.text).toContain(
      `"messages":[${JSON.stringify({ role: "system", content: SYSTEM_PROMPT })}, {"role":"user", "content":"caf\\u00e9`
    )
    expect(sent.text).toContain(`\\ud83d\\ude00 \\/ 1", "weight": 1.0} ]}`)
    expect(sent.body["messages"]).toEqual([{ role: "system", content: SYSTEM_PROMPT }, { role: "user", content: "café 😀 / 1", weight: 1 }])
  })
})

describe("strip_thinking_response: think blocks are removed, even split across chunks at every boundary", () => {
  const reply = "<think>Let me think.</think>\n\nThe answer."

  it("removes them from a non-streamed reply", async () => {
    upstream.script = () => ({ pieces: [reply] })
    const { data } = await ask({ service_parameters: { strip_thinking_response: true } })
    expect(data.choices[0]?.message.content).toBe("The answer.")
  })

  it("removes them from a stream whatever the boundary between two chunks", async () => {
    for (let cut = 0; cut <= reply.length; cut++) {
      upstream.script = () => ({ pieces: [reply.slice(0, cut), reply.slice(cut)] })
      expect(await askStream({ model: "fake-chat:strip_thinking_response=true" })).toBe("The answer.")
    }
  })

  it("removes them one character per chunk, and disable_thinking asks the upstream not to think", async () => {
    upstream.script = () => ({ pieces: [...reply] })
    expect(await askStream({ service_parameters: { disable_thinking: true } })).toBe("The answer.")
    expect(upstream.received.at(-1)?.body["chat_template_kwargs"]).toEqual({ enable_thinking: false })
  })

  it("leaves them in when not asked", async () => {
    upstream.script = () => ({ pieces: [reply] })
    expect(await askStream()).toBe(reply)
  })
})

describe("include_venice_system_prompt and character_slug: the service's prompts go before the caller's", () => {
  const sent = () => upstream.received.at(-1)?.body["messages"] as Array<{ role: string; content: unknown }>

  it("prepends the configured system prompt by default", async () => {
    await ask({ messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }] })
    expect(sent()).toEqual([
      { role: "system", content: SYSTEM_PROMPT },
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" }
    ])
  })

  it("leaves it out when include_venice_system_prompt is false", async () => {
    await ask({ service_parameters: { include_venice_system_prompt: false } })
    expect(sent()).toEqual([{ role: "user", content: "Hi" }])
  })

  it("adds the character's prompt, and refuses an unknown character with a 400 that charges nothing", async () => {
    await ask({ model: "fake-chat:character_slug=captain-nemo&include_venice_system_prompt=false" })
    expect(sent()).toEqual([{ role: "system", content: CHARACTER_PROMPT }, { role: "user", content: "Hi" }])
    const before = await balance()
    const calls = upstream.received.length
    const error = await ask({ service_parameters: { character_slug: "nobody" } }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(await post({ model: "fake-chat", service_parameters: { character_slug: "nobody" } })).toEqual({
      status: 400,
      body: {
        error: "Unknown character: nobody",
        details: { _errors: [], service_parameters: { _errors: [], character_slug: { _errors: ["Unknown character: nobody"] } } }
      }
    })
    expect(upstream.received.length).toBe(calls)
    expect(await balance()).toBe(before)
  })
})

describe("model suffix: <model>:<option>=<value>&... sets service_parameters", () => {
  it("routes to the model without its suffix and applies the options", async () => {
    upstream.script = () => ({ pieces: ["<think>x</think>Done"] })
    const { data } = await ask({ model: "fake-chat:strip_thinking_response=true&include_venice_system_prompt=false" })
    expect(data.choices[0]?.message.content).toBe("Done")
    expect(upstream.received.at(-1)?.body).toMatchObject({ model: "upstream-fake-chat", messages: [{ role: "user", content: "Hi" }] })
  })

  it("answers a bad suffix with a 400 DetailedError", async () => {
    const error = await ask({ model: "fake-chat:enable_web_search=sometimes" }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(await post({ model: "fake-chat:enable_web_search=sometimes" })).toMatchObject({
      status: 400,
      body: { error: expect.any(String), details: { model: { enable_web_search: { _errors: [expect.any(String)] } } } }
    })
  })
})

describe("Streaming: a client that disconnects after N chunks pays for exactly N chunks' tokens", () => {
  it("bills the prompt and the N chunks it received, releases the rest, and hangs up on the upstream", async () => {
    const N = 5
    upstream.script = () => ({ pieces: Array.from({ length: N }, () => " hello"), stall: true })
    const before = await balance()
    const stream = await client.chat.completions.create({
      model: "fake-chat",
      messages: [{ role: "user", content: "Count for me" }],
      stream: true
    })
    let received = 0
    for await (const chunk of stream) {
      if ((chunk.choices[0]?.delta.content ?? "") !== "") received++
      if (received === N) break
    }
    stream.controller.abort()
    await upstream.received.at(-1)?.hungUp
    const usage = await waitFor(async () => {
      const entry = await lastUsage()
      return entry !== undefined && entry.completionTokens === N ? entry : undefined
    })
    const prompt = Tokens.conversation([{ role: "system", content: SYSTEM_PROMPT }, { role: "user", content: "Count for me" }])
    expect(usage).toMatchObject({ promptTokens: prompt, completionTokens: N })
    expect(before - await balance()).toBe(priceOf(prompt, N))
    expect((await ledger((l) => l.balance(accountId))).heldUsd).toBe(0)
  })
})

describe("Upstream errors: 429 passes on with its headers, 503 asks for a retry, nothing is charged", () => {
  it("passes on a 429 and its headers", async () => {
    upstream.script = () => ({ pieces: [], status: 429, headers: { "retry-after": "3", "x-ratelimit-remaining-requests": "0" } })
    const before = await balance()
    const error = await ask().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
    const headers = (error as InstanceType<typeof OpenAI.RateLimitError>).headers
    expect(headers.get("retry-after")).toBe("3")
    expect(headers.get("x-ratelimit-remaining-requests")).toBe("0")
    expect(await balance()).toBe(before)
  })

  it("answers 503 with Retry-After when the upstream fails or cannot be reached, streaming or not", async () => {
    upstream.script = () => ({ pieces: [], status: 502 })
    const before = await balance()
    const failed = await ask().catch((e: unknown) => e)
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
    const unreachable = await askStream({ model: "unreachable-chat" }).catch((e: unknown) => e)
    expect((unreachable as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
    expect((unreachable as InstanceType<typeof OpenAI.APIError>).headers?.get("retry-after")).toBe("2")
    expect(await balance()).toBe(before)
  })
})

describe("Search: web search through the configured SearchProvider, results given to the model and billed", () => {
  it("puts the results before the user's message and bills the search", async () => {
    const before = await balance()
    const { data } = await ask({
      service_parameters: { enable_web_search: "on", enable_web_citations: true, return_search_results_as_documents: true }
    })
    const messages = upstream.received.at(-1)?.body["messages"] as Array<{ role: string; content: string }>
    expect(messages.at(-2)?.content).toContain("https://docs.example/tollgate")
    expect(messages.at(-2)?.content).toContain("[REF]0[/REF]")
    expect(data.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: "service_web_search_documents" } })
    expect(before - await balance()).toBeGreaterThanOrEqual(PricingEngine.defaults.chat.webSearch)
  })

  it("scrapes up to 5 URLs of the user message and bills only the pages it could fetch", async () => {
    const before = await balance()
    const urls = ["https://a.example/one", "https://b.example/missing", "https://c.example/two"]
    await ask({
      messages: [{ role: "user", content: `Compare ${urls.join(", ")} and https://d.example/3 https://e.example/4 https://f.example/5.` }],
      service_parameters: { enable_web_scraping: true }
    })
    const scraped = (upstream.received.at(-1)?.body["messages"] as Array<{ content: string }>).at(-2)?.content ?? ""
    expect(scraped).toContain("Text of https://a.example/one")
    expect(scraped).toContain("Text of https://e.example/4")
    expect(scraped).not.toContain("missing")
    expect(scraped).not.toContain("f.example")
    expect(before - await balance()).toBe(priceOf(10, 2) + 4 * PricingEngine.defaults.chat.webScrapingPerUrl)
    expect(await lastUsage()).toMatchObject({ notes: "4 URLs scraped" })
  })

  it("refuses a search the server has no provider for with a 400 saying so", async () => {
    const error = await ask({ service_parameters: { enable_x_search: true } }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as Error).message).toContain("no search provider is configured")
  })
})
