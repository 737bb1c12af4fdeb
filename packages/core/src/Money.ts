/**
 * Money as integer nano-USD. Every amount tollgate stores, compares or sums is a safe integer count
 * of 1e-9 USD, so a ledger never rounds; decimal strings exist only at the wire, where `parse` and
 * `format` convert exactly in both directions. One USDC base unit (1e-6 USD) is 1,000 nano-USD and
 * one RPC credit at the default price (6.25e-7 USD) is 625 nano-USD.
 *
 * @since 0.1.0
 */
import { type Brand, Data, Result } from "effect"

/**
 * An amount in nano-USD: a safe integer, possibly negative (journal deltas are signed).
 *
 * @category models
 */
export type Nano = number & Brand.Brand<"Nano">

/** @category constants */
export const NANO_PER_USD = 1_000_000_000
/** @category constants */
export const NANO_PER_USDC_UNIT = 1_000
/** @category constants */
export const USDC_DECIMALS = 6

/**
 * The largest amount tollgate accepts: 9,007,199 USD, the safe-integer ceiling in nano-USD.
 *
 * @category constants
 */
export const MAX: Nano = Number.MAX_SAFE_INTEGER as Nano

/** @category constants */
export const zero: Nano = 0 as Nano

/**
 * Why an amount was refused.
 *
 * @category errors
 */
export class MoneyError extends Data.TaggedError("MoneyError")<{
  readonly input: unknown
  readonly reason: "NotADecimal" | "TooPrecise" | "OutOfRange" | "NotAnInteger"
}> {
  override get message() {
    switch (this.reason) {
      case "NotADecimal":
        return `${JSON.stringify(this.input)} is not a decimal number`
      case "TooPrecise":
        return `${JSON.stringify(this.input)} has more than 9 decimal places`
      case "OutOfRange":
        return `${JSON.stringify(this.input)} is out of range`
      case "NotAnInteger":
        return `${String(this.input)} is not an integer amount of nano-USD`
    }
  }
}

/**
 * Checks that a number is a safe integer and brands it.
 *
 * @category constructors
 */
export const fromNano = (n: number): Result.Result<Nano, MoneyError> =>
  Number.isSafeInteger(n)
    ? Result.succeed(n as Nano)
    : Result.fail(new MoneyError({ input: n, reason: Number.isInteger(n) ? "OutOfRange" : "NotAnInteger" }))

/**
 * Like `fromNano`, for amounts the program computed itself; throws on a float.
 *
 * @category constructors
 */
export const unsafeNano = (n: number): Nano => {
  if (!Number.isSafeInteger(n)) throw new MoneyError({ input: n, reason: "NotAnInteger" })
  return n as Nano
}

const DECIMAL = /^(-)?(\d+)(?:\.(\d+))?$/

/**
 * Parses a decimal USD string ("0.01", "-5", "12.000000001") exactly. Floats are refused: pass the
 * string the client sent, never a parsed number.
 *
 * @category constructors
 */
export const parseUsd = (input: string): Result.Result<Nano, MoneyError> => {
  const match = DECIMAL.exec(input.trim())
  if (match === null) return Result.fail(new MoneyError({ input, reason: "NotADecimal" }))
  const [, sign, whole = "0", fraction = ""] = match
  if (fraction.length > 9) return Result.fail(new MoneyError({ input, reason: "TooPrecise" }))
  const nano = BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0"))
  if (nano > BigInt(Number.MAX_SAFE_INTEGER)) return Result.fail(new MoneyError({ input, reason: "OutOfRange" }))
  return Result.succeed(Number(sign === "-" ? -nano : nano) as Nano)
}

/**
 * Formats nano-USD as the shortest exact decimal USD string ("0.01", "5", "-0.000000625").
 *
 * @category formatting
 */
export const formatUsd = (amount: Nano): string => {
  // A Nano is a safe integer, so number division and remainder by 10^9 are exact: no BigInt, which
  // cost about 1 us per call on the paid path (three balance and cost headers per call).
  const abs = Math.abs(amount)
  const whole = Math.floor(abs / NANO_PER_USD)
  let fraction = abs - whole * NANO_PER_USD
  const sign = amount < 0 ? "-" : ""
  if (fraction === 0) return `${sign}${whole}`
  let digits = 9
  while (fraction % 10 === 0) {
    fraction /= 10
    digits--
  }
  return `${sign}${whole}.${String(fraction).padStart(digits, "0")}`
}

/**
 * Nano-USD as a JavaScript number of USD, for wire fields the spec types as numbers
 * (`currentBalanceUsd`). Exact for every amount below 2^53 / 1e9 USD to the nano.
 *
 * @category formatting
 */
export const toUsdNumber = (amount: Nano): number => Number(formatUsd(amount))

/** @category constructors */
export const usd = (whole: number): Nano => unsafeNano(whole * NANO_PER_USD)

/**
 * USDC base units (6 decimals, as a decimal integer string) to nano-USD.
 *
 * @category conversions
 */
export const fromUsdcUnits = (units: string | bigint): Result.Result<Nano, MoneyError> => {
  const text = typeof units === "bigint" ? units.toString() : units
  if (!/^\d+$/.test(text)) return Result.fail(new MoneyError({ input: units, reason: "NotADecimal" }))
  const nano = BigInt(text) * BigInt(NANO_PER_USDC_UNIT)
  if (nano > BigInt(Number.MAX_SAFE_INTEGER)) return Result.fail(new MoneyError({ input: units, reason: "OutOfRange" }))
  return Result.succeed(Number(nano) as Nano)
}

/**
 * Nano-USD to USDC base units, rounded up so a requirement never asks for less than the price.
 *
 * @category conversions
 */
export const toUsdcUnits = (amount: Nano): string =>
  ((BigInt(amount) + BigInt(NANO_PER_USDC_UNIT) - 1n) / BigInt(NANO_PER_USDC_UNIT)).toString()

/** @category math */
export const add = (a: Nano, b: Nano): Nano => unsafeNano(a + b)
/** @category math */
export const subtract = (a: Nano, b: Nano): Nano => unsafeNano(a - b)
/** @category math */
export const multiply = (a: Nano, factor: number): Nano => unsafeNano(a * factor)
/** @category math */
export const min = (a: Nano, b: Nano): Nano => (a < b ? a : b)
/** @category math */
export const max = (a: Nano, b: Nano): Nano => (a > b ? a : b)
