/**
 * A chat call's money through the shipped server: its prompt is held and reserved at a bound read
 * from its bytes (never below its token count, so the hold covers the call), and settled at the
 * upstream's usage, the rest of the hold going back; a prompt larger than the tokens left in the
 * key's minute is refused with the spec's 429 before the upstream hears of it. The model is a fake
 * OpenAI-compatible upstream that records every call it receives.
 */
import * as Tokens from "@tollgate/documents/Tokens"
import { FakeChatUpstream, RateWindow, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** Tokens per minute of the model's tier, for every caller of the default tier. */
const TOKENS_PER_MINUTE = 20_000
/** USD per million input and output tokens. */
const INPUT_USD = 1
const OUTPUT_USD = 2

let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
let key: string

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  server = await ShippedServer.start({
    config: {
      models: [{ id: "held-chat", type: "text", tier: "M", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "held-chat": { inputPerMillionUsd: String(INPUT_USD), outputPerMillionUsd: String(OUTPUT_USD) } } },
      rateLimits: { tiers: { default: { "text:M": { tokens: TOKENS_PER_MINUTE } } } }
    }
  })
  key = server.credentials!.inferenceKey
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
})

const usd = (input: number, output: number) => (input * INPUT_USD + output * OUTPUT_USD) / 1_000_000

const chat = (content: string, maxTokens: number) =>
  fetch(`${server.api}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "held-chat",
      stream: true,
      max_tokens: maxTokens,
      messages: [{ role: "user", content }],
      service_parameters: { include_venice_system_prompt: false }
    })
  })

interface Standing {
  readonly balances: { readonly usd: string; readonly heldUsd: string }
  readonly limits: ReadonlyArray<{ readonly kind: string; readonly modelTier?: string; readonly tokens?: { readonly remaining: number } }>
}

const standing = async (): Promise<{ usd: number; held: number; tokensLeft: number }> => {
  const body = await (await fetch(`${server.api}/api_keys/rate_limits`, { headers: { authorization: `Bearer ${key}` } })).json() as Standing
  const text = body.limits.find((limit) => limit.kind === "text" && limit.modelTier === "M")
  return { usd: Number(body.balances.usd), held: Number(body.balances.heldUsd), tokensLeft: text?.tokens?.remaining ?? Number.NaN }
}

const waitFor = async <A>(probe: () => Promise<A | undefined>): Promise<A> => {
  for (let i = 0; i < 400; i++) {
    const found = await probe()
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error("timed out waiting")
}

describe("A chat call is held at its prompt's byte bound and settled at the upstream's usage: the rest of the hold goes back", () => {
  it("holds the bound's price while the stream runs, then charges exactly the usage and holds nothing", async () => {
    await RateWindow.fresh(30_000)
    const prompt = "Naïve café owners count tokens, not bytes. ".repeat(60)
    const messages = [{ role: "user", content: prompt }]
    expect(Tokens.conversationBound(messages)).toBeGreaterThan(Tokens.conversation(messages) * 2)
    upstream.script = () => ({ pieces: ["One", " two", " three"], delayMs: 150, usage: { prompt_tokens: 640, completion_tokens: 3 } })
    const before = await standing()

    const response = await chat(prompt, 100)
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    await reader.read()
    const during = await standing()
    // The prompt at its bound and the whole completion: more than the call can cost.
    expect(during.held).toBeCloseTo(usd(Tokens.conversationBound(messages), 100), 9)
    expect(during.held).toBeGreaterThan(usd(Tokens.conversation(messages), 100))
    while (!(await reader.read()).done) { /* the rest of the stream */ }

    const after = await waitFor(async () => {
      const now = await standing()
      return now.held === 0 ? now : undefined
    })
    expect(before.usd - after.usd).toBeCloseTo(usd(640, 3), 9)
    // The token reservation is corrected to the usage too.
    expect(before.tokensLeft - after.tokensLeft).toBe(643)
  })
})

describe("A prompt larger than the tokens left in the key's minute is refused with 429 before anything is sent upstream", () => {
  it("answers 429 naming the token limit, with Retry-After, charges nothing, and the upstream receives no call", async () => {
    await RateWindow.fresh(30_000)
    upstream.script = () => ({ pieces: ["ok"], usage: { prompt_tokens: 12_000, completion_tokens: 1 } })
    // A first call the upstream says used 12,001 tokens leaves fewer than 8,000 in the minute.
    const first = await chat("Hello", 10)
    expect(first.status).toBe(200)
    await first.text()
    const before = await waitFor(async () => {
      const now = await standing()
      return now.held === 0 && now.tokensLeft <= TOKENS_PER_MINUTE - 12_001 ? now : undefined
    })
    const prompt = "word ".repeat(before.tokensLeft + 500)
    expect(Tokens.conversation([{ role: "user", content: prompt }])).toBeGreaterThan(before.tokensLeft)
    const calls = upstream.received.length

    const refused = await chat(prompt, 10)
    expect(refused.status).toBe(429)
    expect(await refused.json()).toEqual({ error: `Rate limit exceeded: ${TOKENS_PER_MINUTE} tokens per minute (user limit)` })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(refused.headers.get("x-ratelimit-limit-tokens")).toBe(String(TOKENS_PER_MINUTE))
    expect(upstream.received.length).toBe(calls)
    const after = await standing()
    expect(after).toEqual(before)
  })
})
