/**
 * The operator CLI: create accounts, mint and revoke API keys with the configured signing key,
 * grant credits and refund charged calls, against the same store the servers use (so a key revoked here is refused by
 * every server at once). Each command prints one JSON line; a minted key is printed once and
 * stored nowhere.
 *
 * ```sh
 * tollgate-cli signing-key --out tollgate-signing-key.pem
 * tollgate-cli accounts create --description "Acme"
 * tollgate-cli keys mint --account acct_... --type ADMIN
 * tollgate-cli keys mint --account acct_... --type INFERENCE --cap-usd 5 --limit-period MONTH
 * tollgate-cli keys cap --account acct_... --id key_... --usd 0.05 --limit-period EPOCH
 * tollgate-cli keys cap --account acct_... --id key_... --usd none
 * tollgate-cli keys revoke --account acct_... --id key_...
 * tollgate-cli credits grant --account acct_... --usd 25.00 --reference invoice-42
 * tollgate-cli credits refund --account acct_... --request-id 5b0e... --reason "upstream outage"
 * ```
 *
 * @since 0.1.0
 */
import { Auth, AuthStore, CreditLedger, type Errors, Jwt, KeyCaps, Money, Refunds } from "@tollgate/core"
import { AuthStoreRedis, CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import { Console, Effect, Layer, Option, Result } from "effect"
import * as Fs from "node:fs/promises"
import { CliError, Command, Flag } from "effect/cli"
import type { ServerConfig } from "./Config.ts"
import * as RedisReachable from "./RedisReachable.ts"

const print = (value: unknown) => Console.log(JSON.stringify(value))

const userError = (error: Errors.ApiError | CreditLedger.LedgerError) =>
  new CliError.UserError({ cause: error, userMessage: error.message })

const account = Flag.String("account").pipe(Flag.withDescription("The account id"))

const createAccount = Command.make("create", {
  id: Flag.String("id").pipe(Flag.withDescription("An id of your choosing (default: generated)"), Flag.optional),
  description: Flag.String("description").pipe(Flag.withDescription("What the account is, shown in listings"), Flag.optional)
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const created = yield* auth.createAccount({
      ...Option.match(input.id, { onNone: () => ({}), onSome: (id) => ({ id }) }),
      ...Option.match(input.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
    }).pipe(Effect.mapError(userError))
    yield* print({ accountId: created.id, createdAt: created.createdAt.toISOString() })
  })).pipe(Command.withDescription("Create an account (or show the existing one with that id)"))

const limitPeriod = Flag.Literals("limit-period", KeyCaps.LIMIT_PERIODS).pipe(
  Flag.withDescription("What the cap is per: EPOCH (a UTC day, the default), MONTH (UTC) or LIFETIME"),
  Flag.optional
)

/** A cap of `usd` per `period`, or a usage error naming the flag. */
const capOf = (flag: string, usd: string, period: Option.Option<KeyCaps.LimitPeriod>) => {
  const amount = Money.parseUsd(usd)
  if (Result.isFailure(amount)) {
    return Effect.fail(new CliError.UserError({ cause: amount.failure, userMessage: `--${flag}: ${usd} is not a USD amount` }))
  }
  return Effect.succeed<KeyCaps.SpendCap>({ usd: amount.success, period: Option.getOrElse(period, () => "EPOCH" as const) })
}

const capJson = (cap: KeyCaps.SpendCap | undefined) =>
  cap === undefined ? { capUsd: null } : { capUsd: Money.formatUsd(cap.usd), limitPeriod: cap.period }

const mintKey = Command.make("mint", {
  account,
  type: Flag.Literals("type", ["INFERENCE", "ADMIN"]).pipe(Flag.withDescription("INFERENCE calls the API; ADMIN also manages keys and billing")),
  tier: Flag.Literals("tier", ["default", "partner"]).pipe(
    Flag.withDescription("The rate-limit tier (default: default)"),
    Flag.withDefault("default" as const)
  ),
  description: Flag.String("description").pipe(Flag.withDescription("What the key is for, shown in listings"), Flag.withDefault("")),
  expiresAt: Flag.Date("expires-at").pipe(Flag.withDescription("When the key stops working (ISO 8601; default: never)"), Flag.optional),
  capUsd: Flag.String("cap-usd").pipe(Flag.withDescription("The most the key may spend per --limit-period, in USD (default: no cap)"), Flag.optional),
  limitPeriod
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const caps = yield* KeyCaps.KeyCaps
    const cap = Option.isSome(input.capUsd) ? yield* capOf("cap-usd", input.capUsd.value, input.limitPeriod) : undefined
    const { key, record } = yield* auth.createKey({
      accountId: input.account,
      type: input.type,
      tier: input.tier,
      description: input.description,
      ...Option.match(input.expiresAt, { onNone: () => ({}), onSome: (expiresAt) => ({ expiresAt }) })
    }).pipe(Effect.mapError(userError))
    // The key is printed only once its cap is stored, so no call of it is ever uncapped.
    if (cap !== undefined) yield* caps.set(record.accountId, record.id, cap)
    yield* print({ accountId: record.accountId, keyId: record.id, type: record.type, tier: record.tier, ...capJson(cap), apiKey: key })
  })).pipe(Command.withDescription("Mint an API key; the key is printed once"))

