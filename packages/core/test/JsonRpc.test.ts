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
    expect(single).toEqual({ batch: false, items: [{ method: "eth_blockNumber", id: "1", tier: "S" }] })
    const batch = Result.getOrThrow(
      JsonRpc.check(ethereum, [call("txpool_content", "a"), { jsonrpc: "2.0", method: "eth_chainId" }, call("eth_chainId", null)])
    )
    expect(batch.items.map((item) => [item.tier, item.id])).toEqual([["L", "\"a\""], ["S", undefined], ["S", "null"]])
  })

  it.each(
    [
      ["empty batch", [], /an empty batch/],
      ["101 items", Array.from({ length: 101 }, () => call("eth_chainId")), /101 items/],
      ["non-object item", [call("eth_chainId"), "x"], /item 1 is not a JSON-RPC request object/],
      ["missing jsonrpc", { id: 1, method: "eth_chainId" }, /missing "jsonrpc"/],
      ["jsonrpc 1.0", { jsonrpc: "1.0", id: 1, method: "eth_chainId" }, /other than "2.0"/],
      ["numeric method", call(42), /no string "method"/],
      ["object id", call("eth_chainId", {}), /"id"/]
    ] as const
  )("%s -> refused", (_name, body, message) => {
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
    const message = refusal([
      call("eth_newFilter"),
      call("eth_chainId"),
      call("ws \"quoted\""),
      call("eth_subscribe"),
      call("eth_newFilter")
    ])
    expect(message).toBe(
      "Methods not allowed on ethereum-mainnet: \"eth_newFilter\" (unsupported), \"ws \\\"quoted\\\"\" (unknown), \"eth_subscribe\" (WebSocket-only)"
    )
    expect(JsonRpc.refusedMethods(message)).toEqual(["eth_newFilter", "ws \"quoted\"", "eth_subscribe"])
  })
})

describe("JsonRpc: ids are JSON text, exactly as sent, even where a double cannot hold them", () => {
  it("12345678901234567890 and 12345678901234567891 stay two ids, as sent", () => {
    const text = `[{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_chainId"},` +
      `{"jsonrpc":"2.0","id":12345678901234567891,"method":"eth_chainId"},{"jsonrpc":"2.0","id":1.50,"method":"eth_chainId"}]`
    const request = Result.getOrThrow(JsonRpc.check(ethereum, JsonRpc.parse(text)))
    expect(request.items.map((item) => item.id)).toEqual(["12345678901234567890", "12345678901234567891", "1.50"])
  })
  it("safe integers and strings need no second reading", () => {
    expect(JsonRpc.parse(`{"id":7,"x":12345678901234567890}`)).toEqual({ id: 7, x: 12345678901234567000 })
    expect(JsonRpc.idText("a\"b")).toBe(`"a\\"b"`)
  })
})

describe("JsonRpc: an item is billed at its tier only when the node answered it with a result; otherwise 5 credits as an error", () => {
  const request = Result.getOrThrow(
    JsonRpc.check(ethereum, [call("eth_call", 1), call("trace_block", 2), { jsonrpc: "2.0", method: "eth_chainId" }])
  )
  it("matches errors by id, whatever the order", () => {
    const response = [{ jsonrpc: "2.0", id: 2, error: { code: -32601, message: "x" } }, { jsonrpc: "2.0", id: 1, result: "0x" }]
    expect(JsonRpc.outcomes(request, response)).toEqual(["S", "error", "S"])
  })
  it("a single answer for a single request", () => {
    const single = Result.getOrThrow(JsonRpc.check(ethereum, call("txpool_content")))
    expect(JsonRpc.outcomes(single, { jsonrpc: "2.0", id: 1, error: { code: 1, message: "x" } })).toEqual(["error"])
    expect(JsonRpc.outcomes(single, { jsonrpc: "2.0", id: 1, result: {} })).toEqual(["L"])
  })
  it("a single request answered by an error with a null id is an error, not its tier", () => {
    const single = Result.getOrThrow(JsonRpc.check(ethereum, call("txpool_content")))
    expect(JsonRpc.outcomes(single, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "x" } })).toEqual(["error"])
  })
  it("a batch answered by null-id errors: every item an error", () => {
    const batch = Result.getOrThrow(JsonRpc.check(ethereum, [call("txpool_content", 1), call("txpool_content", 2)]))
    const nullError = { jsonrpc: "2.0", id: null, error: { code: -32600, message: "x" } }
    expect(JsonRpc.outcomes(batch, [nullError, nullError])).toEqual(["error", "error"])
  })
  it("one error object for a whole batch, or a lone result for it: every item an error", () => {
    const batch = Result.getOrThrow(JsonRpc.check(ethereum, [call("txpool_content", 1), call("eth_call", 2)]))
    expect(JsonRpc.outcomes(batch, { jsonrpc: "2.0", id: null, error: { code: -32005, message: "rate limited" } })).toEqual([
      "error",
      "error"
    ])
    expect(JsonRpc.outcomes(batch, { jsonrpc: "2.0", id: 1, result: "0x" })).toEqual(["error", "error"])
  })
  it.each([["an empty array", []], ["an array of non-objects", [1, "x"]], ["a mixed array", [{ jsonrpc: "2.0", id: 1, result: 1 }, null]]])(
    "%s: every item an error",
    (_name, response) => {
      const batch = Result.getOrThrow(JsonRpc.check(ethereum, [call("txpool_content", 1), call("eth_call", 2)]))
      expect(JsonRpc.outcomes(batch, response)).toEqual(["error", "error"])
    }
  )
  it("an item the node left out is an error; a null-id error stands for it before a notification", () => {
    const batch = Result.getOrThrow(
      JsonRpc.check(ethereum, [call("eth_call", 1), { jsonrpc: "2.0", method: "trace_block" }, call("trace_block", 2)])
    )
    expect(JsonRpc.outcomes(batch, [{ jsonrpc: "2.0", id: 1, result: "0x" }])).toEqual(["S", "A", "error"])
    expect(
      JsonRpc.outcomes(batch, [{ jsonrpc: "2.0", id: 1, result: "0x" }, { jsonrpc: "2.0", id: null, error: { code: 1, message: "x" } }])
    )
      .toEqual(["S", "A", "error"])
    const both = [{ jsonrpc: "2.0", id: 1, result: "0x" }, { jsonrpc: "2.0", id: 2, result: [] }, {
      jsonrpc: "2.0",
      id: null,
      error: { code: 1, message: "x" }
    }]
    expect(JsonRpc.outcomes(batch, both)).toEqual(["S", "error", "A"])
  })
  it("ids a double cannot hold are matched exactly", () => {
    const text =
      `[{"jsonrpc":"2.0","id":12345678901234567890,"method":"txpool_content"},{"jsonrpc":"2.0","id":12345678901234567891,"method":"txpool_content"}]`
    const batch = Result.getOrThrow(JsonRpc.check(ethereum, JsonRpc.parse(text)))
    const answer = JsonRpc.parse(
      `[{"jsonrpc":"2.0","id":12345678901234567891,"result":{}},{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":1,"message":"x"}}]`
    )
    expect(JsonRpc.outcomes(batch, answer)).toEqual(["error", "L"])
  })
})
