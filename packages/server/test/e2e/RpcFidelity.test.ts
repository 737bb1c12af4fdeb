/**
 * The RPC proxy through the shipped server (dev mode, memory store) in front of a scripted node: a
 * real HTTP server that answers the raw request text with canned raw text, so the answers a
 * well-behaved node would not give (ids reordered, null-id errors, an empty array) can be sent.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { createPublicClient, http } from "viem"
import { mainnet } from "viem/chains"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let script: (request: string) => string = () => ""
let node: Http.Server
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  node = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(script(Buffer.concat(chunks).toString("utf8")))
    })
  })
  await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve))
  const nodeUrl = `http://127.0.0.1:${(node.address() as AddressInfo).port}`
  server = await ShippedServer.start({ config: { rpc: { upstreams: { "ethereum-mainnet": [nodeUrl] } } } })
})

afterAll(async () => {
  await server?.stop()
  node?.closeAllConnections()
  await new Promise((resolve) => node?.close(resolve))
})

const send = async (body: string, reply: string) => {
  script = () => reply
  const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
    body
  })
  return { status: response.status, text: await response.text(), credits: response.headers.get("x-service-rpc-credits") }
}

/** A call whose answer says whether the cache gave it. */
const fetchRpc = async (body: string) => {
  const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
    body
  })
  return {
    status: response.status,
    cache: response.headers.get("x-cache"),
    credits: response.headers.get("x-service-rpc-credits"),
    text: await response.text()
  }
}

const raw = (id: string, method: string) => `{"jsonrpc":"2.0","id":${id},"method":"${method}"}`
const BIG = "12345678901234567890"
const BIG_NEXT = "12345678901234567891"

