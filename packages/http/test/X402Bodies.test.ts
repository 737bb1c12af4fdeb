import { Errors, Money, X402 } from "@tollgate/core"
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import { Option } from "effect"
import { describe, expect, it } from "vitest"

const config = X402.makeConfig({
  publicOrigin: "https://api.example.com/",
  payTo: { evm: "0x1111111111111111111111111111111111111111", solana: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin" },
  solanaFeePayer: "2wmVCSfPxGPjrnMMn7rchp4uaeoTqN39mXFC2zhPdri9"
})

const challenge = {
  info: {
    domain: "api.example.com",
    uri: "https://api.example.com",
    version: "1",
    nonce: "0123456789abcdef0123456789abcdef",
    issuedAt: "2026-11-22T10:00:00.000Z",
    expirationTime: "2026-11-22T10:10:00.000Z",
    statement: "Sign in to tollgate"
  },
  supportedChains: [{ chainId: "eip155:8453", type: "eip191" as const }]
}

describe("Discovery 402 (form 2): x402Version 2, Base and Solana USDC, SIWX challenge, authOptions, PAYMENT-REQUIRED", () => {
  const error = X402.discovery(config, { resource: { url: "https://api.example.com/api/v1/image/generate" }, challenge })

  it("has every field of the spec, with amounts in 6-decimal base units and the 5 USD minimum", () => {
    expect(error).toBeInstanceOf(Errors.PaymentRequired)
    const body = error.body as X402.DiscoveryBody
    expect(body.x402Version).toBe(2)
    expect(body.error).toBe("Payment required")
    expect(body.resource).toEqual({
      url: "https://api.example.com/api/v1/image/generate",
      description: expect.any(String),
      mimeType: "application/json"
    })
    expect(body.accepts).toEqual([
      {
        scheme: "exact",
        network: "eip155:8453",
        asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        amount: "5000000",
        payTo: "0x1111111111111111111111111111111111111111",
        maxTimeoutSeconds: 300,
        extra: { name: "USD Coin", version: "2" }
      },
      {
        scheme: "exact",
        network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        asset: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        amount: "5000000",
        payTo: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
        maxTimeoutSeconds: 300,
        extra: { feePayer: "2wmVCSfPxGPjrnMMn7rchp4uaeoTqN39mXFC2zhPdri9" }
      }
    ])
    expect(body.extensions["sign-in-with-x"]).toEqual(challenge)
    expect(body.authOptions).toEqual({
      apiKey: { header: "Authorization", getKey: "https://api.example.com/api-keys", docs: expect.any(String) },
      x402Wallet: {
        header: "SIGN-IN-WITH-X",
        legacyHeader: "X-Sign-In-With-X",
        topUp: "https://api.example.com/api/v1/x402/top-up",
        docs: "https://api.example.com/docs/wallets"
      }
    })
  })

  it("sends the same object in PAYMENT-REQUIRED, decodable by the official @x402/core, with Cache-Control: no-store", () => {
    const header = error.headers?.["payment-required"] ?? ""
    expect(header).toMatch(/^[A-Za-z0-9+/]+={0,2}$/)
    expect(decodePaymentRequiredHeader(header)).toEqual(error.body)
    expect(error.headers?.["cache-control"]).toBe("no-store")
  })
})

describe("Authenticated wallet with too little balance (form 3): every field of the spec", () => {
  it("reports balance, the price, a suggested top-up and the legacy Base instructions", () => {
    const error = X402.insufficientBalance(config, { balance: Money.usd(1), required: Money.usd(8), challenge })
    expect(error.body).toEqual({
      error: "Payment required",
      code: "PAYMENT_REQUIRED",
      reason: "insufficient_balance",
      message: expect.any(String),
      currentBalanceUsd: 1,
      minimumBalanceUsd: 8,
      description: expect.any(String),
      suggestedTopUpUsd: 7,
      minimumTopUpUsd: 5,
      supportedTokens: ["USDC"],
      supportedChains: ["base", "solana"],
      topUpInstructions: {
        step1: expect.any(String),
        step2: expect.any(String),
        step3: expect.any(String),
        receiverWallet: "0x1111111111111111111111111111111111111111",
        tokenAddress: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        tokenDecimals: 6,
        network: "base",
        minimumAmountUsd: 5
      },
      siwxChallenge: challenge
    })
  })

  it("never suggests less than the minimum top-up", () => {
    const error = X402.insufficientBalance(config, { balance: Money.usd(0), required: Money.unsafeNano(10_000_000), challenge })
    expect((error.body as X402.InsufficientBalanceBody).suggestedTopUpUsd).toBe(5)
  })
})

describe("A payment matches only requirements rebuilt for the same request", () => {
  const candidates = X402.requirements(config, Money.usd(5))
  const payload = (accepted: X402.PaymentRequirements) =>
    encodePaymentSignatureHeader({ x402Version: 2, accepted, payload: { signature: "0x" } } as never)
  const run = (header: string) => X402.decodePayment(header, candidates)

  it("accepts the requirement verbatim, and extra keys the client adds", () => {
    const accepted = { ...candidates[0]!, extra: { ...candidates[0]!.extra, added: true } }
    const result = run(payload(accepted))
    expect(result._tag).toBe("Success")
  })

  it.each([
    ["another amount", { amount: "1000000" }],
    ["another recipient", { payTo: "0x2222222222222222222222222222222222222222" }],
    ["another asset", { asset: "0x3333333333333333333333333333333333333333" }],
    ["another EIP-712 domain", { extra: { name: "Fake", version: "2" } }]
  ])("refuses %s", (_name, change) => {
    const result = run(payload({ ...candidates[0]!, ...change }))
    expect(result._tag).toBe("Failure")
    if (result._tag === "Failure") expect(result.failure.reason).toBe("No matching payment requirements")
  })

  it("refuses base64url and non-JSON headers as invalid payloads", () => {
    const result = run("not-base64_!")
    expect(result._tag === "Failure" && result.failure.reason).toBe("invalid_payload")
    expect(Option.isNone(X402.decodeHeader("e30-"))).toBe(true)
  })

  it("reads only strict standard base64: a character outside the alphabet, inner whitespace or padding before the end is refused", () => {
    const header = Buffer.from(JSON.stringify({ x402Version: 2 })).toString("base64")
    expect(X402.decodeHeader(header)).toEqual(Option.some({ x402Version: 2 }))
    for (
      const broken of [
        `${header.slice(0, 4)}*${header.slice(5)}`,
        `${header.slice(0, 4)} ${header.slice(5)}`,
        `e3=${header.slice(3)}`,
        "e30====",
        "a===",
        "e30=!"
      ]
    ) {
      expect(Option.isNone(X402.decodeHeader(broken))).toBe(true)
    }
  })
})

describe("Without wallet payments configured, the 402s promise no top-up", () => {
  const off = X402.makeConfig({ publicOrigin: "https://api.example.com" })

  it("discovery: an empty accepts, and a description that asks for an API key and names no chain", () => {
    const body = X402.discovery(off, { resource: { url: "https://api.example.com/api/v1/image/generate" }, challenge })
      .body as X402.DiscoveryBody
    expect(body.accepts).toEqual([])
    expect(body.resource.description).toBe("Send an API key (Authorization: Bearer); wallet top-ups are not configured on this server")
  })

  it("with Base only, the discovery description names Base and not Solana", () => {
    const baseOnly = X402.makeConfig({
      publicOrigin: "https://api.example.com",
      payTo: { evm: "0x1111111111111111111111111111111111111111" }
    })
    const body = X402.discovery(baseOnly, { resource: { url: "https://api.example.com/api/v1/image/generate" }, challenge })
      .body as X402.DiscoveryBody
    expect(body.resource.description).toBe("Sign in with a wallet holding prepaid credit, or top up USDC credit on Base")
  })

  it("insufficient balance: no chains, no instructions, and a description that offers no top-up", () => {
    const body = X402.insufficientBalance(off, { balance: Money.usd(0), required: Money.usd(1), challenge })
      .body as X402.InsufficientBalanceBody
    expect(body.supportedChains).toEqual([])
    expect("topUpInstructions" in body).toBe(false)
    expect(body.description).toBe("This server takes no wallet top-ups: the wallet's credit comes from its operator, or use an API key")
  })
})
