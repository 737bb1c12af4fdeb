/**
 * `POST /messages` and `/messages/count_tokens` as `@anthropic-ai/sdk` drives them (its `baseURL`
 * the server's `/api`, its key sent as `x-api-key`), against the shipped server in dev mode: each
 * call billed once, at the price of the same conversation on `/chat/completions`. The dev models
 * answer locally; a model whose upstream is a fake OpenAI-compatible server (an LLM cannot run
 * here) shows what is translated for the upstream and the tool-use round trip.
 */
import Anthropic from "@anthropic-ai/sdk"
import { Models } from "@tollgate/core"
import { FakeChatUpstream, ShippedServer, TestDocuments } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
let anthropic: Anthropic
let openai: OpenAI

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  server = await ShippedServer.start({
    config: {
      models: [
        ...Models.defaults,
        { id: "fake-chat", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        { id: "fake-down-large", type: "text", tier: "L", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] }
      ],
      prices: {
        chat: {
          "fake-chat": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" },
          "fake-down-large": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" }
        }
      }
    }
  })
  anthropic = new Anthropic({ apiKey: server.credentials!.inferenceKey, baseURL: `${server.origin}/api`, maxRetries: 0 })
  openai = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
})

const nano = (usd: number) => Math.round(usd * 1e9)

/** The usage entries written while `f` ran, newest first. */
const billed = async <A>(f: () => Promise<A>): Promise<{ readonly result: A; readonly entries: ReadonlyArray<Usage.Entry> }> => {
  const [before] = await Usage.latest(server)
  const result = await f()
  const latest = await Usage.latest(server, 10)
  const index = before === undefined
    ? latest.length
    : latest.findIndex((entry) => entry.inferenceDetails.requestId === before.inferenceDetails.requestId)
  return { result, entries: latest.slice(0, index) }
}

const conversation = {
  system: "Be brief.",
  messages: [
    { role: "user" as const, content: "first question" },
    { role: "assistant" as const, content: "first answer" },
    { role: "user" as const, content: "second question" }
  ]
}

const chatConversation = [
  { role: "system" as const, content: "Be brief." },
  { role: "user" as const, content: "first question" },
  { role: "assistant" as const, content: "first answer" },
  { role: "user" as const, content: "second question" }
]

describe("messages.create: the model's answer as an Anthropic message, billed once at the price of the same chat call", () => {
  it("system and multi-turn messages: the text, end_turn, the usage billed, usage.cost the ledger's amount", async () => {
    const { entries, result: message } = await billed(() =>
      anthropic.messages.create({ model: "llama-3.3-70b", max_tokens: 256, ...conversation })
    )
    expect(message).toMatchObject({ type: "message", role: "assistant", model: "llama-3.3-70b", stop_reason: "end_turn" })
    expect(message.id).toMatch(/^msg_/u)
    expect(message.content).toEqual([{ type: "text", text: "You said: second question" }])
    expect(entries).toHaveLength(1)
    const [entry] = entries
    expect(entry).toMatchObject({
      sku: "chat:llama-3.3-70b",
      inferenceDetails: { promptTokens: message.usage.input_tokens, completionTokens: message.usage.output_tokens }
    })
    expect(nano((message.usage as unknown as { cost: number }).cost)).toBe(entry!.nano)

    const chat = await billed(() => openai.chat.completions.create({ model: "llama-3.3-70b", max_tokens: 256, messages: chatConversation }))
    expect(chat.result.usage!.prompt_tokens).toBe(message.usage.input_tokens)
    expect(chat.entries[0]!.nano).toBe(entry!.nano)
  })

  it("max_tokens, stop_sequences, temperature and top_k reach the upstream as chat's fields; images as image_url parts", async () => {
    upstream.script = () => ({ pieces: ["A cat"] })
    await anthropic.messages.create({
      model: "fake-chat",
      max_tokens: 100,
      stop_sequences: ["END"],
      temperature: 0.5,
      top_k: 20,
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
        ]
      }]
      // the SDK's types no longer list temperature and top_k; the API and this route still take them
    } as Anthropic.MessageCreateParamsNonStreaming)
    expect(upstream.received.at(-1)!.body).toMatchObject({
      max_tokens: 100,
      stop: ["END"],
      temperature: 0.5,
      top_k: 20,
      messages: [{
        role: "user",
        content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }]
      }]
    })
  })
})

