/**
 * The operator CLI: create accounts, mint and revoke API keys with the configured signing key,
 * grant credits and refund charged calls, against the same store the servers use, so a key revoked
 * here is refused by every server at once. Each command prints one JSON line; a minted key is
 * printed once and stored nowhere.
 *
 * ```sh
 * tollgate-cli signing-key --out tollgate-signing-key.pem
 * tollgate-cli signing-key --id-of tollgate-signing-key.pem
 * tollgate-cli accounts create --description "Acme"
 * tollgate-cli keys mint --account acct_... --type ADMIN
 * tollgate-cli keys mint --account acct_... --type INFERENCE --cap-usd 5 --limit-period MONTH
 * tollgate-cli keys cap --account acct_... --id key_... --usd 0.05 --limit-period EPOCH
 * tollgate-cli keys cap --account acct_... --id key_... --usd none
 * tollgate-cli keys revoke --account acct_... --id key_...
 * tollgate-cli keys restrict --account acct_... --id key_... --restrictions '{"networks":["ethereum-mainnet"]}'
 * tollgate-cli keys reroll --account acct_... --id key_... --grace-seconds 3600
 * tollgate-cli keys signed-by --kid <kid of a signing key>
 * tollgate-cli credits grant --account acct_... --usd 25.00 --reference invoice-42
 * tollgate-cli credits refund --account acct_... --request-id 5b0e... --reason "upstream outage"
 * tollgate-cli audit list --account acct_... --limit 20
 * tollgate-cli limits set --account acct_... --limits '{"text:M":{"requests":5}}'
 * ```
 *
 * @since 0.1.0
 */
import {
  AuditLog,
  Auth,
  AuthStore,
  CreditLedger,
  type Errors,
  Jwt,
  KeyCaps,
  KeyRestrictions,
  Money,
  RateLimitPolicy,
  Refunds
} from "@tollgate/core"
import { AuthStoreRedis, CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import { Console, Effect, Layer, Option, Result, Schema } from "effect"
import { CliError, Command, Flag } from "effect/cli"
import * as Fs from "node:fs/promises"
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

const decodeRestrictions = Schema.decodeUnknownResult(Schema.fromJsonString(KeyRestrictions.Restrictions))

/** The restrictions of a flag's JSON, or a usage error naming the flag and what is wrong. */
const restrictionsOf = (flag: string, json: string) => {
  const decoded = decodeRestrictions(json)
  return Result.isSuccess(decoded)
    ? Effect.succeed(decoded.success)
    : Effect.fail(
      new CliError.UserError({ cause: decoded.failure, userMessage: `--${flag}: ${decoded.failure.message.replace(/\s+/g, " ")}` })
    )
}

const restrictionsFlag = Flag.String("restrictions").pipe(
  Flag.withDescription(
    "What the key may call, as JSON: models, networks, methods, operations, ips (lists); e.g. '{\"networks\":[\"ethereum-mainnet\"]}'"
  )
)

const capJson = (cap: KeyCaps.SpendCap | undefined) =>
  cap === undefined ? { capUsd: null } : { capUsd: Money.formatUsd(cap.usd), limitPeriod: cap.period }

const mintKey = Command.make("mint", {
  account,
  type: Flag.Literals("type", ["INFERENCE", "ADMIN"]).pipe(
    Flag.withDescription("INFERENCE calls the API; ADMIN also manages keys and billing")
  ),
  tier: Flag.Literals("tier", ["default", "partner"]).pipe(
    Flag.withDescription("The rate-limit tier (default: default)"),
    Flag.withDefault("default" as const)
  ),
  description: Flag.String("description").pipe(Flag.withDescription("What the key is for, shown in listings"), Flag.withDefault("")),
  expiresAt: Flag.Date("expires-at").pipe(Flag.withDescription("When the key stops working (ISO 8601; default: never)"), Flag.optional),
  capUsd: Flag.String("cap-usd").pipe(
    Flag.withDescription("The most the key may spend per --limit-period, in USD (default: no cap)"),
    Flag.optional
  ),
  limitPeriod,
  restrictions: Flag.optional(restrictionsFlag)
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const caps = yield* KeyCaps.KeyCaps
    const cap = Option.isSome(input.capUsd) ? yield* capOf("cap-usd", input.capUsd.value, input.limitPeriod) : undefined
    const restrictions = Option.isSome(input.restrictions) ? yield* restrictionsOf("restrictions", input.restrictions.value) : undefined
    const { key, record } = yield* auth.createKey({
      accountId: input.account,
      type: input.type,
      tier: input.tier,
      description: input.description,
      ...Option.match(input.expiresAt, { onNone: () => ({}), onSome: (expiresAt) => ({ expiresAt }) }),
      ...(restrictions === undefined ? {} : { restrictions })
    }).pipe(Effect.mapError(userError))
    // The key is printed only once its cap is stored, so no call of it is ever uncapped.
    if (cap !== undefined) yield* caps.set(record.accountId, record.id, cap)
    yield* AuditLog.record({
      actor: "cli",
      action: "key.minted",
      accountId: record.accountId,
      details: { keyId: record.id, type: record.type, tier: record.tier, cap: capJson(cap), restrictions: record.restrictions ?? null }
    }).pipe(Effect.mapError(userError))
    yield* print({
      accountId: record.accountId,
      keyId: record.id,
      type: record.type,
      tier: record.tier,
      ...capJson(cap),
      restrictions: record.restrictions ?? null,
      apiKey: key
    })
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
    yield* AuditLog.record({
      actor: "cli",
      action: "key.capped",
      accountId: input.account,
      details: { keyId: input.id, cap: capJson(cap) }
    }).pipe(
      Effect.mapError(userError)
    )
    yield* print({ accountId: input.account, keyId: input.id, ...capJson(cap) })
  })).pipe(Command.withDescription("Set or remove an API key's spend cap; the spend of the current period is kept"))