describe("RPC proxy (shipped server): ids come back exactly as sent, in request order", () => {
  it("a batch with ids beyond 2^53, answered out of order, is reordered on the raw text", async () => {
    const first = `{"jsonrpc":"2.0","id":${BIG},"result":"0x1"}`
    const second = `{"jsonrpc":"2.0","id":${BIG_NEXT},"result":{"lamports":98765432109876543210}}`
    const result = await send(`[${raw(BIG, "eth_chainId")},${raw(BIG_NEXT, "eth_getBlockByNumber")}]`, `[${second},\n${first}]`)
    expect(result).toEqual({ status: 200, text: `[${first},${second}]`, credits: "40" })
  })

  it("viem's batched calls get their answers, whatever order the node sends them in", async () => {
    script = (request) => {
      const calls = JSON.parse(request) as Array<{ id: number; method: string }>
      const answers = calls.map((call) => ({ jsonrpc: "2.0", id: call.id, result: call.method === "eth_chainId" ? "0x1" : "0x2a" }))
      return JSON.stringify(answers.reverse())
    }
    const client = createPublicClient({
      chain: mainnet,
      transport: http(`${server.api}/crypto/rpc/ethereum-mainnet`, {
        batch: true,
        fetchOptions: { headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` } }
      })
    })
    const [chainId, block] = await Promise.all([client.getChainId(), client.getBlockNumber({ cacheTime: 0 })])
    expect([chainId, block]).toEqual([1, 42n])
  })
})

describe("RPC proxy (shipped server): a batch is answered item by item from the cache, the rest sent upstream with their ids as sent and matched back by id, never by position", () => {
  const byHash = (id: string, hash: string) => `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByHash","params":["${hash}",false]}`
  const byNumber = (id: string, number: string) =>
    `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByNumber","params":["${number}",false]}`
  const HASH_A = `0x${"a".repeat(64)}`
  const HASH_B = `0x${"b".repeat(64)}`
  // Results the node would send: numbers beyond 2^53 stay as they came.
  const blockA = `{"hash":"${HASH_A}","difficulty":98765432109876543210}`
  const blockB = `{"hash":"${HASH_B}","size":12345678901234567893}`

  it("a cached item comes back around the caller's raw id; the two missed ones go upstream as sent, their reversed answers put back in request order; then all cached: HIT, no upstream call; 20 credits per item each time", async () => {
    const received: Array<string> = []
    const answerOf = (request: string) => {
      // The proxy's own head polls are not the caller's calls.
      if (!request.includes(`["finalized",false]`)) received.push(request)
      const calls = JSON.parse(request.replace(/"id":(\d+)/g, "\"id\":\"$1\"")) as Array<{ id: string; method: string; params: [string] }>
      const answers = calls.map((call) => {
        const result = call.params[0] === HASH_A ? blockA : call.params[0] === HASH_B ? blockB : `"${call.params[0]}"`
        return `{"jsonrpc":"2.0","id":${JSON.stringify(call.id).replace(/^"(\d+)"$/, "$1")},"result":${result}}`
      })
      return `[${answers.reverse().join(",")}]`
    }
    // Nothing cached yet: the batch goes upstream as it came, and the node's answer is the caller's.
    script = answerOf
    const first = await fetchRpc(`[${byHash(BIG, HASH_A)},${byNumber("1", "0x10")}]`)
    expect(first).toEqual({
      status: 200,
      cache: "MISS",
      text: `[{"jsonrpc":"2.0","id":${BIG},"result":${blockA}},{"jsonrpc":"2.0","id":1,"result":"0x10"}]`,
      credits: "40"
    })
    expect(received).toEqual([`[${byHash(BIG, HASH_A)},${byNumber("1", "0x10")}]`])

    // Block A from the cache; block B and block 0x11 (above any finalized block) upstream, with their raw ids.
    const batch = `[${byNumber(BIG_NEXT, "0x11")},${byHash("\"a\"", HASH_A)},${byHash(BIG, HASH_B)}]`
    const partly = await fetchRpc(batch)
    expect(received.slice(1)).toEqual([`[${byNumber(BIG_NEXT, "0x11")},${byHash(BIG, HASH_B)}]`])
    expect(partly).toEqual({
      status: 200,
      cache: "MISS",
      credits: "60",
      text:
        `[{"jsonrpc":"2.0","id":${BIG_NEXT},"result":"0x11"},{"jsonrpc":"2.0","id":"a","result":${blockA}},{"jsonrpc":"2.0","id":${BIG},"result":${blockB}}]`
    })

    const cached = await fetchRpc(`[${byHash("7", HASH_B)},${byHash(BIG_NEXT, HASH_A)}]`)
    expect(received).toHaveLength(2)
    expect(cached).toEqual({
      status: 200,
      cache: "HIT",
      credits: "40",
      text: `[{"jsonrpc":"2.0","id":7,"result":${blockB}},{"jsonrpc":"2.0","id":${BIG_NEXT},"result":${blockA}}]`
    })
  })

  it("an error object answering the whole upstream part answers each item sent; the cached item keeps its result: 5 + 20 credits", async () => {
    const error = `{"code":-32005,"message":"batch limit exceeded"}`
    script = () => `{"jsonrpc":"2.0","id":null,"error":${error}}`
    expect(await fetchRpc(`[${byHash("1", HASH_A)},${byNumber("2", "0x12")}]`)).toEqual({
      status: 200,
      cache: "MISS",
      credits: "25",
      text: `[{"jsonrpc":"2.0","id":1,"result":${blockA}},{"jsonrpc":"2.0","id":2,"error":${error}}]`
    })
  })
})

describe("RPC proxy (shipped server): an item not answered with a result costs 5 credits, never its tier", () => {
  it("a single txpool_content answered by an error with a null id: 5 credits, the answer as it came", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"txpool is busy"}}`
    expect(await send(raw("1", "txpool_content"), error)).toEqual({ status: 200, text: error, credits: "5" })
  })

  it("a batch of two answered by two null-id errors: 10 credits", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`
    expect(await send(`[${raw("1", "txpool_content")},${raw("2", "txpool_content")}]`, `[${error},${error}]`))
      .toEqual({ status: 200, text: `[${error},${error}]`, credits: "10" })
  })

  it("one error object for a whole batch: 5 credits per item", async () => {
    const error = `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch limit exceeded"}}`
    expect(await send(`[${raw("1", "txpool_content")},${raw("2", "eth_call")},${raw("3", "trace_block")}]`, error))
      .toEqual({ status: 200, text: error, credits: "15" })
  })

  it("an empty array: 5 credits per item", async () => {
    expect(await send(`[${raw("1", "txpool_content")},${raw("2", "eth_call")}]`, "[]")).toEqual({ status: 200, text: "[]", credits: "10" })
  })

  it("a \"method not found\" dialect becomes -32601 with the node's message kept: 5 credits", async () => {
    const reply = `{"jsonrpc":"2.0","id":${BIG},"error":{"code":-32004,"message":"Method eth_estimateGas is not supported"}}`
    expect(await send(raw(BIG, "eth_estimateGas"), reply)).toEqual({
      status: 200,
      text: `{"jsonrpc":"2.0","id":${BIG},"error":{"code":-32601,"message":"Method eth_estimateGas is not supported"}}`,
      credits: "5"
    })
  })
})