const capKey = Command.make("cap", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("The key id (jti)")),
  usd: Flag.String("usd").pipe(Flag.withDescription("The most the key may spend per --limit-period, in USD; none removes the cap")),
  limitPeriod
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const caps = yield* KeyCaps.KeyCaps
    yield* auth.getKey(input.account, input.id).pipe(Effect.mapError(userError))
    const cap = input.usd === "none" ? undefined : yield* capOf("usd", input.usd, input.limitPeriod)
    yield* caps.set(input.account, input.id, cap).pipe(Effect.mapError(userError))
    yield* print({ accountId: input.account, keyId: input.id, ...capJson(cap) })
  })).pipe(Command.withDescription("Set or remove an API key's spend cap; the spend of the current period is kept"))

const revokeKey = Command.make("revoke", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("The key id (jti)"))
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    yield* auth.revokeKey(input.account, input.id).pipe(Effect.mapError(userError))
    yield* print({ accountId: input.account, keyId: input.id, revoked: true })
  })).pipe(Command.withDescription("Revoke an API key, at once on every server sharing the store"))

const grantCredits = Command.make("grant", {
  account,
  usd: Flag.String("usd").pipe(Flag.withDescription("Amount in USD, e.g. 25.00")),
  reference: Flag.String("reference").pipe(Flag.withDescription("Applied once per reference"))
}, (input) =>
  Effect.gen(function*() {
    const amount = Money.parseUsd(input.usd)
    if (Result.isFailure(amount)) {
      return yield* new CliError.UserError({ cause: amount.failure, userMessage: `--usd: ${input.usd} is not a USD amount` })
    }
    const ledger = yield* CreditLedger.CreditLedger
    const receipt = yield* ledger.grant({ accountId: input.account, amount: amount.success, reference: `grant:${input.reference}` }).pipe(
      Effect.mapError(userError)
    )
    yield* print({
      accountId: input.account,
      amountUsd: Money.formatUsd(amount.success),
      reference: input.reference,
      balanceUsd: Money.formatUsd(receipt.balance.usd)
    })
  })).pipe(Command.withDescription("Grant credits to an account"))

const refundCall = Command.make("refund", {
  account,
  requestId: Flag.String("request-id").pipe(Flag.withDescription("The x-request-id of the charged call")),
  usd: Flag.String("usd").pipe(Flag.withDescription("Amount in USD (default: the call's whole USD charge)"), Flag.optional),
  reason: Flag.String("reason").pipe(Flag.withDescription("Why the call is refunded, for the record"))
}, (input) =>
  Effect.gen(function*() {
    const amount = Option.isNone(input.usd) ? undefined : Money.parseUsd(input.usd.value)
    if (amount !== undefined && (Result.isFailure(amount) || amount.success <= 0)) {
      return yield* new CliError.UserError({ cause: amount, userMessage: `--usd: ${Option.getOrThrow(input.usd)} is not a positive USD amount` })
    }
    const ledger = yield* CreditLedger.CreditLedger
    const refund = yield* Refunds.refundCall(ledger, {
      accountId: input.account,
      requestId: input.requestId,
      amount: amount === undefined ? undefined : Result.getOrThrow(amount)
    }).pipe(Effect.mapError(userError))
    yield* print({
      accountId: refund.accountId,
      requestId: refund.requestId,
      amountUsd: Money.formatUsd(refund.amount),
      chargedUsd: Money.formatUsd(refund.charged),
      reason: input.reason,
      entryId: refund.receipt.entry.id,
      balanceUsd: Money.formatUsd(refund.receipt.balance.usd)
    })
  })).pipe(Command.withDescription("Refund a charged call's USD charge (or --usd of it) to its account, once per call"))

const signingKey = Command.make("signing-key", {
  out: Flag.String("out").pipe(
    Flag.withDescription("Write the key to this file (mode 0600) instead of printing it"),
    Flag.optional
  )
}, (input) =>
  Effect.gen(function*() {
    const pem = yield* Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey))
    if (Option.isNone(input.out)) return yield* Console.log(pem)
    const file = input.out.value
    yield* Effect.tryPromise({
      try: () => Fs.writeFile(file, `${pem.trimEnd()}\n`, { mode: 0o600, flag: "wx" }),
      catch: (cause) => new CliError.UserError({ cause, userMessage: `--out: cannot write ${file} (${cause instanceof Error ? cause.message : String(cause)})` })
    })
    yield* print({ written: file })
  })).pipe(Command.withDescription("Make a new Ed25519 signing key for TOLLGATE_SIGNING_KEY (PKCS#8 PEM); needs no configuration"))

