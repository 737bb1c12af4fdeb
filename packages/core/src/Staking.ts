/**
 * Staked-token credits read from chain. A wallet's stake (whole tokens of the configured staking
 * token, read by a `StakeReader`) sets its daily allowance in the `CreditLedger`: 1 token = 1 USD
 * of credit per UTC day, spent before prepaid USD (see `docs/billing.md`).
 *
 * **Details**
 *
 * The metered pipeline calls `refresh` for every wallet call before the credit hold. A read is
 * cached per wallet and repeated only when it is older than `refreshMs` or from an earlier UTC day,
 * so a busy wallet costs one chain read every few minutes; the ledger is written only when the
 * stake changed. A chain that cannot be read leaves the last known stake in place (the call is
 * never refused for it) and is asked again at the next refresh.
 *
 * Without a `layer`, `Staking` is the no-op default: nothing is read, stakes stay as recorded.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import * as CreditLedger from "./CreditLedger.ts"
import type * as Errors from "./Errors.ts"
import type * as Principal from "./Principal.ts"

/**
 * Reads how many whole staking tokens an EVM address holds.
 *
 * @category models
 */
export type StakeReader = (address: string) => Effect.Effect<number, Errors.ServiceUnavailable>

/** @category models */
export interface Service {
  /** Makes the ledger's stake of this wallet current (EVM wallets; others are left as they are). */
  readonly refresh: (wallet: Principal.WalletPrincipal) => Effect.Effect<void>
}

/**
 * The staking service; the default reads nothing.
 *
 * @category services
 */
export const Staking = Context.Reference<Service>("@tollgate/core/Staking", {
  defaultValue: () => ({ refresh: () => Effect.void })
})

/** Five minutes: how long a wallet's stake read stays current within a UTC day. @category constants */
export const DEFAULT_REFRESH_MS = 300_000

const DAY_MS = 86_400_000

/**
 * Staking from chain through `read`, recorded in the `CreditLedger` in context.
 *
 * @category layers
 */
export const layer = (
  options: { readonly read: StakeReader; readonly refreshMs?: number }
): Layer.Layer<never, never, CreditLedger.CreditLedger> =>
  Layer.effect(
    Staking,
    Effect.gen(function*() {
      const ledger = yield* CreditLedger.CreditLedger
      const refreshMs = options.refreshMs ?? DEFAULT_REFRESH_MS
      // The reads of the current UTC day only: a new day starts with an empty cache.
      let cacheDay = -1
      const lastRead = new Map<string, number>()

      const refresh = Effect.fnUntraced(function*(wallet: Principal.WalletPrincipal) {
        if (wallet.family !== "evm") return
        const now = yield* Clock.currentTimeMillis
        const day = Math.floor(now / DAY_MS)
        if (day !== cacheDay) {
          cacheDay = day
          lastRead.clear()
        }
        const readAt = lastRead.get(wallet.accountId)
        if (readAt !== undefined && now - readAt < refreshMs) return
        lastRead.set(wallet.accountId, now)
        const tokens = yield* options.read(wallet.address)
        const current = yield* ledger.balance(wallet.accountId)
        if (current.stakedTokens === tokens) return
        yield* ledger.stake({ accountId: wallet.accountId, tokens, reference: `stake:chain:${wallet.accountId}:${now}` })
      })

      return {
        refresh: (wallet) =>
          refresh(wallet).pipe(
            Effect.catch((error) => Effect.logWarning("staked tokens could not be read; the last known stake stays", error.message))
          )
      }
    })
  )
