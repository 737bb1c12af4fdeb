import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import * as KeyRestrictions from "../src/KeyRestrictions.ts"

const decode = Schema.decodeUnknownResult(KeyRestrictions.Restrictions)
const refusedBy = (error: { readonly message: string } | undefined) => error?.message

describe("A restricted key may call only what its lists allow; a list it does not have restricts nothing", () => {
  it("networks: a slug outside the list is refused naming the restriction; a call with no network is not judged", () => {
    const restrictions = { networks: ["ethereum-mainnet"] }
    expect(KeyRestrictions.checkRequest(restrictions, { address: "127.0.0.1", network: "ethereum-mainnet" })).toBeUndefined()
    expect(refusedBy(KeyRestrictions.checkRequest(restrictions, { address: "127.0.0.1", network: "base-mainnet" }))).toBe(
      "This API key is restricted: its networks restriction allows ethereum-mainnet, not base-mainnet"
    )
    expect(KeyRestrictions.checkRequest(restrictions, { address: "127.0.0.1", network: undefined })).toBeUndefined()
  })

  it("ips: CIDR ranges and single addresses, IPv4 and IPv6; an address outside them or unknown is refused", () => {
    const restrictions = { ips: ["10.9.9.0/24", "2001:db8::/32", "192.0.2.7"] }
    const at = (address: string) => KeyRestrictions.checkRequest(restrictions, { address, network: undefined })
    expect(at("10.9.9.200")).toBeUndefined()
    expect(at("2001:db8::1")).toBeUndefined()
    expect(at("192.0.2.7")).toBeUndefined()
    expect(refusedBy(at("127.0.0.1"))).toContain("its ips restriction allows 10.9.9.0/24, 2001:db8::/32, 192.0.2.7, not 127.0.0.1")
    expect(at("192.0.2.8")?._tag).toBe("Forbidden")
    expect(at("unknown")?._tag).toBe("Forbidden")
  })

  it("operations and models: exact ids, or prefixes ending in *; every model a call may be served by (its fallbacks too) must be allowed", () => {
    const restrictions = { operations: ["chat:*", "text-parser"], models: ["gpt-4o*", "house-model"] }
    expect(KeyRestrictions.checkCall(restrictions, "chat:house-model", { models: ["house-model"] })).toBeUndefined()
    expect(KeyRestrictions.checkCall(restrictions, "chat:gpt-4o-mini", { models: ["gpt-4o-mini"] })).toBeUndefined()
    expect(KeyRestrictions.checkCall(restrictions, "text-parser", undefined)).toBeUndefined()
    expect(refusedBy(KeyRestrictions.checkCall(restrictions, "image:flux", { models: ["flux"] }))).toContain("its operations restriction")
    expect(refusedBy(KeyRestrictions.checkCall(restrictions, "chat:llama", { models: ["llama"] }))).toContain(
      "its models restriction allows gpt-4o*, house-model, not llama"
    )
    expect(refusedBy(KeyRestrictions.checkCall(restrictions, "chat:house-model", { models: ["house-model", "llama"] }))).toContain(
      "not llama"
    )
  })

  it("methods: every method of a batch must be allowed; the first outside is named", () => {
    const restrictions = { methods: ["eth_call", "eth_blockNumber"] }
    expect(KeyRestrictions.checkCall(restrictions, "rpc:ethereum-mainnet", { methods: ["eth_call", "eth_blockNumber"] })).toBeUndefined()
    expect(refusedBy(KeyRestrictions.checkCall(restrictions, "rpc:ethereum-mainnet", { methods: ["eth_call", "eth_sendRawTransaction"] })))
      .toContain(
        "not eth_sendRawTransaction"
      )
  })
})

describe("Restrictions are checked when they are set: an unknown network, a bad range or an empty list is refused", () => {
  it("accepts what is valid and refuses the rest, naming the field", () => {
    expect(decode({ networks: ["ethereum-mainnet"], ips: ["10.0.0.0/8", "::1"] })._tag).toBe("Success")
    const bad = (value: unknown) => {
      const result = decode(value)
      return result._tag === "Failure" ? result.failure.message : "accepted"
    }
    expect(bad({ networks: ["moon-mainnet"] })).toContain("moon-mainnet is not a supported network")
    expect(bad({ ips: ["10.9.9.0/33"] })).toContain("10.9.9.0/33 is not an IP address or CIDR range")
    expect(bad({ ips: ["example.com"] })).toContain("is not an IP address or CIDR range")
    expect(bad({ models: [] })).not.toBe("accepted")
  })
})
