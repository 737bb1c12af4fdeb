import { describe, expect, it } from "vitest"
import { Principal, RateLimiter, RateLimitPolicy } from "../src/index.ts"

const key = (tier: Principal.Tier = "default") =>
  new Principal.ApiKeyPrincipal({ accountId: "acct_1", keyId: "key_1", keyType: "INFERENCE", tier })
const wallet = new Principal.WalletPrincipal({
  accountId: Principal.walletAccountId("evm", "0xAbC"),
  address: "0xAbC",
  family: "evm",
  chainId: "eip155:8453"
})

const rates = (limits: ReadonlyArray<RateLimiter.Limit>) =>
  limits.map((l) => ({ type: l.type, requests: l.requests?.limit, tokens: l.tokens?.limit, credits: l.credits?.limit }))

describe("Text models have per-tier requests and tokens per minute, default and partner", () => {
  it.each(
    [
      ["XS", 500, 1_000_000, 500, 2_000_000],
      ["S", 75, 750_000, 150, 1_500_000],
      ["M", 50, 750_000, 100, 1_500_000],
      ["L", 20, 500_000, 60, 1_000_000]
    ] as const
  )("%s", (modelTier, requests, tokens, partnerRequests, partnerTokens) => {
    const [limit] = RateLimitPolicy.limitsFor(key(), { kind: "text", modelTier, reserveTokens: 1234 })
    expect(limit).toMatchObject({
      type: "user",
      requests: { limit: requests, windowMs: 60_000 },
      tokens: { limit: tokens, windowMs: 60_000, reserve: 1234 }
    })
    expect(rates(RateLimitPolicy.limitsFor(key("partner"), { kind: "text", modelTier }))).toEqual([
      { type: "user", requests: partnerRequests, tokens: partnerTokens, credits: undefined }
    ])
  })

  it("a text call without a tier counts as M; a wallet has the default tier", () => {
    expect(RateLimitPolicy.limitsFor(wallet, { kind: "text" })[0]?.key).toBe(`${wallet.accountId}:text:M`)
    expect(RateLimitPolicy.limitsFor(wallet, { kind: "text", modelTier: "S" })[0]?.requests?.limit).toBe(75)
  })
})

describe("Other kinds have requests per minute, default and partner", () => {
  it.each(
    [
      ["image", 20, 60],
      ["audio", 60, 120],
      ["embedding", 500, 500],
      ["video", 40, 40],
      ["video_retrieve", 120, 120],
      ["billing_usage", 5, 5]
    ] as const
  )("%s", (kind, requests, partner) => {
    expect(rates(RateLimitPolicy.limitsFor(key(), { kind }))).toEqual([{ type: "user", requests, tokens: undefined, credits: undefined }])
    expect(RateLimitPolicy.limitsFor(key("partner"), { kind })[0]?.requests?.limit).toBe(partner)
  })
})

describe("RPC: 100 requests per minute and 10,000,000 credits per rolling 24 h, each naming its cap", () => {
  it("two limits, the per-minute cap and the daily credit cap, with their custom messages", () => {
    const [minute, day] = RateLimitPolicy.limitsFor(key(), { kind: "rpc", reserveCredits: 40, sku: "rpc:base-mainnet" })
    expect(minute).toMatchObject({ requests: { limit: 100, windowMs: 60_000 }, customMessage: expect.stringMatching(/per-minute/) })
    expect(day).toMatchObject({
      credits: { limit: 10_000_000, windowMs: 86_400_000, reserve: 40 },
      customMessage: expect.stringMatching(/daily credit cap/)
    })
    expect(minute?.subject).toEqual({ accountId: "acct_1", keyId: "key_1", kind: "rpc", model: "base-mainnet" })
  })
})

describe("Overrides per account and per key, from config and at runtime", () => {
  it("an account override replaces its own limit; a key override adds an api_key limit; a global one a global limit", () => {
    const limits = RateLimitPolicy.limitsFor(key(), { kind: "image" }, {
      account: { image: { requests: 7 } },
      key: { image: { requests: 3 } },
      global: { image: { requests: 1000 } }
    })
    expect(rates(limits)).toEqual([
      { type: "user", requests: 7, tokens: undefined, credits: undefined },
      { type: "api_key", requests: 3, tokens: undefined, credits: undefined },
      { type: "global", requests: 1000, tokens: undefined, credits: undefined }
    ])
  })

  it("a tier override changes the tier's table", () => {
    expect(RateLimitPolicy.limitsFor(key("partner"), { kind: "image" }, { tier: { image: { requests: 90 } } })[0]?.requests?.limit).toBe(90)
  })

  it("every limit of an account shares the account's hash tag; a global limit has its own", () => {
    const limits = RateLimitPolicy.limitsFor(key(), { kind: "rpc" }, {
      key: { rpc: { requests: 10 } },
      global: { rpc: { requests: 10_000 } }
    })
    expect(limits.map((l) => l.hashTag)).toEqual(["acct_1", "acct_1", "acct_1", "acct_1", "global"])
    expect(RateLimiter.windowKey(limits[0]!, 120_000, 60_000)).toBe("rl:{acct_1}:acct_1:rpc:minute:2")
  })
})

describe("An operator's own kind takes its rates per tier from config by its name, over the declared ones", () => {
  const summaries: RateLimitPolicy.CustomKind = {
    name: "summaries",
    rates: { default: { requests: 60 }, partner: { requests: 600, tokens: 9_000 } }
  }
  const configured = (kinds: RateLimitPolicy.CallerOverrides["kinds"]) => ({ kinds })

  it("without a config entry the declared rates apply, the partner tier's to partner keys", () => {
    expect(rates(RateLimitPolicy.limitsFor(key(), { kind: "text", custom: summaries }))).toEqual([{
      type: "user",
      requests: 60,
      tokens: undefined,
      credits: undefined
    }])
    expect(rates(RateLimitPolicy.limitsFor(key("partner"), { kind: "text", custom: summaries }))).toEqual([{
      type: "user",
      requests: 600,
      tokens: 9_000,
      credits: undefined
    }])
  })

  it("a configured tier replaces the rates it names and keeps the others; another kind's entry changes nothing", () => {
    const overrides = configured({ summaries: { partner: { requests: 5 } }, other: { default: { requests: 1 } } })
    expect(rates(RateLimitPolicy.limitsFor(key("partner"), { kind: "text", custom: summaries }, overrides))).toEqual([{
      type: "user",
      requests: 5,
      tokens: 9_000,
      credits: undefined
    }])
    expect(rates(RateLimitPolicy.limitsFor(key(), { kind: "text", custom: summaries }, overrides))).toEqual([{
      type: "user",
      requests: 60,
      tokens: undefined,
      credits: undefined
    }])
  })

  it("a tier neither the declaration nor the config names has the default's rates, configured ones included", () => {
    const declaredDefaultOnly: RateLimitPolicy.CustomKind = { name: "summaries", rates: { default: { requests: 60 } } }
    const overrides = configured({ summaries: { default: { requests: 3 } } })
    expect(RateLimitPolicy.limitsFor(key("partner"), { kind: "text", custom: declaredDefaultOnly }, overrides)[0]?.requests?.limit).toBe(3)
    expect(RateLimitPolicy.limitsFor(wallet, { kind: "text", custom: declaredDefaultOnly }, overrides)[0]?.requests?.limit).toBe(3)
  })
})
