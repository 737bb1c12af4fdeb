/**
 * `POST /responses` as the `openai` SDK's `responses.create` drives it, against the shipped server
 * in dev mode: plain and streamed, billed per token exactly as chat is, with the chat options and
 * model suffixes, and a client that hangs up mid-stream pays for what it was sent. The dev models
 * answer locally; a model whose upstream is a fake OpenAI-compatible server (an LLM cannot run
 * here) shows the disconnect.
 */
import { Models } from "@tollgate/core"
import * as Tokens from "@tollgate/documents/Tokens"
import { FakeChatUpstream, ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
let client: OpenAI

/** Nano-USD per million tokens of the models used here (the dev price table, and fake-chat's). */
const prices = {
  "llama-3.3-70b": { input: 700_000_000, output: 2_800_000_000 },
  "qwen3-4b": { input: 50_000_000, output: 150_000_000 },
  "fake-chat": { input: 1_000_000_000, output: 2_000_000_000 }
} as const

const priceOf = (model: keyof typeof prices, prompt: number, completion: number) =>
  Usage.perMillion(prompt, prices[model].input) + Usage.perMillion(completion, prices[model].output)

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  server = await ShippedServer.start({
    config: {
      models: [...Models.defaults, { id: "fake-chat", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "fake-chat": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" } } }
    }
  })
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
})

describe("POST /responses answers output_text and usage, and is charged per token like chat", () => {
  it("a string input: the echo of it, its usage, and the usage report at the nano-USD of those tokens", async () => {
    const response = await client.responses.create({ model: "llama-3.3-70b", input: "hello" })
    expect(response).toMatchObject({ object: "response", status: "completed", model: "llama-3.3-70b" })
    expect(response.output_text).toBe("You said: hello")
    const usage = response.usage!
    expect(usage.input_tokens).toBe(Tokens.conversation([{ role: "user", content: "hello" }]))
    expect(usage.output_tokens).toBe(Tokens.count("You said: hello"))
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens)
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({
      sku: "chat:llama-3.3-70b",
      nano: priceOf("llama-3.3-70b", usage.input_tokens, usage.output_tokens),
      inferenceDetails: { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens }
    })
  })

  it("messages and instructions become the chat conversation, priced as the same chat completion is", async () => {
    const response = await client.responses.create({
      model: "llama-3.3-70b",
      instructions: "Be brief.",
      input: [
        { role: "user", content: "first question" },
        { role: "assistant", content: [{ type: "output_text", text: "first answer", annotations: [] }] },
        { role: "user", content: [{ type: "input_text", text: "second question" }] }
      ]
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(response.output_text).toBe("You said: second question")
    const chat = await client.chat.completions.create({
      model: "llama-3.3-70b",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "first question" },
        { role: "assistant", content: "first answer" },
        { role: "user", content: "second question" }
      ]
    })
    expect(response.usage!.input_tokens).toBe(chat.usage!.prompt_tokens)
    const [chatEntry, responseEntry] = await Usage.latest(server, 2)
    expect(responseEntry!.nano).toBe(chatEntry!.nano)
  })

  it("service_parameters and model suffixes apply: strip_thinking_response drops the think block", async () => {
    const plain = await client.responses.create({ model: "qwen3-4b", input: "hi" })
    expect(plain.output_text).toContain("<think>")
    const suffixed = await client.responses.create({ model: "qwen3-4b:strip_thinking_response=true", input: "hi" })
    expect(suffixed.output_text).toBe("You said: hi")
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({
      sku: "chat:qwen3-4b",
      nano: priceOf("qwen3-4b", suffixed.usage!.input_tokens, suffixed.usage!.output_tokens)
    })
  })
})

describe("POST /responses with stream: true yields the Responses events, ending with response.completed and its usage", () => {
  it("deltas that add up to the text, then the done events and the usage that was charged", async () => {
    const stream = await client.responses.create({ model: "llama-3.3-70b", input: "hello there", stream: true })
    const events = []
    for await (const event of stream) events.push(event)
    const types = events.map((event) => event.type)
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added"
    ])
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed"
    ])
    const deltas = events.flatMap((event) => event.type === "response.output_text.delta" ? [event.delta] : [])
    expect(deltas.length).toBeGreaterThan(1)
    expect(deltas.join("")).toBe("You said: hello there")
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, i) => i))
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
    expect(completed.response.output).toMatchObject([
      { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "You said: hello there" }] }
    ])
    const usage = completed.response.usage!
    expect(usage.input_tokens).toBe(Tokens.conversation([{ role: "user", content: "hello there" }]))
    expect(usage.output_tokens).toBe(Tokens.count("You said: hello there"))
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({ sku: "chat:llama-3.3-70b", nano: priceOf("llama-3.3-70b", usage.input_tokens, usage.output_tokens) })
  })
})