/** What the account, key and credit commands need: Auth with the signing key, the keys' caps, and the ledger. */
export type Services = Auth.Auth | KeyCaps.KeyCaps | CreditLedger.CreditLedger

/**
 * The command tree. The account, key and credit commands get their services from `services`,
 * built only when one of them runs, so `signing-key` and `--help` work with no configuration.
 *
 * @category commands
 */
export const make = <E>(services: Layer.Layer<Services, E>) => {
  return Command.make("tollgate-cli").pipe(
    Command.withDescription("Operate a tollgate deployment: signing keys, accounts, API keys, credits"),
    Command.withSubcommands([
      signingKey,
      Command.make("accounts").pipe(
        Command.withDescription("Accounts own API keys and credit"),
        Command.withSubcommands([Command.provide(createAccount, services)])
      ),
      Command.make("keys").pipe(
        Command.withDescription("API keys, signed with TOLLGATE_SIGNING_KEY"),
        Command.withSubcommands([Command.provide(mintKey, services), Command.provide(capKey, services), Command.provide(revokeKey, services)])
      ),
      Command.make("credits").pipe(
        Command.withDescription("Prepaid credit of an account"),
        Command.withSubcommands([Command.provide(grantCredits, services), Command.provide(refundCall, services)])
      )
    ])
  )
}

/**
 * Runs the CLI over `argv` (without the node and script paths). Errors are returned, not printed:
 * the bin prints each one once, on one line.
 *
 * @category running
 */
export const run = <E>(argv: ReadonlyArray<string>, services: Layer.Layer<Services, E>, version = "0.1.0") =>
  Command.runWith(make(services), { version, renderErrors: false })(argv)

/**
 * Refuses to run a store command on a store the operator did not choose. The server's default is
 * memory, which here would be a store that dies with the command: the account it printed would
 * already be gone. `TOLLGATE_STORE=memory` asks for it on purpose (to try the commands out).
 *
 * @category layers
 */
export const requireChosenStore = (env: Readonly<Record<string, string | undefined>>) =>
  env["TOLLGATE_STORE"] !== undefined ? Effect.void : Effect.fail(
    new CliError.UserError({
      cause: "no store",
      userMessage: "TOLLGATE_STORE is not set: set TOLLGATE_STORE=redis and TOLLGATE_REDIS_URL (the servers' store), or TOLLGATE_STORE=memory to try the commands on a store that is gone when the command exits"
    })
  )

/**
 * The services the CLI needs, from the server configuration: Auth with the configured signing key
 * and the ledger, over Redis (or memory, which is only useful for trying the commands out: it is
 * gone when the process exits). Fails without a signing key, since keys minted with a throwaway
 * key would verify nowhere.
 *
 * @category layers
 */
export const layer = (
  config:
    & Pick<ServerConfig, "store" | "redisUrl" | "publicOrigin" | "signingKey">
    & {
      readonly retention?: ServerConfig["retention"]
      readonly redisCluster?: ServerConfig["redisCluster"]
      readonly redisReplicaAcknowledgment?: ServerConfig["redisReplicaAcknowledgment"]
    }
) =>
  Layer.unwrap(Effect.gen(function*() {
    if (config.signingKey === undefined) {
      return yield* new CliError.UserError({
        cause: "no signing key",
        userMessage: "TOLLGATE_SIGNING_KEY must be set: accounts, keys and credits are managed with the servers' signing key (tollgate-cli signing-key makes one)"
      })
    }
    const signingKey = yield* Jwt.importSigningKey(config.signingKey).pipe(
      Effect.mapError((error) => new CliError.UserError({ cause: error, userMessage: error.message }))
    )
    const auth = Auth.layer({ signingKey, publicOrigin: config.publicOrigin })
    if (config.store === "memory") {
      return Layer.mergeAll(auth.pipe(Layer.provideMerge(AuthStore.layerMemory)), CreditLedger.layerMemory)
    }
    yield* RedisReachable.check(config)
    const redis = RedisConnection.layer(config.redisCluster === undefined ? { url: config.redisUrl } : { cluster: config.redisCluster })
    // The ledger's scripts trim entries past the retention: the server's, not a default.
    const ledger = CreditLedgerRedis.layerRedis({
      retentionMs: config.retention?.retentionMs,
      replicaAcknowledgment: config.redisReplicaAcknowledgment
    })
    return Layer.mergeAll(auth.pipe(Layer.provideMerge(AuthStoreRedis.layerRedis)), ledger).pipe(
      Layer.provide(redis)
    )
  }))
