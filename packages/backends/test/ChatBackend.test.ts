import type { Models } from "@tollgate/core"
import { FakeChatUpstream } from "@tollgate/testkit"
import { Effect, Stream } from "effect"
import * as Net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as ChatBackend from "../src/ChatBackend.ts"

const model = (upstreams: ReadonlyArray<Models.Upstream>): Models.TextModel => ({
  id: "test-model",
  name: "Test Model",
  type: "text",
  router: "test",
  tier: "S",
  upstreams,
  contextTokens: 8192,
  maxCompletionTokens: 1024,
  supportsThinking: false,
  supportsWebSearch: false,
  supportsXSearch: false
})

const run = <A, E>(effect: Effect.Effect<A, E, ChatBackend.ChatBackend>) =>
  Effect.runPromise(effect.pipe(Effect.provide(ChatBackend.layer({ coolDown: "1 hour" }))))

const upstreams: Array<FakeChatUpstream.FakeChatUpstream> = []
beforeAll(async () => {
  for (let i = 0; i < 3; i++) upstreams.push(await FakeChatUpstream.start())
})
afterAll(() => Promise.all(upstreams.map((u) => u.close())))

const messages = [{ role: "user", content: "hi" }]

describe("ChatBackend: any OpenAI-compatible upstream, streaming and not", () => {
  it("forwards the body as sent, with the upstream's model name, its key, and cache_control intact", async () => {
    const [upstream] = upstreams
    const content = [{ type: "text", text: "ctx", cache_control: { type: "ephemeral" } }]
    const result = await run(ChatBackend.ChatBackend.use((backend) =>
      backend.complete({
        model: model([{ baseUrl: upstream!.baseUrl, apiKey: "sk-up", model: "upstream-name" }]),
        body: { messages: [{ role: "system", content }, ...messages], top_k: 5, vendor_field: { a: 1 } }
      })
    ))
    expect(result.body).toMatchObject({ choices: [{ message: { content: "Hello world" } }] })
    const last = upstream!.received.at(-1)!
    expect(last.body).toMatchObject({ model: "upstream-name", top_k: 5, vendor_field: { a: 1 } })
    expect((last.body["messages"] as Array<{ content: unknown }>)[0]!.content).toEqual(content)
    expect(last.headers.authorization).toBe("Bearer sk-up")
  })

  it("streams the chunks and asks the upstream for usage", async () => {
    const [upstream] = upstreams
    const chunks = await run(
      ChatBackend.ChatBackend.use((backend) =>
        backend.stream({ model: model([{ baseUrl: upstream!.baseUrl }]), body: { messages } }).pipe(
          Effect.flatMap((s) => Stream.runCollect(s.chunks))
        )
      )
    )
    expect(upstream!.received.at(-1)!.body).toMatchObject({ model: "test-model", stream: true, stream_options: { include_usage: true } })
    const text = chunks.flatMap((c) => (c["choices"] as Array<{ delta: { content?: string } }>).map((ch) => ch.delta.content ?? "")).join(
      ""
    )
    expect(text).toBe("Hello world")
    expect(chunks.at(-1)).toMatchObject({ usage: { prompt_tokens: 10, completion_tokens: 2 } })
  })

  it("refuses with the upstream's status and headers before any chunk (429 keeps its headers)", async () => {
    const [upstream] = upstreams
    upstream!.script = () => ({ pieces: [], status: 429, headers: { "retry-after": "7", "x-ratelimit-remaining-requests": "0" } })
    const error = await run(
      ChatBackend.ChatBackend.use((backend) =>
        Effect.flip(backend.stream({ model: model([{ baseUrl: upstream!.baseUrl }]), body: { messages } }))
      )
    )
    expect(error).toMatchObject({ kind: "status", status: 429, headers: { "retry-after": "7", "x-ratelimit-remaining-requests": "0" } })
    upstream!.script = () => ({ pieces: ["Hello", " world"] })
  })
})

