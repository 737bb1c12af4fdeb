import { JsonRpc, Networks } from "@tollgate/core"
import { FreePort } from "@tollgate/testkit"
import { Effect, Result } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as RpcUpstream from "../src/RpcUpstream.ts"

const ethereum = Networks.findNetwork("ethereum-mainnet")!
const request = (body: unknown) => {
  const checked = Result.getOrThrow(JsonRpc.check(ethereum, body))
  return { checked, bytes: Buffer.from(JSON.stringify(body)) }
}

interface Server {
  readonly url: string
  readonly hits: () => number
  readonly close: () => Promise<void>
}

// A JSON-RPC server whose reply is decided per request: a status and body, or "hang up" (the
// connection is destroyed after the request arrived).
const server = async (reply: (body: unknown) => { readonly status: number; readonly body: string } | "hang up"): Promise<Server> => {
  let hits = 0
  const http = Http.createServer((req, res) => {
    hits++
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const answer = reply(JSON.parse(Buffer.concat(chunks).toString("utf8")))
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
  return Effect.runPromise(Effect.result(RpcUpstream.make(config).forward("ethereum-mainnet", checked, bytes)))
}

let good: Server
let flaky: Server
let methodNotAllowed: Server
let dead: string

beforeAll(async () => {
  good = await server((body) => ({
    status: 200,
    body: JSON.stringify(Array.isArray(body)
      ? body.map((item: { id: unknown }) => ({ jsonrpc: "2.0", id: item.id, result: "0x1" })).reverse()
      : { jsonrpc: "2.0", id: (body as { id: unknown }).id, result: "0x1" })
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
    const read = await forward({ upstreams: { "ethereum-mainnet": [dead, good.url] } }, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
    expect(Result.isSuccess(read)).toBe(true)
    const write = await forward({ upstreams: { "ethereum-mainnet": [dead, good.url] } }, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: ["0x"] })
    expect(Result.isSuccess(write)).toBe(true)
  })

  it("a connection broken after the request was sent: a read is retried elsewhere, a write is not (502)", async () => {
    const before = good.hits()
    const read = await forward({ upstreams: { "ethereum-mainnet": [flaky.url, good.url] } }, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
    expect(Result.isSuccess(read)).toBe(true)
    expect(good.hits()).toBe(before + 1)
    const write = await forward({ upstreams: { "ethereum-mainnet": [flaky.url, good.url] } }, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: ["0x"] })
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
      const result = await forward({ upstreams: { "ethereum-mainnet": [url] }, timeoutMs: 100 }, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
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
    expect((answer.response as Array<{ id: unknown }>).map((item) => item.id)).toEqual(["x", 2])
    expect(JSON.parse(Buffer.from(answer.body!).toString())).toEqual(answer.response)
  })

  it("an HTTP 405 from the upstream is -32601 for every item", async () => {
    const result = await forward({ upstreams: { "ethereum-mainnet": [methodNotAllowed.url] } }, [
      { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" }
    ])
    const answer = Result.getOrThrow(result)
    expect((answer.response as Array<{ error: { code: number } }>).map((item) => item.error.code)).toEqual([-32601, -32601])
  })
})
