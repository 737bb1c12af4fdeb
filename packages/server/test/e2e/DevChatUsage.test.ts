/**
 * Dev mode's chat models answer offline and report usage as any OpenAI-compatible server does,
 * driven with the `openai` SDK against the shipped server.
 */
import { ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer
let client: OpenAI

beforeAll(async () => {
  server = await ShippedServer.start()
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: `${server.api}`, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

const messages = [{ role: "system" as const, content: "Be brief." }, {
  role: "user" as const,
  content: "Say hello to the lighthouse keeper"
}]

describe("Dev chat: a completion carries usage, and the call is billed by it", () => {
  it.each(["local-echo", "llama-3.3-70b", "qwen3-4b"])("%s", async (model) => {
    const completion = await client.chat.completions.create({ model, messages })
    expect(completion.choices[0]?.message.content).toContain("Say hello to the lighthouse keeper")
    const usage = completion.usage!
    expect(usage.prompt_tokens).toBeGreaterThan(10)
    expect(usage.completion_tokens).toBeGreaterThan(5)
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens)
    const history = await fetch(`${server.api}/billing/usage-history?sortOrder=desc`, {
      headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
    }).then((response) => response.json()) as { data: ReadonlyArray<{ sku: string; inferenceDetails: Record<string, number> }> }
    expect(history.data[0]).toMatchObject({
      sku: `chat:${model}`,
      inferenceDetails: { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }
    })
  })
})

describe("Dev chat: a stream ends with a usage chunk when stream_options.include_usage is set, and only then", () => {
  it("include_usage: the last chunk has empty choices and the usage of the completion", async () => {
    const stream = await client.chat.completions.create({
      model: "local-echo",
      messages,
      stream: true,
      stream_options: { include_usage: true }
    })
    const chunks = []
    for await (const chunk of stream) chunks.push(chunk)
    const last = chunks.at(-1)!
    expect(last.choices).toEqual([])
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage == null)).toBe(true)
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")
    const completion = await client.chat.completions.create({ model: "local-echo", messages })
    expect(text).toBe(completion.choices[0]?.message.content)
    expect(last.usage).toEqual(completion.usage)
  })

  it("without it, no chunk carries usage", async () => {
    const stream = await client.chat.completions.create({ model: "local-echo", messages, stream: true })
    const chunks = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks.length).toBeGreaterThan(3)
    expect(chunks.every((chunk) => chunk.usage == null && chunk.choices.length === 1)).toBe(true)
  })
})