describe("ChatBackend: prompt_cache_key is a sticky routing hint (same key, same upstream while healthy)", () => {
  const all = () => model(upstreams.map((u) => ({ baseUrl: u.baseUrl })))
  const servedBy = (promptCacheKey: string | undefined) =>
    run(ChatBackend.ChatBackend.use((backend) => backend.complete({ model: all(), body: { messages }, promptCacheKey }))).then((r) =>
      r.upstream
    )

  it("sends one key to one upstream every time, and spreads keys over the upstreams", async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `conversation-${i}`)
    const first = await Promise.all(keys.map(servedBy))
    const again = await Promise.all(keys.map(servedBy))
    expect(again).toEqual(first)
    expect(new Set(first).size).toBeGreaterThan(1)
  })

  it("moves a key off a failing upstream, and only the keys of that upstream move", async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `session-${i}`)
    await run(Effect.gen(function*() {
      const backend = yield* ChatBackend.ChatBackend
      const serve = (key: string) =>
        backend.complete({ model: all(), body: { messages }, promptCacheKey: key }).pipe(Effect.map((r) => r.upstream))
      const before = yield* Effect.forEach(keys, serve)
      const down = upstreams.find((u) => u.baseUrl === before[0])!
      down.script = () => ({ pieces: [], status: 503 })
      const after = yield* Effect.forEach(keys, serve)
      down.script = () => ({ pieces: ["Hello", " world"] })
      keys.forEach((_, i) => {
        if (before[i] === down.baseUrl) expect(after[i]).not.toBe(down.baseUrl)
        else expect(after[i]).toBe(before[i])
      })
    }))
  })
})

describe("ChatBackend: a model without upstreams is served by the local echo model", () => {
  it("echoes the last user message, streaming and not", async () => {
    const local = model([])
    const body = await run(ChatBackend.ChatBackend.use((backend) => backend.complete({ model: local, body: { messages } })))
    expect(body.body).toMatchObject({ choices: [{ message: { content: "You said: hi" } }] })
    const chunks = await run(
      ChatBackend.ChatBackend.use((backend) =>
        backend.stream({ model: local, body: { messages } }).pipe(Effect.flatMap((s) => Stream.runCollect(s.chunks)))
      )
    )
    expect(chunks.length).toBeGreaterThan(2)
  })
})

describe("ChatBackend: a stream that goes quiet is cut off and the upstream connection closed", () => {
  it("fails the stream after the idle timeout, keeping the chunks already produced", async () => {
    const [upstream] = upstreams
    upstream!.script = () => ({ pieces: ["a", "b"], stall: true })
    const result = await Effect.runPromise(
      ChatBackend.ChatBackend.use((backend) =>
        backend.stream({ model: model([{ baseUrl: upstream!.baseUrl }]), body: { messages } }).pipe(
          Effect.flatMap((s) => Stream.runCollect(s.chunks).pipe(Effect.flip))
        )
      ).pipe(Effect.provide(ChatBackend.layer({ idleTimeout: "200 millis" })))
    )
    expect(result).toMatchObject({ kind: "timeout" })
    await upstream!.received.at(-1)!.hungUp
    upstream!.script = () => ({ pieces: ["Hello", " world"] })
  })
})

describe("ChatBackend: an upstream that never answers is given up after the connect or completion timeout", () => {
  it("fails a stream and a completion with a timeout when no headers come", async () => {
    // A real socket that takes the request and never answers it.
    const silent = Net.createServer((socket) => socket.resume())
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    const { port } = silent.address() as Net.AddressInfo
    const quiet = model([{ baseUrl: `http://127.0.0.1:${port}/v1` }])
    const [stream, completion] = await Effect.runPromise(
      ChatBackend.ChatBackend.use((backend) =>
        Effect.all([
          Effect.flip(backend.stream({ model: quiet, body: { messages } })),
          Effect.flip(backend.complete({ model: quiet, body: { messages } }))
        ], { concurrency: 2 })
      ).pipe(Effect.provide(ChatBackend.layer({ connectTimeout: "200 millis", completionTimeout: "300 millis" })))
    )
    silent.close()
    expect(stream).toMatchObject({ kind: "timeout" })
    expect(completion).toMatchObject({ kind: "timeout" })
  })
})
