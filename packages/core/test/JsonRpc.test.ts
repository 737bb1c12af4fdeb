import { Result } from "effect"
import { describe, expect, it } from "vitest"
import * as JsonRpc from "../src/JsonRpc.ts"
import * as Networks from "../src/Networks.ts"

const ethereum = Networks.findNetwork("ethereum-mainnet")!
const call = (method: unknown, id: unknown = 1) => ({ jsonrpc: "2.0", id, method })

const refusal = (body: unknown) => {
  const result = JsonRpc.check(ethereum, body)
  if (Result.isSuccess(result)) throw new Error("expected a refusal")
  return result.failure.message
}

describe("JsonRpc: a body is one JSON-RPC 2.0 object or a batch of 1 to 100, each item checked on its own", () => {
  it("a single object and a batch are accepted with each item's tier", () => {
    const single = Result.getOrThrow(JsonRpc.check(ethereum, call("eth_blockNumber")))
    expect(single).toEqual({ batch: false, items: [{ method: "eth_blockNumber", hasId: true, id: 1, tier: "S" }] })
    const batch = Result.getOrThrow(JsonRpc.check(ethereum, [call("txpool_content", "a"), { jsonrpc: "2.0", method: "eth_chainId" }]))
    expect(batch.items.map((item) => [item.tier, item.hasId])).toEqual([["L", true], ["S", false]])
  })

  it.each([
    ["empty batch", [], /an empty batch/],
    ["101 items", Array.from({ length: 101 }, () => call("eth_chainId")), /101 items/],
    ["non-object item", [call("eth_chainId"), "x"], /item 1 is not a JSON-RPC request object/],
    ["missing jsonrpc", { id: 1, method: "eth_chainId" }, /missing "jsonrpc"/],
    ["jsonrpc 1.0", { jsonrpc: "1.0", id: 1, method: "eth_chainId" }, /other than "2.0"/],
    ["numeric method", call(42), /no string "method"/],
    ["object id", call("eth_chainId", {}), /"id"/]
  ] as const)("%s -> refused", (_name, body, message) => {
    expect(refusal(body)).toMatch(message)
  })

  it("every malformed item is named by its position", () => {
    expect(refusal([call("eth_chainId"), 1, { jsonrpc: "1.0", method: "x" }])).toBe(
      "Invalid JSON-RPC request: item 1 is not a JSON-RPC request object; item 2 has a \"jsonrpc\" other than \"2.0\""
    )
  })
})

describe("JsonRpc: a request with any refused method is refused whole, naming every offending method once", () => {
  it("names each with why, and refusedMethods reads them back", () => {
    const message = refusal([call("eth_newFilter"), call("eth_chainId"), call("ws \"quoted\""), call("eth_subscribe"), call("eth_newFilter")])
    expect(message).toBe(
      "Methods not allowed on ethereum-mainnet: \"eth_newFilter\" (unsupported), \"ws \\\"quoted\\\"\" (unknown), \"eth_subscribe\" (WebSocket-only)"
    )
    expect(JsonRpc.refusedMethods(message)).toEqual(["eth_newFilter", "ws \"quoted\"", "eth_subscribe"])
  })
})

describe("JsonRpc: an item answered with a JSON-RPC error is billed as an error, the rest at their tier", () => {
  const request = Result.getOrThrow(JsonRpc.check(ethereum, [call("eth_call", 1), call("trace_block", 2), { jsonrpc: "2.0", method: "eth_chainId" }]))
  it("matches errors by id, whatever the order", () => {
    const response = [{ jsonrpc: "2.0", id: 2, error: { code: -32601, message: "x" } }, { jsonrpc: "2.0", id: 1, result: "0x" }]
    expect(JsonRpc.outcomes(request, response)).toEqual(["S", "error", "S"])
  })
  it("a single answer for a single request", () => {
    const single = Result.getOrThrow(JsonRpc.check(ethereum, call("txpool_content")))
    expect(JsonRpc.outcomes(single, { jsonrpc: "2.0", id: 1, error: { code: 1, message: "x" } })).toEqual(["error"])
    expect(JsonRpc.outcomes(single, { jsonrpc: "2.0", id: 1, result: {} })).toEqual(["L"])
  })
})
