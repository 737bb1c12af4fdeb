/**
 * The bodies of the wallet 402s. The pipeline decides when a wallet or an anonymous caller gets a
 * 402; the x402 module (`routes/X402.ts`) provides what the body says, so the x402 shape is written
 * in one place and the pipeline does not depend on it.
 *
 * @since 0.1.0
 */
import type { CreditLedger, Errors, Money, Principal } from "@tollgate/core"
import { Context, type Effect } from "effect"
import type { MeteredCall } from "./MeteredCall.ts"

/**
 * `discovery` answers a caller with no credentials; `insufficientBalance` a signed-in wallet that
 * cannot afford the call.
 *
 * @category services
 */
export class PaymentRequiredBodies extends Context.Service<PaymentRequiredBodies, {
  /** `price`: the call's worst-case price, which the 402 may offer to be paid on its own. */
  readonly discovery: (input: {
    readonly url: string
    readonly price?: Money.Nano | undefined
    /** The charge is known from the outcome (`MeteredCall.settlesActual`): the 402 offers `upto` too. */
    readonly settlesActual?: boolean | undefined
  }) => Effect.Effect<Errors.PaymentRequired>
  readonly insufficientBalance: (input: {
    readonly principal: Principal.WalletPrincipal
    readonly balance: CreditLedger.Balance
    readonly call: MeteredCall
    readonly url?: string | undefined
  }) => Effect.Effect<Errors.PaymentRequired>
}>()("@tollgate/http/Metered/PaymentRequiredBodies") {}
