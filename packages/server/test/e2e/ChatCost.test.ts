/**
 * What a chat call cost, in its answer and afterwards, and the models that may serve it, through the
 * shipped server in production on Redis, driven by the `openai` SDK: `usage.cost` is the usage
 * report's amount to the nano (chat, streamed chat, Responses, embeddings); `GET /generation` tells
 * the account that made a call what it did and nobody else; `models: [a, b]` with a down is served
 * and billed as b; cached prompt tokens are billed at the cached-input price. The upstreams are a
 * fake OpenAI-compatible server (an LLM cannot run here) and a port nothing listens on.
 */
import { Models } from "@tollgate/core"
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

const redis = await RedisServer.start()
let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
let client: OpenAI

/** Nano-USD per million tokens of the models used here. */
const prices = {
  "fake-down": { input: 9_000_000_000, output: 9_000_000_000 },
  "fake-chat": { input: 1_000_000_000, output: 2_000_000_000 },
  "fake-cached": { input: 1_000_000_000, output: 2_000_000_000, cached: 100_000_000 }
} as const

const priceOf = (model: keyof typeof prices, prompt: number, completion: number) =>
  Usage.perMillion(prompt, prices[model].input) + Usage.perMillion(completion, prices[model].output)

const nano = (usd: number) => Math.round(usd * 1e9)

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  server = await ShippedServer.start({
    store: "redis",
    redisUrl: redis.url,
    signingKey: true,
    timeoutMs: 150_000,
    config: {
      models: [
        ...Models.defaults,
        { id: "fake-down", type: "text", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] },
        { id: "fake-chat", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        { id: "fake-other", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        { id: "fake-cached", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        { id: "fake-down-large", type: "text", tier: "L", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] },
        { id: "fake-small", type: "text", tier: "S", upstreams: [{ baseUrl: upstream.baseUrl }] }
      ],
      prices: {
        chat: {
          "fake-down": { inputPerMillionUsd: "9", outputPerMillionUsd: "9" },
          "fake-chat": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" },
          "fake-other": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" },
          "fake-cached": { inputPerMillionUsd: "1", outputPerMillionUsd: "2", cachedInputPerMillionUsd: "0.1" },
          "fake-down-large": { inputPerMillionUsd: "9", outputPerMillionUsd: "9" },
          "fake-small": { inputPerMillionUsd: "1", outputPerMillionUsd: "2" }
        }
      }
    }
  })
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
}, 180_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await redis.stop()
})

