/**
 * Pending settlements: the transactions a facilitator sent for a payment whose receipt did not
 * arrive in time, by payment (an EIP-3009 payment's signature, a Solana transaction's message
 * hash), so a retried payment collects the transaction already sent instead of being refused. The
 * store must be shared by every process a retry can reach.
 *
 * **Details**
 *
 * The top-up answered 503 and the client sends the same payment again; the transaction sent has
 * already used its authorization (or moved its USDC), and only this entry lets the retry collect
 * it. An entry lost is a payer's money moved with nothing credited.
 *
 * The service is `@x402/core`'s `PendingSettlementStore` itself, which the official EVM and Solana
 * facilitator schemes write and read; tollgate's own check of a retried payment reads the same
 * store. `layerMemory` is the SDK's `InMemoryPendingSettlementStore` (one process);
 * `@tollgate/redis` has the shared layer. Both pass
 * `packages/redis/test/PendingSettlements.contract.test.ts`.
 *
 * @since 0.1.0
 */
import { InMemoryPendingSettlementStore, PENDING_SETTLEMENT_TTL_MS, type PendingSettlementStore } from "@x402/core/facilitator"
import { Context, Layer } from "effect"

/**
 * How long an entry is kept: the SDK's own figure for its in-memory store (5 minutes), used by the
 * Redis layer too, so one deployment behaves the same on either. A retry later than that finds no
 * entry and is refused; a transaction that was dropped instead of mined stops blocking a fresh
 * settlement of the same payment after that long.
 *
 * @category constants
 */
export const TTL_MS: number = PENDING_SETTLEMENT_TTL_MS

/** @category services */
export class PendingSettlements extends Context.Service<PendingSettlements, PendingSettlementStore>()(
  "@tollgate/core/PendingSettlements"
) {}

/**
 * The SDK's in-memory store: for one process only.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<PendingSettlements> = Layer.sync(PendingSettlements, () => new InMemoryPendingSettlementStore())
