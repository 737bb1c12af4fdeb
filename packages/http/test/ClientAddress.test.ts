import { describe, expect, it } from "vitest"
import * as ClientAddress from "../src/ClientAddress.ts"

const trusted = (...entries: Array<string>) => {
  const parsed = ClientAddress.parseTrustedProxies(entries)
  if ("invalid" in parsed) throw new Error(parsed.invalid)
  return parsed
}

describe("Client address: the peer address unless the peer is a trusted proxy", () => {
  it("without trusted proxies X-Forwarded-For and Forwarded are ignored; a mapped IPv4 peer is its IPv4 address", () => {
    const headers = { "x-forwarded-for": "203.0.113.9", forwarded: "for=203.0.113.9" }
    expect(ClientAddress.resolve("::ffff:127.0.0.2", headers, ClientAddress.none)).toBe("127.0.0.2")
    expect(ClientAddress.resolve("10.0.0.5", headers, ClientAddress.none)).toBe("10.0.0.5")
  })

  it("behind a trusted proxy the client is the rightmost untrusted X-Forwarded-For hop", () => {
    const proxies = trusted("10.0.0.0/8", "::1")
    expect(ClientAddress.resolve("10.0.0.5", { "x-forwarded-for": "198.51.100.1, 203.0.113.9, 10.0.0.7" }, proxies)).toBe("203.0.113.9")
    expect(ClientAddress.resolve("::1", { "x-forwarded-for": "203.0.113.9" }, proxies)).toBe("203.0.113.9")
    expect(ClientAddress.resolve("::ffff:10.1.2.3", { "x-forwarded-for": "2001:db8::1" }, proxies)).toBe("2001:db8::1")
  })

  it("a peer outside the trusted ranges is the client whatever it forwards", () => {
    expect(ClientAddress.resolve("192.0.2.1", { "x-forwarded-for": "203.0.113.9" }, trusted("10.0.0.0/8"))).toBe("192.0.2.1")
  })

  it("Forwarded is read when X-Forwarded-For is absent, with quoted IPv6 and ports", () => {
    const proxies = trusted("10.0.0.0/8")
    expect(ClientAddress.resolve("10.0.0.5", { forwarded: "for=198.51.100.1, for=\"[2001:db8::7]:4711\";proto=https" }, proxies)).toBe(
      "2001:db8::7"
    )
    expect(ClientAddress.resolve("10.0.0.5", { forwarded: "for=203.0.113.9:8080" }, proxies)).toBe("203.0.113.9")
  })

  it("a hop the proxy could not name ends the chain at the last known proxy", () => {
    expect(ClientAddress.resolve("10.0.0.5", { "x-forwarded-for": "unknown" }, trusted("10.0.0.0/8"))).toBe("10.0.0.5")
  })

  it("a bad entry in the list is named", () => {
    expect(ClientAddress.parseTrustedProxies(["10.0.0.0/8", "not-an-ip"])).toEqual({ invalid: "not-an-ip" })
    expect(ClientAddress.parseTrustedProxies(["10.0.0.0/33"])).toEqual({ invalid: "10.0.0.0/33" })
  })
})
