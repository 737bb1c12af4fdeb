/**
 * Dev mode, on whenever no signing key is configured: at start the server creates the demo
 * account, mints its ADMIN and INFERENCE keys, gives it credit to spend, and prints the keys once.
 * Everything lives in the throwaway signing key and the stores of this process.
 *
 * @since 0.1.0
 */
import { CreditLedger, Money } from "@tollgate/core"
import { Console, Effect, Layer } from "effect"
import type { ServerConfig } from "./Config.ts"
import * as DevCredentials from "./DevCredentials.ts"

/** Credit the demo account starts with. @category constants */
export const demoCredit = Money.usd(25)

/**
 * Creates the demo credentials and credit when the layer is built; prints the banner when
 * `announce` is set (the server does, embedded apps and tests need not).
 *
 * @category layers
 */
export const layer = (config: Pick<ServerConfig, "devCredentialsFile">, options: { readonly announce: boolean }) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const credentials = yield* DevCredentials.create({ file: config.devCredentialsFile })
    const ledger = yield* CreditLedger.CreditLedger
    yield* ledger.grant({ accountId: credentials.accountId, amount: demoCredit, reference: "dev-mode-demo-credit" })
    if (options.announce) yield* Console.log(DevCredentials.banner(credentials))
  }))