const revokeKey = Command.make("revoke", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("The key id (jti)"))
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    yield* auth.revokeKey(input.account, input.id).pipe(Effect.mapError(userError))
    yield* AuditLog.record({ actor: "cli", action: "key.revoked", accountId: input.account, details: { keyId: input.id } }).pipe(
      Effect.mapError(userError)
    )
    yield* print({ accountId: input.account, keyId: input.id, revoked: true })
  })).pipe(Command.withDescription("Revoke an API key, at once on every server sharing the store"))

const restrictKey = Command.make("restrict", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("The key id (jti)")),
  restrictions: restrictionsFlag.pipe(Flag.withDescription("What the key may call, as JSON (replaced whole); none lifts every restriction"))
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const restrictions = input.restrictions === "none" ? undefined : yield* restrictionsOf("restrictions", input.restrictions)
    const record = yield* auth.restrictKey(input.account, input.id, restrictions).pipe(Effect.mapError(userError))
    yield* AuditLog.record({
      actor: "cli",
      action: "key.restricted",
      accountId: input.account,
      details: { keyId: input.id, restrictions: record.restrictions ?? null }
    }).pipe(Effect.mapError(userError))
    yield* print({ accountId: input.account, keyId: input.id, restrictions: record.restrictions ?? null })
  })).pipe(Command.withDescription("Set or lift what an API key may call, from its next request on every server"))

const rerollKey = Command.make("reroll", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("The key id (jti)")),
  graceSeconds: Flag.Int("grace-seconds").pipe(
    Flag.withDescription("How long the key's earlier secrets stay valid (default 0: refused at once)"),
    Flag.withDefault(0)
  )
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const { key, record } = yield* auth.rerollKey(input.account, input.id, input.graceSeconds * 1000).pipe(Effect.mapError(userError))
    yield* AuditLog.record({
      actor: "cli",
      action: "key.rerolled",
      accountId: input.account,
      details: { keyId: input.id, graceSeconds: input.graceSeconds, kid: record.kid }
    }).pipe(Effect.mapError(userError))
    yield* print({ accountId: record.accountId, keyId: record.id, type: record.type, graceSeconds: input.graceSeconds, apiKey: key })
  })).pipe(
    Command.withDescription(
      "Issue a new secret for an API key (same id, cap and restrictions), signed with the current signing key; printed once"
    )
  )