describe("models: fallback models, as on chat: the first model that can serve the call does, under its own name and price", () => {
  it("an unknown first model gives way to the next", async () => {
    const { entries, result: message } = await billed(() =>
      anthropic.messages.create(
        {
          model: "no-such-model",
          models: ["llama-3.3-70b"],
          max_tokens: 64,
          messages: [{ role: "user", content: "hi" }]
        } as Anthropic.MessageCreateParamsNonStreaming
      )
    )
    expect(message.model).toBe("llama-3.3-70b")
    expect(entries.map((entry) => entry.sku)).toEqual(["chat:llama-3.3-70b"])
  })

  it("a first model of tier L whose upstream is down: the M model that serves counts the call, the L limits are untouched", async () => {
    upstream.script = () => ({ pieces: ["From M"] })
    const { data: message, response } = await anthropic.messages
      .create(
        {
          model: "fake-down-large",
          models: ["fake-chat"],
          max_tokens: 64,
          messages: [{ role: "user", content: "hi" }]
        } as Anthropic.MessageCreateParamsNonStreaming
      )
      .withResponse()
    expect(message.model).toBe("fake-chat")
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("50")
    const listed = await fetch(`${server.api}/api_keys/rate_limits`, {
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` }
    })
    const { limits } = await listed.json() as {
      limits: ReadonlyArray<{ modelTier?: string; type: string; requests?: { limit: number; remaining: number } }>
    }
    const large = limits.find((limit) => limit.modelTier === "L" && limit.type === "user")!
    expect(large.requests!.remaining).toBe(large.requests!.limit)
  })
})

describe("messages.stream: Anthropic's event sequence, with the billed usage in message_delta", () => {
  it("message_start, the text block, message_delta and message_stop; billed once at the price of the same chat call", async () => {
    const { entries, result } = await billed(async () => {
      const stream = anthropic.messages.stream({ model: "llama-3.3-70b", max_tokens: 256, ...conversation })
      const types: Array<string> = []
      let cost: number | undefined
      for await (const event of stream) {
        types.push(event.type)
        if (event.type === "message_delta") cost = (event.usage as unknown as { cost: number }).cost
      }
      return { types, cost, message: await stream.finalMessage() }
    })
    expect(result.types[0]).toBe("message_start")
    expect(result.types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"])
    expect(result.types.filter((type) => type === "content_block_delta").length).toBeGreaterThan(1)
    expect(result.message.content).toMatchObject([{ type: "text", text: "You said: second question" }])
    expect(entries).toHaveLength(1)
    const chat = await billed(() => openai.chat.completions.create({ model: "llama-3.3-70b", max_tokens: 256, messages: chatConversation }))
    expect(entries[0]!.nano).toBe(chat.entries[0]!.nano)
    expect(result.message.usage).toMatchObject({
      input_tokens: chat.result.usage!.prompt_tokens,
      output_tokens: chat.result.usage!.completion_tokens
    })
    expect(nano(result.cost!)).toBe(entries[0]!.nano)
  })
})

const weather: Anthropic.Tool = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
}

describe("Tool use: tools become chat tools, the model's calls tool_use blocks, tool_result blocks tool messages", () => {
  it("a round trip, each turn billed once", async () => {
    upstream.script = () => ({ pieces: [], toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }] })
    const first = await billed(() =>
      anthropic.messages.create({
        model: "fake-chat",
        max_tokens: 200,
        tools: [weather],
        tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
        messages: [{ role: "user", content: "Weather in Paris?" }]
      })
    )
    expect(upstream.received.at(-1)!.body).toMatchObject({
      tools: [{
        type: "function",
        function: { name: "get_weather", description: "The weather in a city", parameters: weather.input_schema }
      }],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false
    })
    expect(first.result.stop_reason).toBe("tool_use")
    expect(first.result.content).toEqual([{ type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }])
    expect(first.entries).toHaveLength(1)

    upstream.script = () => ({ pieces: ["Sunny", " in Paris"] })
    const second = await billed(() =>
      anthropic.messages.create({
        model: "fake-chat",
        max_tokens: 200,
        tools: [weather],
        messages: [
          { role: "user", content: "Weather in Paris?" },
          { role: "assistant", content: first.result.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "call_1", content: "sunny, 21 C" }] }
        ]
      })
    )
    expect(upstream.received.at(-1)!.body["messages"]).toEqual([
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }]
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" }
    ])
    expect(second.result.content).toEqual([{ type: "text", text: "Sunny in Paris" }])
    expect(second.entries).toHaveLength(1)
    expect(second.entries[0]).toMatchObject({
      sku: "chat:fake-chat",
      nano: Usage.perMillion(10, 1_000_000_000) + Usage.perMillion(2, 2_000_000_000)
    })
  })

  it("streamed: a tool_use block whose input_json_delta pieces make the input", async () => {
    upstream.script = () => ({
      pieces: ["Let me check."],
      toolCalls: [{ id: "call_2", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }]
    })
    const stream = anthropic.messages.stream({
      model: "fake-chat",
      max_tokens: 200,
      tools: [weather],
      messages: [{ role: "user", content: "Oslo?" }]
    })
    const message = await stream.finalMessage()
    expect(message.stop_reason).toBe("tool_use")
    expect(message.content).toMatchObject([{ type: "text", text: "Let me check." }, {
      type: "tool_use",
      id: "call_2",
      name: "get_weather",
      input: { city: "Oslo" }
    }])
  })
})

describe("Extended thinking: the model's reasoning as thinking blocks when thinking is on, streamed and not; earlier thinking is not sent upstream", () => {
  const request = {
    model: "fake-chat",
    max_tokens: 2048,
    thinking: { type: "enabled" as const, budget_tokens: 1024 },
    messages: [
      { role: "user" as const, content: "first" },
      {
        role: "assistant" as const,
        content: [{ type: "thinking" as const, thinking: "earlier thought", signature: "sig" }, {
          type: "text" as const,
          text: "first answer"
        }]
      },
      { role: "user" as const, content: "second" }
    ]
  }

  it("messages.create: a thinking block before the text, billed once; the upstream gets the turns without their thinking", async () => {
    upstream.script = () => ({ reasoning: ["Weighing", " it"], pieces: ["Answer"], usage: { prompt_tokens: 20, completion_tokens: 5 } })
    const { entries, result: message } = await billed(() => anthropic.messages.create(request))
    expect(message.content).toEqual([{ type: "thinking", thinking: "Weighing it", signature: "" }, { type: "text", text: "Answer" }])
    expect(entries).toHaveLength(1)
    expect(message.usage.output_tokens).toBe(5)
    expect(upstream.received.at(-1)!.body["messages"]).toEqual([
      { role: "user", content: "first" },
      { role: "assistant", content: "first answer" },
      { role: "user", content: "second" }
    ])
  })

  it("messages.stream: a thinking block of thinking_delta events, then the text block", async () => {
    upstream.script = () => ({ reasoning: ["Weighing", " it"], pieces: ["Ans", "wer"] })
    const stream = anthropic.messages.stream(request)
    const deltas: Array<string> = []
    for await (const event of stream) if (event.type === "content_block_delta") deltas.push(event.delta.type)
    expect(deltas).toEqual(["thinking_delta", "thinking_delta", "text_delta", "text_delta"])
    expect((await stream.finalMessage()).content).toEqual([{ type: "thinking", thinking: "Weighing it", signature: "" }, {
      type: "text",
      text: "Answer"
    }])
  })

  it("think tags in the text are thought too, streamed and not", async () => {
    upstream.script = () => ({ pieces: ["<think>Inline", " thought</th", "ink>\n\nAnswer"] })
    const thinking = [{ type: "thinking", thinking: "Inline thought", signature: "" }, { type: "text", text: "Answer" }]
    expect((await anthropic.messages.create(request)).content).toEqual(thinking)
    expect((await anthropic.messages.stream(request).finalMessage()).content).toEqual(thinking)
  })

  it("adaptive thinking shows the reasoning as well; with display omitted it is billed and not sent", async () => {
    upstream.script = () => ({ reasoning: ["Weighing"], pieces: ["Answer"] })
    const adaptive = { model: "fake-chat", max_tokens: 64, messages: [{ role: "user" as const, content: "hi" }] }
    expect((await anthropic.messages.create({ ...adaptive, thinking: { type: "adaptive" } })).content)
      .toEqual([{ type: "thinking", thinking: "Weighing", signature: "" }, { type: "text", text: "Answer" }])
    expect((await anthropic.messages.create({ ...adaptive, thinking: { type: "adaptive", display: "omitted" } })).content)
      .toEqual([{ type: "text", text: "Answer" }])
  })

  it("without thinking on, the reasoning is billed and not sent", async () => {
    upstream.script = () => ({ reasoning: ["Weighing"], pieces: ["Answer"] })
    const message = await anthropic.messages.create({ model: "fake-chat", max_tokens: 64, messages: [{ role: "user", content: "hi" }] })
    expect(message.content).toEqual([{ type: "text", text: "Answer" }])
  })
})

describe("Documents: text and base64 PDF documents reach the upstream as text parts; a document by URL or file id is a 400 naming its field", () => {
  it("a text document and a PDF, their titles first, billed once", async () => {
    upstream.script = () => ({ pieces: ["Read"] })
    const pdf = Buffer.from(TestDocuments.read("tika/testPDF.pdf")).toString("base64")
    const { entries } = await billed(() =>
      anthropic.messages.create({
        model: "fake-chat",
        max_tokens: 64,
        messages: [{
          role: "user",
          content: [
            { type: "document", source: { type: "text", media_type: "text/plain", data: "The grass is green." }, title: "Notes" },
            { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf } },
            { type: "text", text: "Summarize both." }
          ]
        }]
      })
    )
    expect(entries).toHaveLength(1)
    const [message] = upstream.received.at(-1)!.body["messages"] as ReadonlyArray<
      { content: ReadonlyArray<{ type: string; text: string }> }
    >
    expect(message!.content.map((part) => part.type)).toEqual(["text", "text", "text"])
    expect(message!.content[0]!.text).toBe("Notes\n\nThe grass is green.")
    expect(message!.content[1]!.text).toContain("Apache Tika")
  })

  it.each([
    ["a PDF by URL", { type: "url", url: "https://example.com/a.pdf" }, "messages.0.content.0.source.type"],
    ["a Files API id", { type: "file", file_id: "file_1" }, "messages.0.content.0.source.type"],
    ["a PDF that cannot be read", {
      type: "base64",
      media_type: "application/pdf",
      data: Buffer.from("%PDF-1.7 broken").toString("base64")
    }, "messages.0.content.0.source.data"]
  ])("%s", async (_, source, field) => {
    const { entries, result } = await billed(() =>
      anthropic.messages.create({
        model: "fake-chat",
        max_tokens: 64,
        messages: [{ role: "user", content: [{ type: "document", source } as Anthropic.DocumentBlockParam] }]
      }).then(() => undefined, (error: unknown) => error)
    )
    expect(result).toBeInstanceOf(Anthropic.BadRequestError)
    expect((result as InstanceType<typeof Anthropic.BadRequestError>).message).toContain(field)
    expect(entries).toHaveLength(0)
  })
})

describe("Server tools are not translated: a 400 naming the tool, pointing a web search at service_parameters", () => {
  it("web_search_20250305", async () => {
    const refused = anthropic.messages.create({
      model: "fake-chat",
      max_tokens: 64,
      tools: [{ type: "web_search_20250305", name: "web_search" }],
      messages: [{ role: "user", content: "news?" }]
    })
    await expect(refused).rejects.toBeInstanceOf(Anthropic.BadRequestError)
    await expect(refused).rejects.toThrow(/tools\.0\.type: Server tools \(web_search_20250305\).*service_parameters\.enable_web_search/u)
  })
})

describe("countTokens: the input tokens as they are billed, for free", () => {
  it("equals the input_tokens of the same request's message, and charges nothing", async () => {
    const { entries, result: counted } = await billed(() => anthropic.messages.countTokens({ model: "llama-3.3-70b", ...conversation }))
    expect(entries).toHaveLength(0)
    const message = await anthropic.messages.create({ model: "llama-3.3-70b", max_tokens: 256, ...conversation })
    expect(counted.input_tokens).toBe(message.usage.input_tokens)
  })
})

describe("Keys and errors on the Messages API: x-api-key or Bearer; failures in Anthropic's error shape, charging nothing", () => {
  const post = (body: unknown, headers: Record<string, string>) =>
    fetch(`${server.api}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
  const hello = { model: "llama-3.3-70b", max_tokens: 64, messages: [{ role: "user", content: "hello" }] }

  it("Authorization: Bearer works as x-api-key does", async () => {
    const response = await post(hello, { authorization: `Bearer ${server.credentials!.inferenceKey}`, "anthropic-version": "2023-06-01" })
    expect(response.status).toBe(200)
  })

  it.each([
    ["an unknown model", { ...hello, model: "no-such-model" }, {}, 400, "invalid_request_error"],
    [
      "a thinking budget not below max_tokens",
      { ...hello, thinking: { type: "enabled", budget_tokens: 1024 } },
      {},
      400,
      "invalid_request_error"
    ],
    ["a bad anthropic-version", hello, { "anthropic-version": "latest" }, 400, "invalid_request_error"],
    ["a bad key", hello, { "x-api-key": "not-a-key" }, 401, "authentication_error"]
  ])("%s", async (_, body, headers, status, type) => {
    const { entries, result: response } = await billed(() => post(body, { "x-api-key": server.credentials!.inferenceKey, ...headers }))
    expect(response.status).toBe(status)
    expect(await response.json()).toEqual({ type: "error", error: { type, message: expect.any(String) } })
    expect(entries).toHaveLength(0)
  })

  it("a caller without a key gets the x402 payment request every paid route answers, its body the payment protocol's", async () => {
    const response = await post(hello, {})
    expect(response.status).toBe(402)
    const body = await response.json() as { resource: { url: string } }
    expect(body.resource.url).toBe(`http://localhost:${server.port}/api/v1/messages`)
    expect(response.headers.get("payment-required")).not.toBeNull()
  })

  it("the SDK reads them as its own errors", async () => {
    await expect(anthropic.messages.create({ ...hello, model: "no-such-model" } as Anthropic.MessageCreateParamsNonStreaming))
      .rejects.toBeInstanceOf(Anthropic.BadRequestError)
  })
})
