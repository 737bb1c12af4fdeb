/**
 * What the metered bench servers share: an account with an INFERENCE key and enough credit that
 * no benchmark run ever hits a 402, created in the services the server runs on.
 */
import { Auth, CreditLedger, Money } from "@tollgate/core"
import { type Context, Effect } from "effect"

export const seedKey = (context: Context.Context<Auth.Auth | CreditLedger.CreditLedger>): Promise<string> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const ledger = yield* CreditLedger.CreditLedger
      const account = yield* auth.createAccount()
      const { key } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "bench" })
      yield* ledger.grant({ accountId: account.id, amount: Money.usd(100_000), reference: "bench" })
      return key
    }).pipe(Effect.provide(context))
  )
