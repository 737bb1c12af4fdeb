/**
 * Dev mode's credentials: with no signing key configured the server signs with a throwaway key,
 * creates a demo account and mints one ADMIN and one INFERENCE key for it, shown once in a
 * banner. With `TOLLGATE_DEV_CREDENTIALS_FILE` set they are also written there as JSON, for
 * scripts and CI that start a server and then call it.
 *
 * @since 0.1.0
 */
import { Auth } from "@tollgate/core"
import { Data, Effect } from "effect"
import * as Fs from "node:fs/promises"

/** @category models */
export interface DevCredentials {
  readonly accountId: string
  readonly adminKey: string
  readonly inferenceKey: string
}

/** @category errors */
export class DevCredentialsError extends Data.TaggedError("DevCredentialsError")<{ readonly message: string }> {}

/** The demo account's id. @category constants */
export const demoAccountId = "acct_demo"

/**
 * Creates the demo account (or reuses it), mints its two keys and, when `file` is given, writes
 * `{"accountId","adminKey","inferenceKey"}` there (mode 0600: the file holds secrets).
 *
 * @category constructors
 */
export const create = Effect.fn("DevCredentials.create")(function*(options: { readonly file?: string | undefined } = {}) {
  const auth = yield* Auth.Auth
  const fail = (error: { readonly message: string }) => new DevCredentialsError({ message: error.message })
  const account = yield* auth.createAccount({ id: demoAccountId, description: "dev mode demo account" }).pipe(Effect.mapError(fail))
  const admin = yield* auth.createKey({ accountId: account.id, type: "ADMIN", description: "dev mode admin key" }).pipe(
    Effect.mapError(fail)
  )
  const inference = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "dev mode inference key" }).pipe(
    Effect.mapError(fail)
  )
  const credentials: DevCredentials = { accountId: account.id, adminKey: admin.key, inferenceKey: inference.key }
  const file = options.file
  if (file !== undefined) {
    yield* Effect.tryPromise({
      try: () => Fs.writeFile(file, `${JSON.stringify(credentials)}\n`, { mode: 0o600 }),
      catch: (cause) => new DevCredentialsError({ message: `cannot write ${file}: ${String(cause)}` })
    })
  }
  return credentials
})

/**
 * The message of the log line that shows the credentials once at start (the keys are its
 * annotations).
 *
 * @category constants
 */
export const banner = "dev mode: no TOLLGATE_SIGNING_KEY, keys are signed with a throwaway key and die with this process"
