import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import * as Money from "../src/Money.ts"

const parse = (text: string) => Result.getOrThrow(Money.parseUsd(text))

describe("Money is integer nano-USD: 1 USD = 1e9, 1 USDC base unit = 1000", () => {
  it("the units", () => {
    expect(Money.usd(1)).toBe(1_000_000_000)
    expect(Result.getOrThrow(Money.fromUsdcUnits("1"))).toBe(1_000)
    expect(Result.getOrThrow(Money.fromUsdcUnits("5000000"))).toBe(Money.usd(5))
    expect(parse("0.000000625")).toBe(625)
    expect(parse("0.01")).toBe(10_000_000)
  })

  it("USDC base units round up, so a requirement never asks for less than the price", () => {
    expect(Money.toUsdcUnits(parse("0.0000015"))).toBe("2")
    expect(Money.toUsdcUnits(Money.usd(5))).toBe("5000000")
  })
})

describe("Decimal strings are parsed and formatted exactly", () => {
  it("parse then format gives the shortest exact decimal", () => {
    expect(Money.formatUsd(parse("12.340000000"))).toBe("12.34")
    expect(Money.formatUsd(parse("-0.000000625"))).toBe("-0.000000625")
    expect(Money.formatUsd(parse("5"))).toBe("5")
    expect(Money.formatUsd(parse("0"))).toBe("0")
  })

  it("format then parse is the identity for every safe amount", () => {
    fc.assert(fc.property(fc.maxSafeInteger(), (n) => {
      expect(parse(Money.formatUsd(Money.unsafeNano(n)))).toBe(n)
    }))
  })
})

describe("Floats, extra precision and out-of-range values are refused", () => {
  it.each([
    ["1e3", "NotADecimal"],
    ["0x10", "NotADecimal"],
    ["1.", "NotADecimal"],
    [".5", "NotADecimal"],
    ["", "NotADecimal"],
    ["0.0000000001", "TooPrecise"],
    ["9007199.254740992", "OutOfRange"],
    ["100000000000", "OutOfRange"]
  ])("%s -> %s", (text, reason) => {
    const result = Money.parseUsd(text)
    expect(Result.isFailure(result) && result.failure.reason).toBe(reason)
  })

  it("a float or an unsafe integer is not a nano amount", () => {
    expect(Result.isFailure(Money.fromNano(0.5))).toBe(true)
    expect(Result.isFailure(Money.fromNano(2 ** 53))).toBe(true)
    expect(() => Money.unsafeNano(1.5)).toThrow()
    expect(() => Money.add(Money.MAX, Money.unsafeNano(1))).toThrow()
  })
})