const recordJson = (record: Auth.ApiKeyRecord) => ({
  accountId: record.accountId,
  keyId: record.id,
  type: record.type,
  description: record.description,
  kid: record.kid ?? null,
  revoked: record.revokedAt !== undefined
})

const signedBy = Command.make("signed-by", {
  kid: Flag.String("kid").pipe(
    Flag.withDescription(
      "The signing key's id (printed by signing-key --out and logged at start); none: keys minted before keys named their signing key"
    )
  )
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const records = yield* auth.keysSignedBy(input.kid === "none" ? undefined : input.kid).pipe(Effect.mapError(userError))
    yield* print({ kid: input.kid, keys: records.map(recordJson) })
  })).pipe(Command.withDescription("List every account's keys signed by a signing key: what to re-issue after it leaked"))

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
    yield* AuditLog.record({
      actor: "cli",
      action: "credits.granted",
      accountId: input.account,
      details: { amountUsd: Money.formatUsd(amount.success), reference: input.reference }
    }).pipe(Effect.mapError(userError))
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
      return yield* new CliError.UserError({
        cause: amount,
        userMessage: `--usd: ${Option.getOrThrow(input.usd)} is not a positive USD amount`
      })
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
  ),
  idOf: Flag.String("id-of").pipe(
    Flag.withDescription("Print the kid of the signing key (or public key) in this PEM file instead of making one"),
    Flag.optional
  )
}, (input) =>
  Effect.gen(function*() {
    if (Option.isSome(input.idOf)) {
      const file = input.idOf.value
      const text = yield* Effect.tryPromise({
        try: () => Fs.readFile(file, "utf8"),
        catch: (cause) =>
          new CliError.UserError({
            cause,
            userMessage: `--id-of: cannot read ${file} (${cause instanceof Error ? cause.message : String(cause)})`
          })
      })
      const keys = yield* Jwt.importVerifyingKeys(text).pipe(
        Effect.mapError((error) => new CliError.UserError({ cause: error, userMessage: `--id-of: ${file}: ${error.message}` }))
      )
      return yield* print({ kid: keys.map((key) => key.kid).join(",") })
    }
    const key = yield* Jwt.generateSigningKey
    const pem = yield* Jwt.exportSigningKey(key)
    if (Option.isNone(input.out)) return yield* Console.log(pem)
    const file = input.out.value
    yield* Effect.tryPromise({
      try: () => Fs.writeFile(file, `${pem.trimEnd()}\n`, { mode: 0o600, flag: "wx" }),
      catch: (cause) =>
        new CliError.UserError({
          cause,
          userMessage: `--out: cannot write ${file} (${cause instanceof Error ? cause.message : String(cause)})`
        })
    })
    yield* print({ written: file, kid: key.kid })
  })).pipe(Command.withDescription("Make a new Ed25519 signing key for TOLLGATE_SIGNING_KEY (PKCS#8 PEM); needs no configuration"))

const decodeOverride = Schema.decodeUnknownResult(Schema.fromJsonString(RateLimitPolicy.OverrideSchema))

