import { describe, expect, it } from "@effect/vitest"
import { Option, Result } from "effect"
import * as Money from "../src/Money.ts"
import * as X402 from "../src/X402.ts"

const usd = (text: string) => Result.getOrThrow(Money.parseUsd(text))

const config = X402.makeConfig({
  publicOrigin: "https://api.example.com",
  payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", solana: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin" },
  solanaFeePayer: "FeePayer1111111111111111111111111111111111"
})

const amounts = (entries: ReadonlyArray<X402.PaymentRequirements>) => entries.map((entry) => [entry.network, entry.amount])

describe("A metered endpoint accepts the call at its price on every network, then the minimum top-up; below the floor, the top-up only", () => {
  it("0.01 USD: the call on Base and Solana (10000 units each), then 5 USD on both", () => {
    expect(amounts(X402.endpointRequirements(config, usd("0.01")))).toEqual([
      [X402.BASE_MAINNET, "10000"],
      [X402.SOLANA_MAINNET, "10000"],
      [X402.BASE_MAINNET, "5000000"],
      [X402.SOLANA_MAINNET, "5000000"]
    ])
  })

  it("a price in nano-USD finer than a USDC unit is rounded up to the next unit", () => {
    expect(X402.endpointRequirements(config, usd("0.0012345"))[0]!.amount).toBe("1235")
  })

  it("a call priced at the minimum top-up is offered once per network", () => {
    expect(amounts(X402.endpointRequirements(config, Money.usd(5)))).toEqual([[X402.BASE_MAINNET, "5000000"], [
      X402.SOLANA_MAINNET,
      "5000000"
    ]])
  })

  it("below minimumPerCall (0.001 USD by default) and when the price is unknown: the top-up only", () => {
    expect(config.minimumPerCall).toBe(usd("0.001"))
    expect(X402.perCallOffered(config, usd("0.001"))).toBe(true)
    expect(X402.perCallOffered(config, usd("0.000999999"))).toBe(false)
    expect(amounts(X402.endpointRequirements(config, usd("0.0000125")))).toEqual([[X402.BASE_MAINNET, "5000000"], [
      X402.SOLANA_MAINNET,
      "5000000"
    ]])
    expect(amounts(X402.endpointRequirements(config, undefined))).toEqual([[X402.BASE_MAINNET, "5000000"], [
      X402.SOLANA_MAINNET,
      "5000000"
    ]])
  })

  it("the operator's floor moves the line", () => {
    const strict = X402.makeConfig({
      publicOrigin: "https://api.example.com",
      payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" },
      minimumPerCall: usd("0.05")
    })
    expect(amounts(X402.endpointRequirements(strict, usd("0.01")))).toEqual([[X402.BASE_MAINNET, "5000000"]])
    expect(amounts(X402.endpointRequirements(strict, usd("0.05")))).toEqual([[X402.BASE_MAINNET, "50000"], [X402.BASE_MAINNET, "5000000"]])
  })
})

describe("A payment names itself with a payment-identifier of 16 to 128 letters, digits, _ and -", () => {
  const payload = (id: unknown): X402.PaymentPayload => ({
    x402Version: 2,
    accepted: X402.requirements(config, Money.usd(5))[0]!,
    payload: {},
    extensions: { [X402.PAYMENT_IDENTIFIER]: { info: { required: false, id } } }
  })

  it("a valid id is read; a short, long or foreign-character id, or none, is no id", () => {
    expect(X402.paymentIdentifier(payload("pay_7d5d747be160e280504c099d984bcfe0"))).toEqual(
      Option.some("pay_7d5d747be160e280504c099d984bcfe0")
    )
    expect(X402.paymentIdentifier(payload("short"))).toEqual(Option.none())
    expect(X402.paymentIdentifier(payload("x".repeat(129)))).toEqual(Option.none())
    expect(X402.paymentIdentifier(payload("pay_abc!@#defghijklmnop"))).toEqual(Option.none())
    expect(X402.paymentIdentifier(payload(42))).toEqual(Option.none())
    expect(X402.paymentIdentifier({ ...payload("pay_7d5d747be160e280504c099d984bcfe0"), extensions: {} })).toEqual(Option.none())
  })
})

describe("The discovery 402 of a metered endpoint declares payment-identifier; the top-up's does not", () => {
  const challenge = {
    info: {
      domain: "api.example.com",
      uri: "https://api.example.com/",
      version: "1",
      nonce: "0123456789abcdef",
      issuedAt: "",
      expirationTime: "",
      statement: ""
    },
    supportedChains: []
  }
  it("with a price: declared optional; with an amount (the top-up): absent", () => {
    const metered = X402.discoveryBody(config, {
      resource: { url: "https://api.example.com/api/v1/augment/text-parser" },
      challenge,
      price: usd("0.01")
    })
    expect(metered.extensions[X402.PAYMENT_IDENTIFIER]).toMatchObject({ info: { required: false } })
    const topUp = X402.discoveryBody(config, {
      resource: { url: "https://api.example.com/api/v1/x402/top-up" },
      challenge,
      amount: Money.usd(5)
    })
    expect(topUp.extensions[X402.PAYMENT_IDENTIFIER]).toBeUndefined()
  })
})

describe("A call priced by its outcome is offered upto first (Base, Permit2) when a facilitator here settles it; exact entries follow", () => {
  const extra = { assetTransferMethod: "permit2", facilitatorAddress: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" }
  const withUpto = X402.makeConfig({
    publicOrigin: "https://api.example.com",
    payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" },
    evm: { upto: { extra } }
  })

  it("0.5 USD settling the actual charge: upto 500000 with the token's domain and the facilitator, then exact 500000, then the 5 USD top-up", () => {
    const entries = X402.endpointRequirements(withUpto, usd("0.5"), true)
    expect(entries.map((entry) => [entry.scheme, entry.amount])).toEqual([["upto", "500000"], ["exact", "500000"], ["exact", "5000000"]])
    expect(entries[0]).toMatchObject({
      network: X402.BASE_MAINNET,
      asset: X402.BASE_USDC,
      extra: { name: "USD Coin", version: "2", ...extra }
    })
  })

  it("no upto for a price known before the call, below the floor, or without a facilitator that settles upto", () => {
    const schemes = (entries: ReadonlyArray<X402.PaymentRequirements>) => entries.map((entry) => entry.scheme)
    expect(schemes(X402.endpointRequirements(withUpto, usd("0.5")))).toEqual(["exact", "exact"])
    expect(schemes(X402.endpointRequirements(withUpto, usd("0.0000125"), true))).toEqual(["exact"])
    expect(schemes(X402.endpointRequirements(config, usd("0.5"), true))).not.toContain("upto")
  })
})
