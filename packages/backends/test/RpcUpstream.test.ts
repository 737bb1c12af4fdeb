import { JsonRpc, Networks } from "@tollgate/core"
import { FreePort } from "@tollgate/testkit"
import { Effect, Fiber, Result } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcUpstream from "../src/RpcUpstream.ts"

const ethereum = Networks.findNetwork("ethereum-mainnet")!
const request = (body: unknown) => {
  const text = typeof body === "string" ? body : JSON.stringify(body)
  const checked = Result.getOrThrow(JsonRpc.check(ethereum, JsonRpc.parse(text)))
  return { checked, bytes: Buffer.from(text) }
}

interface Server {
  readonly url: string
  readonly hits: () => number
  readonly close: () => Promise<void>
}

// A JSON-RPC server whose reply is decided per request (its body, parsed, and its raw text): a
// status and body, or "hang up" (the connection is destroyed after the request arrived).
const server = async (
  reply: (body: unknown, text: string) => { readonly status: number; readonly body: string } | "hang up"
): Promise<Server> => {
  let hits = 0
  const http = Http.createServer((req, res) => {
    hits++
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const answer = reply(JSON.parse(text), text)
      if (answer === "hang up") return req.socket.destroy()
      res.writeHead(answer.status, { "content-type": "application/json" })
      res.end(answer.body)
    })
  })
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    hits: () => hits,
    close: async () => {
      http.closeAllConnections()
      await new Promise((resolve) => http.close(resolve))
    }
  }
}

const forward = (config: RpcUpstream.Config, body: unknown) => {
  const { bytes, checked } = request(body)
  // Served as a network without a chain id (no probe at start), so a node's requests are the call's.
  const { upstreams, ...rest } = config
  return Effect.runPromise(Effect.result(Effect.scoped(Effect.flatMap(
    RpcUpstream.make({ ...rest, upstreams: { "solana-mainnet": upstreams["ethereum-mainnet"] ?? [] }, headPollMs: 0 }),
    (upstream) => upstream.forward("solana-mainnet", checked, bytes)
  ))))
}

let good: Server
let flaky: Server
let methodNotAllowed: Server
let dead: string

beforeAll(async () => {
  good = await server((body) => ({
    status: 200,
    body: JSON.stringify(
      Array.isArray(body)
        ? body.map((item: { id: unknown }) => ({ jsonrpc: "2.0", id: item.id, result: "0x1" })).reverse()
        : { jsonrpc: "2.0", id: (body as { id: unknown }).id, result: "0x1" }
    )
  }))
  flaky = await server(() => "hang up")
  methodNotAllowed = await server(() => ({ status: 405, body: "" }))
  dead = `http://127.0.0.1:${await FreePort.freePort()}`
})

afterAll(async () => {
  await Promise.all([good.close(), flaky.close(), methodNotAllowed.close()])
})

describe("RpcUpstream: reads fail over on connection failure; writes only when the connection was refused", () => {
  it("a refused connection moves to the next upstream, read or write", async () => {
    const read = await forward({ upstreams: { "ethereum-mainnet": [dead, good.url] } }, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_blockNumber"
    })
    expect(Result.isSuccess(read)).toBe(true)
    const write = await forward({ upstreams: { "ethereum-mainnet": [dead, good.url] } }, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_sendRawTransaction",
      params: ["0x"]
    })
    expect(Result.isSuccess(write)).toBe(true)
  })

  it("a connection broken after the request was sent: a read is retried elsewhere, a write is not (502)", async () => {
    const before = good.hits()
    const read = await forward({ upstreams: { "ethereum-mainnet": [flaky.url, good.url] } }, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_blockNumber"
    })
    expect(Result.isSuccess(read)).toBe(true)
    expect(good.hits()).toBe(before + 1)
    const write = await forward({ upstreams: { "ethereum-mainnet": [flaky.url, good.url] } }, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_sendRawTransaction",
      params: ["0x"]
    })
    expect(Result.isFailure(write) && write.failure._tag).toBe("BadGateway")
    expect(good.hits()).toBe(before + 1)
  })

  it("every upstream down -> BadGateway", async () => {
    const result = await forward({ upstreams: { "ethereum-mainnet": [dead] } }, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
    expect(Result.isFailure(result) && result.failure._tag).toBe("BadGateway")
  })
})

