/**
 * The Redis layer of `CreditLedger`: the ledger shared by every instance. Each operation is one Lua
 * script over one account's keys, so no other command runs between its reads and its writes, and a
 * usage page costs the same however long the history. Times come from the caller's `Clock`, so
 * both layers run under TestClock.
 *
 * **Details**
 *
 * The account's keys share the hash tag `{accountId}`, so a Redis Cluster keeps an account on one
 * slot: a hash of balances and daily allowance counters, a hash of holds with a sorted set of when
 * each needs attention (an open hold's expiry, a closed hold's forgetting: see
 * `CreditLedger.CLOSED_HOLD_RETENTION_MS`), a hash of applied references, and two streams, the
 * journal and the usage entries (the capture entries of the journal with their request details).
 * Stream ids are the journal ids (`<ms>-<seq>`), so a usage page is an `XRANGE` from its cursor.
 *
 * The balances hash also counts the account's open holds (`open`), so `holdStats` reads the open
 * holds and the held amounts of every account from the store, and keeps `sweepAt`, a time at or
 * before the earliest deadline, so a script looks at the deadlines only when one may have passed. A
 * script reads the balances hash once and writes it once. A closed hold's record carries the time
 * it is forgotten (`f`) and reads as unknown from then on; the records themselves are deleted in
 * batches, the holds closed within the same minute at once. `sweepExpired` and `holdStats` find the
 * accounts with `SCAN` over the key pattern (incremental, never blocking Redis; on a Redis Cluster
 * `RedisConnection` walks every master), and `sweepExpired` runs the ledger script's sweep on each
 * account whose earliest deadline has passed, which releases its expired holds.
 *
 * A hold's record is JSON, written with its fields in a fixed order (joined as strings, and an open
 * one read with one match); any other order is decoded with cjson, which keeps the records of
 * earlier releases readable (docs/operations.md, "Upgrading and rolling deploys").
 *
 * Amounts are integer strings in Redis (Lua numbers are doubles, exact below 2^53 like `Money`).
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, Spans } from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"
import * as RedisConnection from "./RedisConnection.ts"
import * as Scripts from "./Scripts.ts"

/**
 * The ledger's Lua functions over the account's keys: `ledgerHold` (or `holdCheck` then
 * `holdPlace`), `ledgerCapture`, `ledgerRelease`, `sweep` and `balance`, keeping journal and usage
 * entries for `retentionMs`. It only defines (a Function library runs it once): a call starts with
 * `ledgerBegin(keys, now)` (the keys of `accountKeys` first, in that order; `now` the integer
 * string of the caller's time), runs `sweep` before
 * anything else and calls `saveAccount()` before it returns.
 *
 * @category internals
 */
export const ledgerLibrary = (retentionMs: number): string => `${Lua.header(retentionMs)}${ledgerSource}`

const ledgerSource = Lua.read("ledger")

const ledgerOperations = Lua.read("ledger-script")

/** The ledger's script: its library, then its own operations (`src/lua/ledger-script.lua`). */
const ledgerScript = (retentionMs: number) =>
  Scripts.make("ledger", `${ledgerLibrary(retentionMs)}${ledgerOperations}`, "ledgerOperation(keys, args)")

type Reply = readonly [status: string, detail: ReadonlyArray<string> | string, balance?: ReadonlyArray<string>]

const unavailable = () => Errors.storeUnavailable("The credit ledger")

/** @category constants */
export const defaultPrefix = "tg:cl:"

/**
 * An account's keys, in the order `ledgerLibrary` names them: balances, holds, hold deadlines,
 * applied references, journal, usage. The account id is their hash tag.
 *
 * @category internals
 */
export const accountKeys = (prefix: string, accountId: string) => {
  const base = `${prefix}{${accountId}}:`
  return [`${base}a`, `${base}h`, `${base}x`, `${base}r`, `${base}j`, `${base}u`] as const
}

/**
 * The error of a script's `{ 'err', reason }` reply.
 *
 * @category internals
 */
export const ledgerError = (reason: CreditLedger.LedgerError["reason"]) =>
  new CreditLedger.LedgerError({ reason, message: messages[reason] })

