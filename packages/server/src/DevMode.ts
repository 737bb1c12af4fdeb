/**
 * Dev mode, on whenever no signing key is configured: at start the server creates the demo
 * account, mints its ADMIN and INFERENCE keys, gives it credit to spend, and prints the keys once.
 * Everything lives in the throwaway signing key and the stores of this process.
 *
 * @since 0.1.0
 */
import { CreditLedger, Money } from "@tollgate/core"
import { Effect, identity, Layer } from "effect"
import type { ServerConfig } from "./Config.ts"
import * as DevCredentials from "./DevCredentials.ts"

/** Credit the demo account starts with. @category constants */
export const demoCredit = Money.usd(25)

/** @category options */
export interface Options {
  /** Log the credentials once (the server does; tests need not). */
  readonly announce: boolean
  /** Receives the credentials once created (`Tollgate.make` returns them to the host). */
  readonly onCredentials?: ((credentials: DevCredentials.DevCredentials) => void) | undefined
}

/**
 * Creates the demo credentials and credit when the layer is built; logs them (one line, the keys
 * as annotations) when `announce` is set (the server does, embedded apps and tests need not).
 *
 * @category layers
 */
export const layer = (
  config: Pick<ServerConfig, "devCredentialsFile">,
  options: Options,
  notice: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = identity
) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const credentials = yield* DevCredentials.create({ file: config.devCredentialsFile })
    const ledger = yield* CreditLedger.CreditLedger
    yield* ledger.grant({ accountId: credentials.accountId, amount: demoCredit, reference: "dev-mode-demo-credit" })
    options.onCredentials?.(credentials)
    if (options.announce) {
      yield* Effect.logInfo(DevCredentials.banner).pipe(Effect.annotateLogs({
        accountId: credentials.accountId,
        adminKey: credentials.adminKey,
        inferenceKey: credentials.inferenceKey
      }), notice)
    }
  }))
