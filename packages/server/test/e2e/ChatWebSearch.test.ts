/**
 * Chat web search through the shipped server: `chat.searxngUrl` points at a real HTTP stand-in for
 * a SearXNG instance (its JSON API), the model is a fake OpenAI-compatible upstream, and the caller
 * is the `openai` SDK. A call with `enable_web_search: "on"` sends the user's question to the search
 * instance, gives its results to the model, and is billed the tokens plus the search.
 */
import { FakeChatUpstream, ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** USD of one call: 1,000 input tokens at 0.5 USD and 100 output tokens at 1.5 USD per million. */
const TOKENS_USD = (1_000 * 0.5 + 100 * 1.5) / 1_000_000
/** The spec's price of a request that searched the web. */
const SEARCH_USD = 0.01

let search: { readonly url: string; readonly queries: Array<string>; readonly close: () => Promise<void> }
let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
let client: OpenAI

/** A SearXNG stand-in: `GET /search?q=...&format=json` answers two results and records the query. */
const startSearch = async () => {
  const queries: Array<string> = []
  const http = Http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost")
    if (url.pathname !== "/search" || url.searchParams.get("format") !== "json") {
      response.writeHead(404).end()
      return
    }
    queries.push(url.searchParams.get("q") ?? "")
    response.writeHead(200, { "content-type": "application/json" })
    response.end(JSON.stringify({
      query: url.searchParams.get("q"),
      results: [
        {
          title: "Tollgate meters APIs",
          url: "https://tollgate.example/about",
          content: "Tollgate bills each call.",
          publishedDate: "2026-11-01"
        },
        { title: "Second result", url: "https://news.example/tollgate", content: "More about tollgate." }
      ]
    }))
  })
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    queries,
    close: () => new Promise<void>((resolve) => http.close(() => resolve()))
  }
}

beforeAll(async () => {
  search = await startSearch()
  upstream = await FakeChatUpstream.start(() => ({
    pieces: ["Tollgate", " bills calls."],
    usage: { prompt_tokens: 1_000, completion_tokens: 100 }
  }))
  server = await ShippedServer.start({
    config: {
      models: [{ id: "search-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "search-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } },
      chat: { searxngUrl: search.url }
    }
  })
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await search?.close()
})

type Params = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming & { service_parameters?: Record<string, unknown> }

const ask = (serviceParameters?: Record<string, unknown>) =>
  client.chat.completions.create({
    model: "search-model",
    messages: [{ role: "user", content: "What is tollgate?" }],
    ...(serviceParameters === undefined ? {} : { service_parameters: serviceParameters })
  } as Params).withResponse()

/** The available balance before the call, as the call reports it. */
const balanceOf = (response: Response) => Number(response.headers.get("x-service-balance-usd"))

describe("Chat web search asks the configured search instance, gives the model its results, and bills the search", () => {
  it("enable_web_search on: the question reaches the search instance, its results the model, and the call costs its tokens plus 0.01 USD", async () => {
    const searched = await ask({ enable_web_search: "on" })
    expect(searched.data.choices[0]?.message.content).toBe("Tollgate bills calls.")
    expect(search.queries).toEqual(["What is tollgate?"])
    const sent = upstream.received.at(-1)!.body["messages"] as Array<{ role: string; content: string }>
    const context = sent.map((message) => message.content).join("\n")
    expect(context).toContain("https://tollgate.example/about")
    expect(context).toContain("Tollgate bills each call.")
    expect(sent.at(-1)).toEqual({ role: "user", content: "What is tollgate?" })

    // The balance each next call starts from says what the one before cost.
    const plain = await ask()
    const last = await ask()
    expect(search.queries).toHaveLength(1)
    expect(balanceOf(searched.response) - balanceOf(plain.response)).toBeCloseTo(TOKENS_USD + SEARCH_USD, 9)
    expect(balanceOf(plain.response) - balanceOf(last.response)).toBeCloseTo(TOKENS_USD, 9)
  })
})