const messages: Record<CreditLedger.LedgerError["reason"], string> = {
  InsufficientFunds: "Insufficient balance",
  UnknownHold: "No such hold",
  HoldClosed: "The hold was released",
  ExceedsHold: "The capture exceeds the hold",
  InvalidAmount: "Invalid amount",
  ReferenceConflict: "The reference was used for another operation",
  BalanceCeiling: CreditLedger.BALANCE_CEILING_MESSAGE
}

/**
 * A balance as the scripts answer it.
 *
 * @category internals
 */
export const toBalance = (b: ReadonlyArray<string | number>): CreditLedger.Balance => ({
  usd: Money.unsafeNano(Number(b[0])),
  heldUsd: Money.unsafeNano(Number(b[1])),
  availableUsd: Money.unsafeNano(Number(b[2])),
  stakedTokens: Number(b[3]),
  availableAllowance: Money.unsafeNano(Number(b[4]))
})

const toEntry = (e: ReadonlyArray<string>): CreditLedger.JournalEntry => ({
  id: e[0]!,
  timestamp: Number(e[1]),
  kind: e[2] as CreditLedger.EntryKind,
  reference: e[3]!,
  currency: e[4] as CreditLedger.Currency,
  delta: Money.unsafeNano(Number(e[5])),
  held: Money.unsafeNano(Number(e[6]))
})

const fields = (flat: ReadonlyArray<string>): Record<string, string> => {
  const record: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) record[flat[i]!] = flat[i + 1]!
  return record
}

type StreamEntry = readonly [id: string, fields: ReadonlyArray<string>]

const toUsage = ([id, flat]: StreamEntry): CreditLedger.UsageEntry => {
  const f = fields(flat)
  return {
    ...(JSON.parse(f["v"] ?? "{}") as CreditLedger.UsageDetails),
    id,
    timestamp: Number(f["t"]),
    amount: Money.unsafeNano(Number(f["a"])),
    currency: f["c"] as CreditLedger.Currency
  }
}

const checkAmount = (amount: number, allowZero: boolean) =>
  Number.isSafeInteger(amount) && (allowZero ? amount >= 0 : amount > 0)
    ? Effect.void
    : Effect.fail(new CreditLedger.LedgerError({ reason: "InvalidAmount", message: `${amount} is not a valid amount of nano-USD` }))

const msOf = (id: string) => Number(id.split("-")[0])

/**
 * The ledger on Redis. `prefix` namespaces the keys (default `tg:cl:`); `retentionMs` is how long
 * journal and usage entries are kept (default `CreditLedger.DEFAULT_RETENTION_MS`). With
 * `replicaAcknowledgment`, a credit (top-up, grant, refund) is answered only once that many replicas
 * have it, or once the wait times out, which is logged: the credit stands on the master either way,
 * and a failover before a replica has it would lose it (see docs/operations.md).
 *
 * @category layers
 */