const waitFor = async <A>(f: () => Promise<A | undefined>): Promise<A> => {
  for (let i = 0; i < 100; i++) {
    const found = await f()
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error("timed out")
}

describe("A client that hangs up mid-stream is charged for the deltas it was sent, and the upstream is hung up on", () => {
  it("N deltas of a stalled upstream: the prompt and N completion tokens", async () => {
    const N = 4
    upstream.script = () => ({ pieces: Array.from({ length: N }, () => " hello"), stall: true })
    const stream = await client.responses.create({ model: "fake-chat", input: "Count for me", stream: true })
    let received = 0
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") received++
      if (received === N) break
    }
    stream.controller.abort()
    await upstream.received.at(-1)?.hungUp
    const entry = await waitFor(async () => {
      const [latest] = await Usage.latest(server)
      return latest?.sku === "chat:fake-chat" ? latest : undefined
    })
    const prompt = Tokens.conversation([{ role: "user", content: "Count for me" }])
    expect(entry.inferenceDetails).toMatchObject({ promptTokens: prompt, completionTokens: N })
    expect(entry.nano).toBe(priceOf("fake-chat", prompt, N))
  })
})

const weather = {
  type: "function" as const,
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false
}

describe("POST /responses with function tools: the model's calls come back as function_call items, their outputs go back as tool messages", () => {
  it("a call, not streamed: the upstream got chat tools; the output is the call; the next turn sends its output", async () => {
    upstream.script = () => ({ pieces: [], toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }] })
    const response = await client.responses.create({
      model: "fake-chat",
      input: "Weather in Paris?",
      tools: [weather],
      tool_choice: "auto"
    })
    expect(upstream.received.at(-1)!.body).toMatchObject({
      tools: [{
        type: "function",
        function: { name: "get_weather", description: "The weather in a city", parameters: weather.parameters, strict: false }
      }],
      tool_choice: "auto"
    })
    expect(response.output).toMatchObject([{
      type: "function_call",
      call_id: "call_1",
      name: "get_weather",
      arguments: "{\"city\":\"Paris\"}",
      status: "completed"
    }])
    upstream.script = () => ({ pieces: ["Sunny", " in Paris"] })
    const next = await client.responses.create({
      model: "fake-chat",
      tools: [weather],
      input: [
        { role: "user", content: "Weather in Paris?" },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" },
        { type: "function_call_output", call_id: "call_1", output: "sunny, 21 C" }
      ]
    })
    expect(next.output_text).toBe("Sunny in Paris")
    expect(upstream.received.at(-1)!.body["messages"]).toEqual([
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }]
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" }
    ])
  })

  it("a call, streamed: output_item.added, the argument deltas, their done event, and the call in response.completed", async () => {
    upstream.script = () => ({ pieces: [], toolCalls: [{ id: "call_2", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }] })
    const stream = await client.responses.create({ model: "fake-chat", input: "Weather in Oslo?", tools: [weather], stream: true })
    const events = []
    for await (const event of stream) events.push(event)
    const added = events.find((event) => event.type === "response.output_item.added" && event.item.type === "function_call")
    expect(added).toMatchObject({
      output_index: 1,
      item: { type: "function_call", call_id: "call_2", name: "get_weather", status: "in_progress" }
    })
    const deltas = events.flatMap((event) => event.type === "response.function_call_arguments.delta" ? [event.delta] : [])
    expect(deltas.join("")).toBe("{\"city\":\"Oslo\"}")
    expect(events.find((event) => event.type === "response.function_call_arguments.done")).toMatchObject({
      arguments: "{\"city\":\"Oslo\"}"
    })
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
    expect(completed.response.output[1]).toMatchObject({ type: "function_call", call_id: "call_2", arguments: "{\"city\":\"Oslo\"}" })
  })
})

describe("POST /responses refuses what a stateless translation cannot honor, with a 400 naming the field and no charge", () => {
  it.each([
    ["previous_response_id", { previous_response_id: "resp_123" }],
    ["tools", { tools: [{ type: "web_search_preview" }] }],
    ["input", { input: [{ type: "reasoning", id: "rs_1", summary: [] }] }]
  ])("%s", async (field, extra) => {
    const before = await Usage.latest(server)
    const response = await fetch(`${server.api}/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "llama-3.3-70b", input: "hello", ...extra })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ error: expect.any(String), details: { [field]: expect.anything() } })
    expect(await Usage.latest(server)).toEqual(before)
  })

  it("an unknown model is a 400 naming model", async () => {
    await expect(client.responses.create({ model: "no-such-model", input: "hello" })).rejects.toBeInstanceOf(OpenAI.BadRequestError)
  })
})