describe("RpcUpstream: the timeout covers the whole exchange; a timeout is a 504", () => {
  it("a reply whose body stalls past the timeout -> GatewayTimeout", async () => {
    const stalled = Http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" })
        res.write("{\"jsonrpc\":\"2.0\",")
        setTimeout(() => res.end("\"id\":1,\"result\":\"0x1\"}"), 400)
      })
    })
    await new Promise<void>((resolve) => stalled.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`
      const result = await forward({ upstreams: { "ethereum-mainnet": [url] }, timeoutMs: 100 }, {
        jsonrpc: "2.0",
        id: 1,
        method: "eth_blockNumber"
      })
      expect(Result.isFailure(result) && result.failure._tag).toBe("GatewayTimeout")
    } finally {
      stalled.closeAllConnections()
      await new Promise((resolve) => stalled.close(resolve))
    }
  })
})

describe("RpcUpstream: answers come back in request order, unsupported replies as -32601", () => {
  it("a reversed batch is put back in order, the bytes re-encoded", async () => {
    const result = await forward({ upstreams: { "ethereum-mainnet": [good.url] } }, [
      { jsonrpc: "2.0", id: "x", method: "eth_blockNumber" },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" }
    ])
    const answer = Result.getOrThrow(result)
    expect(Buffer.from(answer.body!).toString()).toBe(`[{"jsonrpc":"2.0","id":"x","result":"0x1"},{"jsonrpc":"2.0","id":2,"result":"0x1"}]`)
  })

  it("an HTTP 405 from the upstream is -32601 for every item", async () => {
    const result = await forward({ upstreams: { "ethereum-mainnet": [methodNotAllowed.url] } }, [
      { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" }
    ])
    const answer = Result.getOrThrow(result)
    const body = JSON.parse(Buffer.from(answer.body!).toString()) as Array<{ id: number; error: { code: number; message: string } }>
    expect(body.map((item) => [item.id, item.error.code])).toEqual([[1, -32601], [2, -32601]])
    expect(body[0]!.error.message).toBe("Method eth_blockNumber is not supported by the upstream (HTTP 405)")
  })
})

describe("RpcUpstream: the node's bytes reach the caller unchanged, apart from order and -32601", () => {
  // Each case: the node's raw reply to the request's raw text.
  const replying = async (reply: (text: string) => string, body: string) => {
    const node = await server((_body, text) => ({ status: 200, body: reply(text) }))
    try {
      const answer = Result.getOrThrow(await forward({ upstreams: { "ethereum-mainnet": [node.url] } }, body))
      return Buffer.from(answer.body!).toString()
    } finally {
      await node.close()
    }
  }
  const BIG = "12345678901234567890"
  const BIG_NEXT = "12345678901234567891"

  it("a batch with ids beyond 2^53, answered out of order, comes back in order with the ids as sent", async () => {
    const body = `[{"jsonrpc":"2.0","id":${BIG},"method":"eth_chainId"},{"jsonrpc":"2.0","id":${BIG_NEXT},"method":"eth_blockNumber"},` +
      `{"jsonrpc":"2.0","id":1.0,"method":"eth_gasPrice"}]`
    const first = `{"jsonrpc":"2.0","id":${BIG},"result":"0x1"}`
    const second = `{ "jsonrpc": "2.0", "id": ${BIG_NEXT}, "result": {"balance": 98765432109876543210} }`
    const third = `{"jsonrpc":"2.0","id":1.0,"result":"0x3b9aca00"}`
    expect(await replying(() => `[${third}, ${second},\n${first}]`, body)).toBe(`[${first},${second},${third}]`)
  })

  it("an answer already in order is the node's bytes, whitespace included", async () => {
    const reply = ` [ {"jsonrpc":"2.0","id":${BIG},"result":"0x1"} ,\n {"jsonrpc":"2.0","id":2,"result":1.10} ]\n`
    const body = `[{"jsonrpc":"2.0","id":${BIG},"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`
    expect(await replying(() => reply, body)).toBe(reply)
  })

  it("a \"method not found\" dialect becomes -32601 with its message, id and data kept; its neighbours untouched", async () => {
    const body = `[{"jsonrpc":"2.0","id":${BIG},"method":"eth_estimateGas"},{"jsonrpc":"2.0","id":"b","method":"eth_chainId"}]`
    const notFound =
      `{"jsonrpc":"2.0","id":${BIG},"error":{"code":-32004,"message":"Method eth_estimateGas is not supported","data":{"n":${BIG_NEXT}}}}`
    const ok = `{"jsonrpc":"2.0", "id":"b", "result":"0x1"}`
    expect(await replying(() => `[${ok},${notFound}]`, body)).toBe(
      `[{"jsonrpc":"2.0","id":${BIG},"error":{"code":-32601,"message":"Method eth_estimateGas is not supported","data":{"n":${BIG_NEXT}}}},${ok}]`
    )
  })

  it("answers that match no request (a null-id error) follow the matched ones, unchanged", async () => {
    const body = `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`
    const nullError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}`
    const two = `{"jsonrpc":"2.0","id":2,"result":"0x1"}`
    expect(await replying(() => `[${nullError},${two}]`, body)).toBe(`[${two},${nullError}]`)
  })

  it("one error object for a whole batch passes through as it came", async () => {
    const body = `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`
    const whole = `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch too large"}}`
    expect(await replying(() => whole, body)).toBe(whole)
  })
})

