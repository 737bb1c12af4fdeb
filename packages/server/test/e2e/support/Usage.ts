/**
 * The usage report as a client reads it, for end-to-end tests that check what a call was charged:
 * the newest entries of `GET /billing/usage-history`, with each amount in integer nano-USD.
 */
import type { ShippedServer } from "@tollgate/testkit"

/** @category models */
export interface Entry {
  readonly sku: string
  readonly unit: number
  /** The amount charged, in nano-USD (the report's USD number, which has at most 9 decimals). */
  readonly nano: number
  readonly notes: string
  readonly inferenceDetails: { readonly requestId: string; readonly promptTokens?: number; readonly completionTokens?: number }
}

/** The newest `count` entries of the server's demo account, newest first. */
export const latest = async (server: ShippedServer.ShippedServer, count = 1): Promise<ReadonlyArray<Entry>> => {
  const response = await fetch(`${server.api}/billing/usage-history?sortOrder=desc&limit=${count}`, {
    headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
  })
  const body = await response.json() as { data: ReadonlyArray<Omit<Entry, "nano"> & { amount: number }> }
  return body.data.map(({ amount, ...entry }) => ({ ...entry, nano: Math.round(amount * 1e9) }))
}

/** Nano-USD of `units` at a price per million, rounded up as the price table rounds. */
export const perMillion = (units: number, nanoPerMillion: number): number => Math.ceil(units * nanoPerMillion / 1_000_000)
