/**
 * Usage entries as the billing endpoints send them: the spec's fields (timestamp, sku,
 * pricePerUnitUsd, unit, amount, currency, notes, inferenceDetails) built from the ledger's usage
 * entries, as JSON or as CSV (a header row, RFC 4180 quoting, CRLF line ends), and the opaque
 * cursor of `usage-history` pages.
 *
 * @since 0.1.0
 */
import type * as CreditLedger from "./CreditLedger.ts"
import * as Money from "./Money.ts"

/**
 * The currencies a usage query may name. The ledger records `USD` and `DIEM` (the staked-token
 * allowance); `VCU` and `BUNDLED_CREDITS` are valid filters that match nothing here.
 *
 * @category constants
 */
export const currencies = ["USD", "VCU", "DIEM", "BUNDLED_CREDITS"] as const

/** @category models */
export type QueryCurrency = typeof currencies[number]

/** @category models */
export interface WireEntry {
  readonly timestamp: string
  readonly sku: string
  readonly pricePerUnitUsd: number
  readonly unit: number
  readonly amount: number
  readonly currency: CreditLedger.Currency
  readonly notes: string
  readonly inferenceDetails: {
    readonly requestId: string
    readonly inferenceExecutionTime: number
    readonly promptTokens?: number
    readonly completionTokens?: number
  }
}

/**
 * One entry on the wire. Amounts are numbers of USD (of tokens for `DIEM`, 1 token = 1 USD);
 * the token counts appear only for LLM usage.
 *
 * @category encoding
 */
export const toWire = (entry: CreditLedger.UsageEntry): WireEntry => ({
  timestamp: new Date(entry.timestamp).toISOString(),
  sku: entry.sku,
  pricePerUnitUsd: Money.toUsdNumber(entry.pricePerUnit),
  unit: entry.units,
  amount: Money.toUsdNumber(entry.amount),
  currency: entry.currency,
  notes: entry.notes ?? "",
  inferenceDetails: {
    requestId: entry.requestId,
    inferenceExecutionTime: entry.executionMs,
    ...(entry.promptTokens === undefined ? {} : { promptTokens: entry.promptTokens }),
    ...(entry.completionTokens === undefined ? {} : { completionTokens: entry.completionTokens })
  }
})

/** @category constants */
export const csvColumns = [
  "timestamp",
  "sku",
  "pricePerUnitUsd",
  "unit",
  "amount",
  "currency",
  "notes",
  "requestId",
  "inferenceExecutionTime",
  "promptTokens",
  "completionTokens"
] as const

const field = (value: string | number | undefined): string => {
  const text = value === undefined ? "" : String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll("\"", "\"\"")}"` : text
}

/**
 * Entries as CSV: a header row, then one row per entry; a field with a comma, a quote or a line
 * break is quoted and its quotes doubled (RFC 4180).
 *
 * @category encoding
 */
export const toCsv = (entries: ReadonlyArray<CreditLedger.UsageEntry>): string => {
  const rows = [csvColumns.join(",")]
  for (const entry of entries) {
    const wire = toWire(entry)
    rows.push(
      [
        wire.timestamp,
        wire.sku,
        wire.pricePerUnitUsd,
        wire.unit,
        wire.amount,
        wire.currency,
        wire.notes,
        wire.inferenceDetails.requestId,
        wire.inferenceDetails.inferenceExecutionTime,
        wire.inferenceDetails.promptTokens,
        wire.inferenceDetails.completionTokens
      ].map(field).join(",")
    )
  }
  return `${rows.join("\r\n")}\r\n`
}

/**
 * The opaque cursor of a page: the id of its last entry and the order it was read in, so a cursor
 * is never reused with the other order.
 *
 * @category encoding
 */
export const encodeCursor = (order: "asc" | "desc", id: string): string => Buffer.from(`v1:${order}:${id}`, "utf8").toString("base64url")

/** @category decoding */
export const decodeCursor = (cursor: string): { readonly order: "asc" | "desc"; readonly id: string } | undefined => {
  const match = /^v1:(asc|desc):(\d{1,16}-\d{1,16})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"))
  return match === null ? undefined : { order: match[1] as "asc" | "desc", id: match[2]! }
}
