/**
 * The `accepts` entries a 402 offers: the top-up's, a metered call's paid on its own (`exact`, and
 * `upto` where the charge is known only from the outcome), and a voucher on a payment channel
 * (`batch-settlement`) for calls below the per-call floor. Amounts in 6-decimal USDC base units,
 * rounded up.
 *
 * @since 0.1.0
 */
import * as BatchSettlement from "../BatchSettlement.ts"
import * as Money from "../Money.ts"
import type { Config } from "./Config.ts"
import type { PaymentRequirements } from "./Wire.ts"

/**
 * The two `accepts` entries for paying `amount`: Base USDC (EIP-712 domain in `extra`) and Solana
 * USDC (`feePayer` in `extra`), amounts in 6-decimal base units rounded up.
 *
 * @category constructors
 */
export const requirements = (config: Config, amount: Money.Nano): ReadonlyArray<PaymentRequirements> => {
  const units = Money.toUsdcUnits(amount)
  const evm: ReadonlyArray<PaymentRequirements> = config.evm === undefined ? [] : [{
    scheme: "exact",
    network: config.evm.network,
    asset: config.evm.asset,
    amount: units,
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { name: config.evm.eip712.name, version: config.evm.eip712.version }
  }]
  if (config.solana === undefined) return evm
  return [...evm, {
    scheme: "exact",
    network: config.solana.network,
    asset: config.solana.asset,
    amount: units,
    payTo: config.solana.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { feePayer: config.solana.feePayer }
  }]
}

/**
 * What a metered endpoint accepts: the call paid on its own at `price` (its worst-case quote; what
 * the call does not use stays as credit), unless that is below `minimumPerCall`, then a voucher on
 * a payment channel (`batch-settlement`, where Base is settled here) and the minimum top-up, which
 * a payment sent to the endpoint credits too. Per-call entries come first because the official
 * client pays the first entry it can.
 *
 * @category constructors
 */
export const endpointRequirements = (
  config: Config,
  price: Money.Nano | undefined,
  settlesActual = false
): ReadonlyArray<PaymentRequirements> => {
  const topUp = requirements(config, config.minimumTopUp)
  if (!perCallOffered(config, price))
    return price === undefined || price <= 0
      ? topUp
      : [...batchSettlementRequirements(config, price), ...topUp]
  const perCall = requirements(config, price)
  const upto = settlesActual ? uptoRequirements(config, price) : []
  return [
    ...upto,
    ...perCall,
    ...topUp.filter((entry) => !perCall.some((own) => own.network === entry.network && own.amount === entry.amount))
  ]
}

/**
 * The `batch-settlement` entry of a call below the per-call floor: a voucher for the channel's
 * cumulative charge plus `price`, rounded up to a base unit (what the call is charged may be less:
 * its charge in nano-USD is added to the channel's, see `PaymentChannels`). Base only, and only
 * when a facilitator here settles the scheme (`EvmOption.batchSettlement`).
 *
 * @category constructors
 */
export const batchSettlementRequirements = (config: Config, price: Money.Nano): ReadonlyArray<PaymentRequirements> =>
  config.evm?.batchSettlement === undefined ? [] : [{
    scheme: BatchSettlement.SCHEME,
    network: config.evm.network,
    asset: config.evm.asset,
    amount: Money.toUsdcUnits(price),
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: BatchSettlement.extra(config.evm.batchSettlement, config.evm.eip712)
  }]

/**
 * The `upto` entry of a call whose charge is known only from its outcome: a Permit2 permit for at
 * most `price`, of which the facilitator settles the actual charge after the call. Base only, and
 * only when a facilitator here settles `upto` (`EvmOption.upto`). It comes before `exact` in a 402:
 * a client that can sign either pays what the call used, and a client that knows only `exact`
 * (the official client drops schemes it has not registered) pays the worst case, keeping the rest
 * as credit.
 *
 * @category constructors
 */
export const uptoRequirements = (config: Config, price: Money.Nano): ReadonlyArray<PaymentRequirements> =>
  config.evm?.upto === undefined ? [] : [{
    scheme: "upto",
    network: config.evm.network,
    asset: config.evm.asset,
    amount: Money.toUsdcUnits(price),
    payTo: config.evm.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { name: config.evm.eip712.name, version: config.evm.eip712.version, ...config.evm.upto.extra }
  }]

/**
 * Whether a call of `price` may be paid on its own (it is at least `minimumPerCall`).
 *
 * @category predicates
 */
export const perCallOffered = (config: Config, price: Money.Nano | undefined): price is Money.Nano =>
  price !== undefined && price > 0 && price >= config.minimumPerCall
