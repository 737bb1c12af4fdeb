/**
 * The on-chain transaction of each credited x402 top-up, by its credit reference. The ledger keys a
 * top-up by what makes the payment count once (on EVM the EIP-3009 authorization, not the
 * transaction that carried it), so the transaction hash a wallet's history shows
 * (`GET /x402/transactions/{wallet}`) is kept here, written by the top-up once it is credited.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/** @category services */
export class TopUpTransactions extends Context.Service<TopUpTransactions, {
  readonly record: (accountId: string, reference: string, transaction: string) => Effect.Effect<void, ServiceUnavailable>
  /** The transactions of those of `references` that have one. */
  readonly read: (accountId: string, references: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string>, ServiceUnavailable>
}>()("@tollgate/core/TopUpTransactions") {}

/**
 * In process memory.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<TopUpTransactions> = Layer.sync(TopUpTransactions, () => {
  const byAccount = new Map<string, Map<string, string>>()
  return TopUpTransactions.of({
    record: (accountId, reference, transaction) =>
      Effect.sync(() => {
        let map = byAccount.get(accountId)
        if (map === undefined) {
          map = new Map()
          byAccount.set(accountId, map)
        }
        map.set(reference, transaction)
      }),
    read: (accountId, references) =>
      Effect.sync(() => {
        const map = byAccount.get(accountId)
        const found = new Map<string, string>()
        for (const reference of references) {
          const transaction = map?.get(reference)
          if (transaction !== undefined) found.set(reference, transaction)
        }
        return found
      })
  })
})