export const layerRedis = (
  options: {
    readonly prefix?: string
    readonly retentionMs?: number | undefined
    readonly replicaAcknowledgment?: RedisConnection.ReplicaAcknowledgment | undefined
    /** How long Redis may take to answer a script call before it counts as a failure. Default 2000. */
    readonly timeoutMs?: number | undefined
  } = {}
): Layer.Layer<CreditLedger.CreditLedger, never, Redis.Redis | RedisConnection.RedisConnection> =>
  Layer.effect(
    CreditLedger.CreditLedger,
    Effect.gen(function*() {
      const redis = yield* Redis.Redis
      const connection = yield* RedisConnection.RedisConnection
      const acknowledgment = options.replicaAcknowledgment
      const prefix = options.prefix ?? defaultPrefix
      const keysOf = (accountId: string) => accountKeys(prefix, accountId)
      // The same runner as the admission's (`Scripts.sender`): a Function where Redis offers them.
      const script = ledgerScript(options.retentionMs ?? CreditLedger.DEFAULT_RETENTION_MS)
      const sendScript = yield* Scripts.sender(options.timeoutMs ?? 2000, [script])
      const run = (keys: ReadonlyArray<string>, op: string, now: number, ...args: ReadonlyArray<string | number>) =>
        Effect.callback<Reply, unknown>((resume) => {
          const command = ["", "", String(keys.length), ...keys, op, String(now)]
          for (const arg of args) command.push(String(arg))
          sendScript(script, command, (reply) => resume(Effect.succeed(reply as Reply)), (cause) => resume(Effect.fail(cause)))
        })
      const span = yield* Spans.current

      const call = (accountId: string, op: string, ...args: ReadonlyArray<string | number>) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const reply = yield* run(keysOf(accountId), op, now, ...args).pipe(Effect.mapError(unavailable))
          if (reply[0] === "err") {
            return yield* ledgerError(reply[1] as CreditLedger.LedgerError["reason"])
          }
          return { detail: reply[1] as ReadonlyArray<string>, balance: toBalance(reply[2] ?? []) }
        })

      const replicated = (accountId: string, reference: string) =>
        acknowledgment === undefined
          ? Effect.void
          : Effect.tryPromise(() => RedisConnection.waitForReplicas(connection, keysOf(accountId)[0], acknowledgment)).pipe(
            Effect.flatMap((acknowledged) =>
              acknowledged >= acknowledgment.replicas
                ? Effect.void
                : Effect.logWarning(
                  `a credit is on the Redis master but on ${acknowledged} of ${acknowledgment.replicas} replicas after ${acknowledgment.timeoutMs} ms`,
                  { accountId, reference }
                )
            ),
            Effect.catch((error) =>
              Effect.logWarning("a credit's replication could not be confirmed", { accountId, reference, error: String(error) })
            )
          )

      const credit = (op: "topup" | "grant" | "refund") =>
        Effect.fn(`CreditLedger.${op}`)(function*(input: CreditLedger.CreditInput) {
          yield* checkAmount(input.amount, false)
          const { balance, detail } = yield* call(input.accountId, op, input.reference, input.amount)
          yield* replicated(input.accountId, input.reference)
          return { entry: toEntry(detail), balance }
        })

      const send = <A>(command: string, ...args: ReadonlyArray<string>) =>
        redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))

      const scan = (
        accountId: string,
        query: Omit<CreditLedger.UsageQuery, "after"> & { readonly after?: string | undefined },
        want: number
      ) =>
        Effect.gen(function*() {
          const key = keysOf(accountId)[5]
          const after = query.after
          let start: string
          let end: string
          if (query.order === "asc") {
            start = after !== undefined && (query.from === undefined || msOf(after) >= query.from)
              ? `(${after}`
              : query.from === undefined
              ? "-"
              : String(query.from)
            end = query.to === undefined ? "+" : String(query.to)
          } else {
            end = after !== undefined && (query.to === undefined || msOf(after) <= query.to)
              ? `(${after}`
              : query.to === undefined
              ? "+"
              : String(query.to)
            start = query.from === undefined ? "-" : String(query.from)
          }
          const matches: Array<CreditLedger.UsageEntry> = []
          const batch = Math.min(Math.max(want, 16), 1000)
          while (matches.length < want) {
            const entries = query.order === "asc"
              ? yield* send<ReadonlyArray<StreamEntry>>("XRANGE", key, start, end, "COUNT", String(batch))
              : yield* send<ReadonlyArray<StreamEntry>>("XREVRANGE", key, end, start, "COUNT", String(batch))
            for (const entry of entries) {
              const usage = toUsage(entry)
              if (query.currency === undefined || usage.currency === query.currency) matches.push(usage)
              if (matches.length >= want) break
            }
            if (entries.length < batch) break
            const last = entries.at(-1)![0]
            if (query.order === "asc") start = `(${last}`
            else end = `(${last}`
          }
          return matches
        })

      /** Every key of the ledger whose name ends in `suffix` (`:a` balances, `:x` deadlines), by SCAN. */
      const keysEndingIn = (suffix: string) =>
        Effect.gen(function*() {
          const found: Array<string> = []
          let cursor = "0"
          do {
            const [next, keys] = yield* send<readonly [string, ReadonlyArray<string>]>(
              "SCAN",
              cursor,
              "MATCH",
              `${prefix}{*}${suffix}`,
              "COUNT",
              "1000"
            )
            for (const key of keys) found.push(key)
            cursor = next
          } while (cursor !== "0")
          return found
        })

      const accountOfKey = (key: string) => key.slice(key.indexOf("{") + 1, key.lastIndexOf("}"))

      const sweepExpired = Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        let swept = 0
        for (const key of yield* keysEndingIn(":x")) {
          // The script releases at most 100 due holds per run: run it until none is due (bounded).
          for (let round = 0; round < 1_000; round++) {
            const due = yield* send<ReadonlyArray<string>>("ZRANGEBYSCORE", key, "-inf", String(now), "LIMIT", "0", "1")
            if (due.length === 0) break
            yield* call(accountOfKey(key), "sweep").pipe(Effect.catchTag("LedgerError", Effect.die))
            if (round === 0) swept++
          }
        }
        return swept
      })

      const holdStats = Effect.gen(function*() {
        const day = String(Math.floor((yield* Clock.currentTimeMillis) / 86_400_000))
        let open = 0
        let held = 0
        for (const key of yield* keysEndingIn(":a")) {
          const [count, usd, allowance] = yield* send<ReadonlyArray<string | null>>("HMGET", key, "open", "held", `ah:${day}`)
          open += Math.max(0, Number(count ?? 0))
          held += Number(usd ?? 0) + Number(allowance ?? 0)
        }
        return { open, held: Money.unsafeNano(held) }
      })

      return CreditLedger.CreditLedger.of({
        sweepExpired,
        holdStats,
        topUp: credit("topup"),
        grant: credit("grant"),
        refund: credit("refund"),
        stake: Effect.fn("CreditLedger.stake")(function*(input) {
          if (!Number.isSafeInteger(input.tokens) || input.tokens < 0) {
            return yield* new CreditLedger.LedgerError({
              reason: "InvalidAmount",
              message: `${input.tokens} is not a whole number of tokens`
            })
          }
          const { balance, detail } = yield* call(input.accountId, "stake", input.reference, input.tokens)
          return { entry: toEntry(detail), balance }
        }),
        // Hold, capture and release run on every paid request: their spans (when tracing is on) take
        // no call-site stack, which `Effect.fn` would capture on every call.
        hold: Effect.fnUntraced(function*(input) {
          yield* checkAmount(input.amount, true)
          const ttl = input.ttlMs ?? CreditLedger.DEFAULT_HOLD_TTL_MS
          const { balance, detail } = yield* call(input.accountId, "hold", input.reference, input.amount, input.priceVersion, ttl)
          return {
            reference: input.reference,
            amount: Money.unsafeNano(Number(detail[0])),
            fromAllowance: Money.unsafeNano(Number(detail[1])),
            fromUsd: Money.unsafeNano(Number(detail[2])),
            priceVersion: detail[3]!,
            expiresAt: Number(detail[4]),
            before: balance
          }
        }, (effect) => span("CreditLedger.hold", effect)),
        capture: Effect.fnUntraced(function*(input) {
          yield* checkAmount(input.amount, true)
          const { balance, detail } = yield* call(input.accountId, "capture", input.reference, input.amount, JSON.stringify(input.usage))
          return { fromAllowance: Money.unsafeNano(Number(detail[0])), fromUsd: Money.unsafeNano(Number(detail[1])), balance }
        }, (effect) => span("CreditLedger.capture", effect)),
        release: (accountId, reference) =>
          span("CreditLedger.release", Effect.map(call(accountId, "release", reference), ({ balance }) => balance)),
        balance: (accountId) =>
          call(accountId, "balance").pipe(
            Effect.map(({ balance }) => balance),
            Effect.catchTag("LedgerError", Effect.die)
          ),
        journal: (accountId, options) =>
          send<ReadonlyArray<StreamEntry>>(
            "XRANGE",
            keysOf(accountId)[4],
            options.after === undefined ? "-" : `(${options.after}`,
            "+",
            "COUNT",
            String(options.limit)
          ).pipe(Effect.map((entries) =>
            entries.map(([id, flat]) => {
              const f = fields(flat)
              return toEntry([id, String(msOf(id)), f["k"]!, f["r"]!, f["c"]!, f["d"]!, f["h"]!])
            })
          )),
        usage: (accountId, query) =>
          Effect.map(scan(accountId, query, query.limit + 1), (matches) => CreditLedger.finishPage(matches, query.limit)),
        usageOffset: (accountId, query) =>
          Effect.map(scan(accountId, query, Number.MAX_SAFE_INTEGER), (matches) => ({
            entries: matches.slice(query.offset, query.offset + query.limit),
            total: matches.length
          }))
      })
    })
  )