const generation = (id: string, key = server.credentials!.inferenceKey) =>
  fetch(`${server.api}/generation?id=${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } })

describe("usage.cost is what the ledger captured, to the nano: the usage report's amount", () => {
  it("a chat completion", async () => {
    upstream.script = () => ({ pieces: ["Hello", " there"], usage: { prompt_tokens: 12, completion_tokens: 2 } })
    const completion = await client.chat.completions.create({ model: "fake-chat", messages: [{ role: "user", content: "hi" }] })
    const cost = (completion.usage as unknown as { cost: number }).cost
    const [entry] = await Usage.latest(server)
    expect(entry!.nano).toBe(priceOf("fake-chat", 12, 2))
    expect(nano(cost)).toBe(entry!.nano)
  })

  it("a streamed chat completion: the final usage chunk", async () => {
    upstream.script = () => ({ pieces: ["a", "b", "c"], usage: { prompt_tokens: 30, completion_tokens: 3 } })
    const stream = await client.chat.completions.create({
      model: "fake-chat",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true }
    })
    const ids = new Set<string>()
    let cost: number | undefined
    for await (const chunk of stream) {
      ids.add(chunk.id)
      if (chunk.usage != null) cost = (chunk.usage as unknown as { cost: number }).cost
    }
    const [entry] = await Usage.latest(server)
    expect(entry!.nano).toBe(priceOf("fake-chat", 30, 3))
    expect(nano(cost!)).toBe(entry!.nano)
    expect([...ids]).toHaveLength(1)
    expect([...ids][0]).not.toContain("fake")
  })

  it("a Responses answer, and an embeddings answer", async () => {
    upstream.script = () => ({ pieces: ["Fine"], usage: { prompt_tokens: 7, completion_tokens: 1 } })
    const response = await client.responses.create({ model: "fake-chat", input: "hello" })
    const [answered] = await Usage.latest(server)
    expect(nano((response.usage as unknown as { cost: number }).cost)).toBe(answered!.nano)
    const embedded = await client.embeddings.create({ model: "dev-embedding", input: "some words to embed" })
    const [entry] = await Usage.latest(server)
    expect(entry!.sku).toBe("embedding:dev-embedding")
    expect(nano((embedded.usage as unknown as { cost: number }).cost)).toBe(entry!.nano)
  })
})

describe("GET /generation tells the account that made a call what it did, and answers another account's id like an unknown one", () => {
  it("model, upstream, tokens, cost, latency and whether it was cut short; 404 for another account and an unknown id", async () => {
    upstream.script = () => ({ pieces: ["One", " two"], usage: { prompt_tokens: 9, completion_tokens: 2 } })
    const first = await client.chat.completions.create({ model: "fake-chat", messages: [{ role: "user", content: "count" }] })
    const second = await client.chat.completions.create({ model: "fake-chat", messages: [{ role: "user", content: "count" }] })
    expect(first.id).not.toBe(second.id)
    const response = await generation(second.id)
    expect(response.status).toBe(200)
    const { data } = await response.json() as { data: Record<string, unknown> }
    const [entry] = await Usage.latest(server)
    expect(data).toMatchObject({
      id: second.id,
      model: "fake-chat",
      upstream: new URL(upstream.baseUrl).host,
      prompt_tokens: 9,
      completion_tokens: 2,
      cached_tokens: 0,
      cut_short: false
    })
    expect(nano(data["cost"] as number)).toBe(entry!.nano)
    expect(data["latency_ms"]).toEqual(expect.any(Number))

    await server.cli(["accounts", "create", "--id", "acct_other"])
    const other = String((await server.cli(["keys", "mint", "--account", "acct_other", "--type", "INFERENCE"]))["apiKey"])
    const refused = await generation(second.id, other)
    const unknown = await generation("chatcmpl-unknown", other)
    expect([refused.status, unknown.status]).toEqual([404, 404])
    expect(await refused.json()).toEqual({ ...(await unknown.json() as object), error: expect.any(String) })
  })

  it("a stream the client left is cut short", async () => {
    upstream.script = () => ({ pieces: ["a", "b", "c", "d"], stall: true })
    const stream = await client.chat.completions.create({ model: "fake-chat", messages: [{ role: "user", content: "go" }], stream: true })
    let id = ""
    let pieces = 0
    for await (const chunk of stream) {
      id = chunk.id
      if (chunk.choices[0]?.delta.content) pieces++
      if (pieces === 4) break
    }
    stream.controller.abort()
    const data = await waitFor(async () => {
      const response = await generation(id)
      return response.status === 200 ? (await response.json() as { data: Record<string, unknown> }).data : undefined
    })
    expect(data).toMatchObject({ id, model: "fake-chat", completion_tokens: 4, cut_short: true })
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

describe("models: [a, b] with a's upstream down is served by b, named b and billed at b's price", () => {
  it("a chat completion, not streamed and streamed", async () => {
    upstream.script = () => ({ pieces: ["From", " b"], usage: { prompt_tokens: 11, completion_tokens: 2 } })
    const completion = await client.chat.completions.create({
      model: "fake-down",
      models: ["fake-down", "fake-chat"],
      messages: [{ role: "user", content: "who answers?" }]
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
    expect(completion.model).toBe("fake-chat")
    expect(completion.choices[0]!.message.content).toBe("From b")
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({ sku: "chat:fake-chat", nano: priceOf("fake-chat", 11, 2) })
    expect(upstream.received.at(-1)!.body).not.toHaveProperty("models")

    const stream = await client.chat.completions.create({
      models: ["fake-down", "fake-chat"],
      messages: [{ role: "user", content: "who answers?" }],
      stream: true
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming)
    const models = new Set<string>()
    for await (const chunk of stream) models.add(chunk.model)
    expect([...models]).toEqual(["fake-chat"])
    const [streamed] = await Usage.latest(server)
    expect(streamed).toMatchObject({ sku: "chat:fake-chat", nano: priceOf("fake-chat", 11, 2) })
    const { data } = await (await generation(completion.id)).json() as { data: Record<string, unknown> }
    expect(data["model"]).toBe("fake-chat")
  })

  it("a stream that has started stays with its model: an upstream that breaks off ends it, the next model is not asked", async () => {
    upstream.script = () => ({ pieces: ["one", " two"], breakOff: true })
    const asked = upstream.received.length
    const stream = await client.chat.completions.create({
      models: ["fake-chat", "fake-other"],
      messages: [{ role: "user", content: "go" }],
      stream: true
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming)
    let id = ""
    let text = ""
    await expect((async () => {
      for await (const chunk of stream) {
        id = chunk.id
        text += chunk.choices[0]?.delta.content ?? ""
      }
    })()).rejects.toThrow()
    expect(text).toBe("one two")
    expect(upstream.received.slice(asked).map((received) => received.body["model"])).toEqual(["fake-chat"])
    const data = await waitFor(async () => {
      const response = await generation(id)
      return response.status === 200 ? (await response.json() as { data: Record<string, unknown> }).data : undefined
    })
    expect(data).toMatchObject({ model: "fake-chat", cut_short: true })
  })

  it("the hold covers the dearest model of the list: a balance enough for b alone is refused for [b, a]", async () => {
    await server.cli(["accounts", "create", "--id", "acct_small"])
    const key = String((await server.cli(["keys", "mint", "--account", "acct_small", "--type", "INFERENCE"]))["apiKey"])
    await server.cli(["credits", "grant", "--account", "acct_small", "--usd", "0.0001", "--reference", "small"])
    const small = new OpenAI({ apiKey: key, baseURL: server.api, maxRetries: 0 })
    upstream.script = () => ({ pieces: ["ok"], usage: { prompt_tokens: 5, completion_tokens: 1 } })
    const request = { model: "fake-chat", max_tokens: 10, messages: [{ role: "user" as const, content: "hi" }] }
    await expect(
      small.chat.completions.create(
        { ...request, models: ["fake-chat", "fake-down"] } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming
      )
    )
      .rejects.toMatchObject({ status: 402 })
    const served = await small.chat.completions.create(request)
    expect(served.model).toBe("fake-chat")
  })

  it("a Responses call", async () => {
    upstream.script = () => ({ pieces: ["b"], usage: { prompt_tokens: 5, completion_tokens: 1 } })
    const response = await client.responses.create(
      { model: "fake-down", models: ["fake-chat"], input: "hi" } as OpenAI.Responses.ResponseCreateParamsNonStreaming
    )
    expect(response.model).toBe("fake-chat")
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({ sku: "chat:fake-chat", nano: priceOf("fake-chat", 5, 1) })
  })

  it("an unknown first model gives way too; when every model is down the call is a 503 and charged nothing", async () => {
    upstream.script = () => ({ pieces: ["ok"], usage: { prompt_tokens: 5, completion_tokens: 1 } })
    const completion = await client.chat.completions.create({
      model: "no-such-model",
      models: ["fake-chat"],
      messages: [{ role: "user", content: "hi" }]
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
    expect(completion.model).toBe("fake-chat")
    const before = await Usage.latest(server)
    await expect(client.chat.completions.create({
      model: "fake-down",
      models: ["fake-down"],
      messages: [{ role: "user", content: "hi" }]
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)).rejects.toMatchObject({ status: 503 })
    expect(await Usage.latest(server)).toEqual(before)
  })
})

describe("The rate limits counted are those of the model that served: a fallback of another tier counts the call under its own", () => {
  it("a chat call asked of an L model and served by an S fallback, not streamed and streamed", async () => {
    // No other call here is of tier S or L, so their counts are this test's.
    upstream.script = () => ({ pieces: ["small"], usage: { prompt_tokens: 6, completion_tokens: 1 } })
    const request = {
      model: "fake-down-large",
      models: ["fake-down-large", "fake-small"],
      max_tokens: 50,
      messages: [{ role: "user", content: "hi" }]
    }
    const { data: completion, response } = await client.chat.completions
      .create(request as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      .withResponse()
    expect(completion.model).toBe("fake-small")
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("75")
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("74")
    const streamed = await client.chat.completions
      .create({ ...request, stream: true } as OpenAI.Chat.ChatCompletionCreateParamsStreaming)
      .withResponse()
    for await (const _ of streamed.data) { /* read to its end, so the call settles */ }
    expect(streamed.response.headers.get("x-ratelimit-remaining-requests")).toBe("73")

    const limits = await waitFor(async () => {
      const listed = await fetch(`${server.api}/api_keys/rate_limits`, {
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` }
      })
      const body = await listed.json() as {
        limits: ReadonlyArray<
          { modelTier?: string; type: string; requests?: { remaining: number }; tokens?: { limit: number; remaining: number } }
        >
      }
      const small = body.limits.find((limit) => limit.modelTier === "S" && limit.type === "user")!
      // The streamed call's tokens are settled to its use once its stream has ended.
      return small.tokens!.limit - small.tokens!.remaining === 2 * (6 + 1) ? body.limits : undefined
    })
    const tier = (modelTier: string) => limits.find((limit) => limit.modelTier === modelTier && limit.type === "user")!
    expect(tier("S").requests!.remaining).toBe(73)
    expect(tier("L").requests!.remaining).toBe(20)
    expect(tier("L").tokens!.remaining).toBe(tier("L").tokens!.limit)
  })
})

describe("Cached prompt tokens are billed at the model's cached-input price, shown in usage and in the usage notes", () => {
  it("1,000 prompt tokens of which 800 cached", async () => {
    upstream.script = () => ({
      pieces: ["x"],
      usage: { prompt_tokens: 1_000, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 800 } }
    })
    const completion = await client.chat.completions.create({ model: "fake-cached", messages: [{ role: "user", content: "again" }] })
    expect(completion.usage!.prompt_tokens_details!.cached_tokens).toBe(800)
    const [entry] = await Usage.latest(server)
    const expected = Usage.perMillion(200, prices["fake-cached"].input) + Usage.perMillion(800, prices["fake-cached"].cached) +
      Usage.perMillion(1, prices["fake-cached"].output)
    expect(entry!.nano).toBe(expected)
    expect(entry!.notes).toContain("800 cached prompt tokens")
    expect(nano((completion.usage as unknown as { cost: number }).cost)).toBe(expected)
    const { data } = await (await generation(completion.id)).json() as { data: Record<string, unknown> }
    expect(data["cached_tokens"]).toBe(800)
  })
})
