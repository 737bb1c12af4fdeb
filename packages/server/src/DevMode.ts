/**
 * Dev mode, on whenever no signing key is configured: at start the server creates the demo
 * account, mints its ADMIN and INFERENCE keys, gives it credit to spend, and prints the keys once.
 * Everything lives in the throwaway signing key and the stores of this process.
 *
 * @since 0.1.0
 */
import { CreditLedger, Money } from "@tollgate/core"
import { Effect, identity, Layer, Logger } from "effect"
import type { ServerConfig } from "./Config.ts"
import * as DevCredentials from "./DevCredentials.ts"

/** Credit the demo account starts with. @category constants */
export const demoCredit = Money.usd(25)

/**
 * The keys as a person reads them on a terminal: the account, both keys and a call to paste. The
 * JSON line stays the record for logs and scripts; this block is printed only when stdout is a
 * terminal.
 */
const terminalBlock = (credentials: DevCredentials.DevCredentials, publicOrigin: string): string =>
  [
    "",
    `  tollgate dev mode: account ${credentials.accountId} with ${Money.formatUsd(demoCredit)} USD of credit`,
    "  (the keys die with this process; TOLLGATE_DEV_CREDENTIALS_FILE=<file> also writes them to a file)",
    "",
    `  ADMIN key      ${credentials.adminKey}`,
    `  INFERENCE key  ${credentials.inferenceKey}`,
    "",
    "  Try it:",
    `  curl -s ${publicOrigin}/api/v1/chat/completions -H "Authorization: Bearer ${credentials.inferenceKey}" \\`,
    `    -H 'content-type: application/json' -d '{"model":"llama-3.3-70b","messages":[{"role":"user","content":"hello"}]}'`,
    "",
    ""
  ].join("\n")

/** @category options */
export interface Options {
  /** Log the credentials once (the server does; tests need not). */
  readonly announce: boolean
  /** Receives the credentials once created (`Tollgate.make` returns them to the host). */
  readonly onCredentials?: ((credentials: DevCredentials.DevCredentials) => void) | undefined
}

/**
 * Creates the demo credentials and credit when the layer is built; logs them (one line, the keys
 * as annotations, written before the layer is built) when `announce` is set (the server does, embedded apps and tests need not),
 * followed on a terminal by `terminalBlock`.
 *
 * @category layers
 */
export const layer = (
  config: Pick<ServerConfig, "devCredentialsFile" | "publicOrigin">,
  options: Options,
  notice: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = identity
) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const credentials = yield* DevCredentials.create({ file: config.devCredentialsFile })
    const ledger = yield* CreditLedger.CreditLedger
    yield* ledger.grant({ accountId: credentials.accountId, amount: demoCredit, reference: "dev-mode-demo-credit" })
    options.onCredentials?.(credentials)
    if (options.announce) {
      // Written at once, not in the next batch of log lines: a host embedding tollgate prints its
      // own listening line as soon as `Tollgate.make` resolves, and a script waiting for that line
      // finds the keys before it.
      yield* Effect.logInfo(DevCredentials.banner).pipe(
        Effect.annotateLogs({
          accountId: credentials.accountId,
          adminKey: credentials.adminKey,
          inferenceKey: credentials.inferenceKey
        }),
        notice,
        Effect.provide(Logger.layer([Logger.consoleJson]))
      )
      if (process.stdout.isTTY) process.stdout.write(terminalBlock(credentials, config.publicOrigin))
    }
  }))