const setLimits = Command.make("set", {
  account,
  id: Flag.String("id").pipe(Flag.withDescription("One key of the account (default: the account's own override)"), Flag.optional),
  limits: Flag.String("limits").pipe(
    Flag.withDescription(
      "Rates per category as JSON, as the config file's rateLimits.accounts, e.g. '{\"text:M\":{\"requests\":5}}'; none removes the override"
    )
  )
}, (input) =>
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const decoded = input.limits === "none" ? undefined : decodeOverride(input.limits)
    if (decoded !== undefined && Result.isFailure(decoded)) {
      return yield* new CliError.UserError({
        cause: decoded.failure,
        userMessage: `--limits: ${decoded.failure.message.replace(/\s+/g, " ")}`
      })
    }
    const override = decoded === undefined ? undefined : decoded.success
    const keyId = Option.getOrUndefined(input.id)
    yield* auth.setLimits(input.account, keyId, override).pipe(Effect.mapError(userError))
    yield* AuditLog.record({
      actor: "cli",
      action: "limits.changed",
      accountId: input.account,
      details: { keyId: keyId ?? null, limits: override ?? null }
    }).pipe(
      Effect.mapError(userError)
    )
    yield* print({ accountId: input.account, keyId: keyId ?? null, limits: override ?? null })
  })).pipe(
    Command.withDescription(
      "Set or remove an account's or a key's rate-limit override, enforced by every server from the next call on; a wallet's account is wallet:evm:<address, lower-cased> or wallet:solana:<address>"
    )
  )

const auditList = Command.make("list", {
  account: Flag.String("account").pipe(Flag.withDescription("One account's entries (default: every entry)"), Flag.optional),
  before: Flag.String("before").pipe(Flag.withDescription("The next of the previous page"), Flag.optional),
  limit: Flag.Int("limit").pipe(Flag.withDescription(`Entries per page, 1 to ${AuditLog.MAX_PAGE} (default 50)`), Flag.withDefault(50))
}, (input) =>
  Effect.gen(function*() {
    if (input.limit < 1 || input.limit > AuditLog.MAX_PAGE) {
      return yield* new CliError.UserError({ cause: input.limit, userMessage: `--limit: must be between 1 and ${AuditLog.MAX_PAGE}` })
    }
    const log = yield* AuditLog.AuditLog
    const page = yield* log.list({
      accountId: Option.getOrUndefined(input.account),
      before: Option.getOrUndefined(input.before),
      limit: input.limit
    }).pipe(Effect.mapError(userError))
    yield* print({
      entries: page.entries.map((entry) => ({ ...entry, at: entry.at.toISOString(), accountId: entry.accountId ?? null })),
      next: page.next ?? null
    })
  })).pipe(Command.withDescription("Page through the audit log of key management, newest first: who did what, when"))

/** What the account, key, credit and audit commands need: Auth with the signing key, the keys' caps, the ledger and the audit log. */
export type Services = Auth.Auth | KeyCaps.KeyCaps | CreditLedger.CreditLedger | AuditLog.AuditLog

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
        Command.withSubcommands([
          Command.provide(mintKey, services),
          Command.provide(capKey, services),
          Command.provide(revokeKey, services),
          Command.provide(restrictKey, services),
          Command.provide(rerollKey, services),
          Command.provide(signedBy, services)
        ])
      ),
      Command.make("credits").pipe(
        Command.withDescription("Prepaid credit of an account"),
        Command.withSubcommands([Command.provide(grantCredits, services), Command.provide(refundCall, services)])
      ),
      Command.make("limits").pipe(
        Command.withDescription("Rate-limit overrides kept in the store"),
        Command.withSubcommands([Command.provide(setLimits, services)])
      ),
      Command.make("audit").pipe(
        Command.withDescription("The audit log of key management, of every account"),
        Command.withSubcommands([Command.provide(auditList, services)])
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
      userMessage:
        "TOLLGATE_STORE is not set: set TOLLGATE_STORE=redis and TOLLGATE_REDIS_URL (the servers' store), or TOLLGATE_STORE=memory to try the commands on a store that is gone when the command exits"
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
        userMessage:
          "TOLLGATE_SIGNING_KEY must be set: accounts, keys and credits are managed with the servers' signing key (tollgate-cli signing-key makes one)"
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