describe("RpcUpstream: a call whose caller went away is abandoned upstream too", () => {
  it("interrupting the call closes the upstream request that has not been answered", async () => {
    let arrived: () => void = () => {}
    const arrival = new Promise<void>((resolve) => (arrived = resolve))
    let closed: () => void = () => {}
    const closing = new Promise<void>((resolve) => (closed = resolve))
    const silent = Http.createServer((req) => {
      req.resume()
      req.socket.once("close", closed)
      arrived()
    })
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`
      const { bytes, checked } = request({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
      // A network without a chain id to check at start, so the first request the node sees is the call.
      const fiber = Effect.runFork(Effect.scoped(Effect.flatMap(
        RpcUpstream.make({ upstreams: { "solana-mainnet": [url] }, headPollMs: 0 }),
        (upstream) => upstream.forward("solana-mainnet", checked, bytes)
      )))
      await arrival
      await Effect.runPromise(Fiber.interrupt(fiber))
      await closing
    } finally {
      silent.closeAllConnections()
      await new Promise((resolve) => silent.close(resolve))
    }
  })
})

describe("RpcUpstream: credentials in an upstream URL are sent as HTTP basic authorization", () => {
  it("http://user:p%40ss@host/ sends Authorization: Basic of user:p@ss, and the URL's path and query", async () => {
    const seen: Array<{ readonly authorization: string | undefined; readonly url: string | undefined }> = []
    const node = Http.createServer((req, res) => {
      seen.push({ authorization: req.headers.authorization, url: req.url })
      req.resume()
      req.on("end", () => res.end(`{"jsonrpc":"2.0","id":1,"result":"0x1"}`))
    })
    await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://user:p%40ss@127.0.0.1:${(node.address() as AddressInfo).port}/rpc/v2?key=k`
      const result = await forward({ upstreams: { "ethereum-mainnet": [url] } }, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
      expect(Result.isSuccess(result)).toBe(true)
      expect(seen).toEqual([{ authorization: `Basic ${Buffer.from("user:p@ss").toString("base64")}`, url: "/rpc/v2?key=k" }])
    } finally {
      node.closeAllConnections()
      await new Promise((resolve) => node.close(resolve))
    }
  })
})
