/**
 * A paid tool's price as the MCP tool listing states it (`McpTools`): in words, the way the
 * route's 402 states it (flat, per unit with its worst case, per model and token), for the tool's
 * description, and as data for `_meta["tollgate/price"]`, for agents that compare prices.
 *
 * @since 0.1.0
 */
import { Money } from "@tollgate/core"

/** @category models */
export interface ToolPrice {
  readonly text: string
  readonly data: Readonly<Record<string, unknown>>
}

/**
 * Where a tool's machine-readable price is, in its `_meta`.
 *
 * @category constants
 */
export const META_KEY = "tollgate/price"

const usd = (amount: Money.Nano) => Money.formatUsd(amount)

/**
 * The same amount for every call.
 *
 * @category constructors
 */
export const flat = (amount: Money.Nano): ToolPrice => ({
  text: `Price: ${usd(amount)} USD per call.`,
  data: { mode: "flat", usd: usd(amount) }
})

/**
 * A price per unit; `worstCase` says what bounds the units of a call, which is held.
 *
 * @category constructors
 */
export const perUnit = (amount: Money.Nano, unit: string, worstCase: string): ToolPrice => ({
  text: `Price: ${usd(amount)} USD per ${unit}; ${worstCase} is held as the worst case and only what the call uses is charged.`,
  data: { mode: "per_unit", usdPerUnit: usd(amount), unit, worstCase }
})

/**
 * A price quoted from the request; the call reports what it cost.
 *
 * @category constructors
 */
export const quoted = (how: string): ToolPrice => ({
  text: `Price: quoted per call (${how}); the quote is held as the worst case and only what the call uses is charged.`,
  data: { mode: "quoted", how }
})

/**
 * Prices per model, each a few named amounts per `unit` (input and output per million tokens).
 *
 * @category constructors
 */
export const perModel = (
  unit: string,
  entries: ReadonlyArray<readonly [string, Readonly<Record<string, Money.Nano | undefined>>]>
): ToolPrice => {
  const named = entries.map(([id, prices]) =>
    [id, Object.entries(prices).flatMap(([name, amount]) => amount === undefined ? [] : [[name, usd(amount)] as const])] as const
  )
  return {
    text:
      `Price per model, ${unit}: ${
        named.map(([id, prices]) => `${id} ${prices.map(([name, amount]) => `${amount} USD ${name}`).join(", ")}`).join("; ")
      }. ` +
      "The worst case of the request is held and only what the call uses is charged.",
    data: { mode: "per_model", unit, models: Object.fromEntries(named.map(([id, prices]) => [id, Object.fromEntries(prices)])) }
  }
}
