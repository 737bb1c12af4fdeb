import { describe, expect, it } from "vitest"
import * as RouteTable from "../src/RouteTable.ts"

const table = RouteTable.make([
  ["GET", "/api/v1/crypto/rpc/networks", "networks"],
  ["POST", "/api/v1/crypto/rpc/:network", "rpc"],
  ["GET", "/api/v1/keys", "list keys"],
  ["POST", "/api/v1/keys", "create key"],
  ["DELETE", "/api/v1/keys/:keyId", "revoke key"],
  ["GET", "/api/v1/wallets/:walletAddress/balance", "wallet balance"]
])

describe("A static path is found by its method, the query and repeated slashes aside", () => {
  it("finds the route and its pattern", () => {
    expect(table.lookup("GET", "/api/v1/keys")).toEqual({ _tag: "Found", value: "list keys", pattern: "/api/v1/keys", params: {} })
    expect(table.lookup("POST", "/api/v1/keys?x=1")).toMatchObject({ _tag: "Found", value: "create key" })
    expect(table.lookup("GET", "//api/v1//keys")).toMatchObject({ _tag: "Found", value: "list keys" })
  })
})

describe("A pattern's parameters match one non-empty segment each, decoded", () => {
  it("names the parameters", () => {
    expect(table.lookup("POST", "/api/v1/crypto/rpc/base-mainnet")).toEqual({
      _tag: "Found",
      value: "rpc",
      pattern: "/api/v1/crypto/rpc/:network",
      params: { network: "base-mainnet" }
    })
    expect(table.lookup("GET", "/api/v1/wallets/0xAb%43/balance?y")).toMatchObject({ params: { walletAddress: "0xAbC" } })
  })

  it("an empty, extra or undecodable segment does not match", () => {
    expect(table.lookup("POST", "/api/v1/crypto/rpc/")._tag).toBe("NotFound")
    expect(table.lookup("POST", "/api/v1/crypto/rpc/a/b")._tag).toBe("NotFound")
    expect(table.lookup("DELETE", "/api/v1/keys/%E0%A4%A")._tag).toBe("NotFound")
  })
})

describe("A static path wins over a pattern that also matches it", () => {
  it("GET networks is the static route; POST networks falls to the pattern", () => {
    expect(table.lookup("GET", "/api/v1/crypto/rpc/networks")).toMatchObject({ value: "networks" })
    expect(table.lookup("POST", "/api/v1/crypto/rpc/networks")).toMatchObject({ value: "rpc", params: { network: "networks" } })
  })
})

describe("A known path with another method names the methods it allows; an unknown path is not found", () => {
  it("405 material", () => {
    expect(table.lookup("PUT", "/api/v1/keys")).toEqual({ _tag: "MethodNotAllowed", allow: ["GET", "POST"] })
    expect(table.lookup("DELETE", "/api/v1/crypto/rpc/networks")).toEqual({ _tag: "MethodNotAllowed", allow: ["GET", "POST"] })
    expect(table.lookup("GET", "/api/v1/nope")).toEqual({ _tag: "NotFound" })
  })
})

describe("HEAD is served by the path's GET route", () => {
  it("finds GET for HEAD, and nothing for a path without GET", () => {
    expect(table.lookup("HEAD", "/api/v1/keys")).toMatchObject({ _tag: "Found", value: "list keys" })
    expect(table.lookup("HEAD", "/api/v1/keys/k1")).toEqual({ _tag: "MethodNotAllowed", allow: ["DELETE"] })
  })
})
