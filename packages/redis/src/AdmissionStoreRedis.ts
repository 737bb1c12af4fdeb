/**
 * The Redis layer of `Admission.AdmissionStore`: a paid call's admission, settlement and give-back,
 * each one call of one Lua script. An admission is seen by the ledger, the limiter and the spend
 * caps exactly as if they had made it, and it takes all of them or none.
 *
 * **Details**
 *
 * The script (`lua/admission.lua`) is assembled from the stores' own Lua (the ledger's
 * `ledgerLibrary`, the limiter's `takeLibrary` and `adjustLibrary`, the idempotency records'
 * `recordLibrary`), so each rule is written once, and it runs over the same keys as those stores.
 *
 * Every key of an account carries the account id as its hash tag (`tg:cl:{id}:*`, `rl:{id}:*`,
 * `tollgate:cap:{id}:*`, `tollgate:idem:{id}:*`), so on a Redis Cluster one call touches one slot.
 * A configured `global` rate limit is the exception: its counters are tagged `{global}`, so with a
 * global limit the admission needs a single Redis (or a proxy that runs scripts across slots).
 *
 * The script goes out straight on the node-redis client (`Scripts.sender`): as a Redis Function
 * (`FCALL`) where Redis offers them, else as `EVALSHA`. With `admissionGroupMs` and
 * `settlementGroupMs`, the admissions (or settlements) of one account that meet within that delay
 * go as one call (`AccountGroups`, the script's `admitmany` and `settlemany`), each still answered
 * on its own.
 *
 * @since 0.1.0
 */
import { Admission, CreditLedger, Errors, KeyCaps, Money, type RateLimiter } from "@tollgate/core"
import { Effect, Layer } from "effect"
import * as AccountGroups from "./AccountGroups.ts"
import * as CreditLedgerRedis from "./CreditLedgerRedis.ts"
import * as IdempotencyStoreRedis from "./IdempotencyStoreRedis.ts"
import * as KeyCapsRedis from "./KeyCapsRedis.ts"
import * as Lua from "./Lua.ts"
import * as RateLimiterRedis from "./RateLimiterRedis.ts"
import type { RedisConnection } from "./RedisConnection.ts"
import * as Scripts from "./Scripts.ts"

/** The account's ledger keys, first in every operation's keys (`CreditLedgerRedis.accountKeys`). */
const ACCOUNT_KEYS = 6

/**
 * Where an operation of the script reads its KEYS and ARGV (`src/lua/admission.lua`): the
 * account's ledger keys, then the operation's own keys in the order `keys` names them, then those
 * of its counters or adjustments; and `op` and the caller's time, then its own arguments in the
 * order `args` names them, then those of its take or adjustments. `pack` writes by it, `unpack`
 * reads by it, and the Lua names the same parts at the same places.
 *
 * @category internals
 */
export interface Layout {
  readonly op: "admit" | "settle" | "giveback"
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<string>
}

/**
 * `admit`: the paying key's spend cap (`KeyCapsRedis.capKey`); the hold, and today's and this
 * month's period ids (`KeyCaps.periodId`; `""` without a key paying). Its take follows
 * (`RateLimiterRedis.encode`). Admitted, the reply is flat: 'ok', the take's reply, the hold's
 * from allowance, from USD and expiry, the balance before it (USD, held, staked tokens, allowance
 * left), and the price version of a hold already placed under the reference.
 *
 * @category internals
 */
export const admitLayout: Layout = {
  op: "admit",
  keys: ["cap"],
  args: ["reference", "amount", "priceVersion", "ttlMs", "day", "month"]
}

/**
 * `settle`: the idempotency record, the spend cap (unread when the admission found none); the
 * capture, then the record's response (`status` `""` for none). Its adjustments follow, a key
 * and two arguments each (`adjustAll`). Captured, the reply is flat: 'ok', from allowance, from
 * USD, the balance after (USD, held, staked tokens, allowance left).
 *
 * @category internals
 */
export const settleLayout: Layout = {
  op: "settle",
  keys: ["record", "cap"],
  args: ["reference", "amount", "usage", "status", "headers", "body"]
}

/**
 * `giveback`: the idempotency record and the spend cap; the hold's reference and whether the
 * record is abandoned (`"1"`). Its adjustments follow, as `settle`'s.
 *
 * @category internals
 */
export const giveBackLayout: Layout = {
  op: "giveback",
  keys: ["record", "cap"],
  args: ["reference", "abandon"]
}

// Grouped (`AccountGroups`), `admitmany` and `settlemany` carry several admissions or settlements
// of one account: the account's keys once, then per step its own keys and its counters' or
// adjustments' keys; `op` and the latest time once, then per step the counts that tell where its
// part ends (`GroupedStep.counts`) and its arguments after the time. Each is answered as if alone,
// after those before it.

/**
 * A script call's KEYS and ARGV.
 *
 * @category internals
 */
export interface Packed {
  readonly keys: Array<string>
  readonly args: Array<string>
}

/**
 * The key prefixes of the stores the script writes (`Options.ledgerPrefix`, `idempotencyPrefix`).
 *
 * @category internals
 */
export interface Prefixes {
  readonly ledger: string
  readonly records: string
}

/**
 * An operation's parts named by its layout: the account's keys, its own keys and arguments by
 * name, and what follows them (its counters or adjustments). What `pack` wrote, read back.
 *
 * @category internals
 */
export const unpack = (layout: Layout, packed: Packed) => {
  const { args, keys } = packed
  const named = (names: ReadonlyArray<string>, values: ReadonlyArray<string>, from: number) =>
    Object.fromEntries(names.map((name, i) => [name, values[from + i]!]))
  return {
    op: args[0]!,
    now: args[1]!,
    account: keys.slice(0, ACCOUNT_KEYS),
    keys: named(layout.keys, keys, ACCOUNT_KEYS),
    args: named(layout.args, args, 2),
    restKeys: keys.slice(ACCOUNT_KEYS + layout.keys.length),
    restArgs: args.slice(2 + layout.args.length)
  }
}

const pushAdjustments = (keys: Array<string>, args: Array<string>, adjustments: ReadonlyArray<RateLimiter.Adjustment>) => {
  for (const adjustment of adjustments) {
    keys.push(adjustment.key)
    args.push(adjustment.rolling ? String(adjustment.bucket) : adjustment.field, String(adjustment.delta))
  }
}

/**
 * An admission as `admitLayout` lays it out, its take last.
 *
 * @category internals
 */
export const packAdmit = (prefixes: Prefixes, input: Admission.AdmitInput): Packed => {
  const { accountId, hold, now } = input
  const keys: Array<string> = [
    ...CreditLedgerRedis.accountKeys(prefixes.ledger, accountId),
    // Unread without a key paying, but in the account's slot like every key here.
    KeyCapsRedis.capKey(accountId, input.spendKeyId ?? "")
  ]
  const args = [
    admitLayout.op,
    String(now),
    hold.reference,
    String(hold.amount),
    hold.priceVersion,
    String(hold.ttlMs ?? CreditLedger.DEFAULT_HOLD_TTL_MS),
    input.spendKeyId === undefined ? "" : KeyCaps.periodId("EPOCH", now),
    input.spendKeyId === undefined ? "" : KeyCaps.periodId("MONTH", now)
  ]
  RateLimiterRedis.encode({ now, counters: input.counters, mode: "checked" }, keys, args)
  return { keys, args }
}

/**
 * A settlement as `settleLayout` lays it out, its adjustments last.
 *
 * @category internals
 */
export const packSettle = (prefixes: Prefixes, input: Admission.SettleInput): Packed => {
  const { capture, completion } = input
  const keys: Array<string> = [
    ...CreditLedgerRedis.accountKeys(prefixes.ledger, capture.accountId),
    IdempotencyStoreRedis.recordKey(prefixes.records, completion?.scope ?? capture.accountId, completion?.key ?? ""),
    KeyCapsRedis.capKey(capture.accountId, input.spendKeyId ?? "")
  ]
  const args = [
    settleLayout.op,
    String(input.now),
    capture.reference,
    String(capture.amount),
    JSON.stringify(capture.usage),
    completion === undefined ? "" : String(completion.response.status),
    completion === undefined ? "" : JSON.stringify(completion.response.headers),
    completion === undefined ? "" : completion.response.body
  ]
  pushAdjustments(keys, args, input.adjustments)
  return { keys, args }
}

/**
 * A give-back as `giveBackLayout` lays it out, its adjustments last.
 *
 * @category internals
 */
export const packGiveBack = (prefixes: Prefixes, input: Admission.GiveBackInput): Packed => {
  const keys: Array<string> = [
    ...CreditLedgerRedis.accountKeys(prefixes.ledger, input.accountId),
    IdempotencyStoreRedis.recordKey(prefixes.records, input.abandon?.scope ?? input.accountId, input.abandon?.key ?? ""),
    KeyCapsRedis.capKey(input.accountId, input.spendKeyId ?? "")
  ]
  const args = [giveBackLayout.op, String(input.now), input.reference, input.abandon === undefined ? "" : "1"]
  pushAdjustments(keys, args, input.adjustments)
  return { keys, args }
}

/** The admission's own Lua, after the stores' (`src/lua/admission.lua`). */
const admissionSource = Lua.read("admission")

const script = (retentionMs: number) =>
  Scripts.make(
    "admission",
    [
      CreditLedgerRedis.ledgerLibrary(retentionMs),
      RateLimiterRedis.takeLibrary,
      RateLimiterRedis.adjustLibrary,
      IdempotencyStoreRedis.recordLibrary,
      KeyCapsRedis.capLibrary,
      admissionSource
    ].join("\n"),
    "admission(keys, args)"
  )

type Reply = readonly [tag: string, ...rest: ReadonlyArray<unknown>]

/** @category options */
export interface Options {
  /** The ledger's key prefix (`CreditLedgerRedis.layerRedis({ prefix })`). */
  readonly ledgerPrefix?: string
  /** The idempotency records' key prefix (`IdempotencyStoreRedis.make({ prefix })`). */
  readonly idempotencyPrefix?: string
  /** How long Redis may take to answer before the call counts as a failure. Default 1000. */
  readonly timeoutMs?: number
  /** The ledger's retention of journal and usage entries (`CreditLedgerRedis.layerRedis({ retentionMs })`). */
  readonly retentionMs?: number | undefined
  /**
   * How long an admission may wait to go in one Redis call with other admissions of its account
   * (`AccountGroups`), in milliseconds. Default 0: each admission is its own call.
   */
  readonly admissionGroupMs?: number | undefined
  /**
   * How long a settlement may wait to go in one Redis call with other settlements of its account
   * (`AccountGroups`), in milliseconds. Default 0: each settlement is its own call.
   */
  readonly settlementGroupMs?: number | undefined
}

/**
 * An admission or a settlement waiting for its group: its keys and arguments as `admit` or `settle`
 * lays them out, and the counts that tell the grouped script where its part ends.
 */
interface GroupedStep {
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<string>
  readonly counts: ReadonlyArray<string>
  readonly onReply: (reply: unknown) => void
  readonly onError: (cause: unknown) => void
}

const unavailable = () => Errors.storeUnavailable("The admission store")

/** The balance a flat reply carries from `i` on: USD, held, staked tokens, allowance left. */
const balanceAt = (reply: Reply, i: number): CreditLedger.Balance => {
  const usd = Number(reply[i])
  const held = Number(reply[i + 1])
  return {
    usd: Money.unsafeNano(usd),
    heldUsd: Money.unsafeNano(held),
    availableUsd: Money.unsafeNano(usd - held),
    stakedTokens: Number(reply[i + 2]),
    availableAllowance: Money.unsafeNano(Number(reply[i + 3]))
  }
}

/**
 * The admission store over the `RedisConnection` in context.
 *
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const prefixes: Prefixes = {
      ledger: options.ledgerPrefix ?? CreditLedgerRedis.defaultPrefix,
      records: options.idempotencyPrefix ?? IdempotencyStoreRedis.defaultPrefix
    }
    const lua = script(options.retentionMs ?? CreditLedger.DEFAULT_RETENTION_MS)
    const send = yield* Scripts.sender(options.timeoutMs ?? 1000, [lua])

    const command = (keys: ReadonlyArray<string>, args: ReadonlyArray<string>) => {
      const command = ["", "", String(keys.length)]
      for (const key of keys) command.push(key)
      for (const arg of args) command.push(arg)
      return command
    }

    const call = <A, E>(keys: ReadonlyArray<string>, args: ReadonlyArray<string>, decode: (reply: Reply) => Effect.Effect<A, E>) =>
      Effect.callback<A, E | Errors.ServiceUnavailable>((resume) => {
        send(lua, command(keys, args), (reply) => resume(decode(reply as Reply)), () => resume(Effect.fail(unavailable())))
      })

    // One step goes as itself (`admit`, `settle`), several as one `many` (`admitmany`,
    // `settlemany`); each learns its own reply.
    const sendGroup = (many: string): AccountGroups.SendGroup<GroupedStep> => (group, done) => {
      if (group.length === 1) {
        const only = group[0]!
        return send(lua, command(only.keys, only.args), (reply) => {
          done()
          only.onReply(reply)
        }, (cause) => {
          done()
          only.onError(cause)
        })
      }
      const keys = group[0]!.keys.slice(0, ACCOUNT_KEYS)
      // The group runs at the latest of its steps' times.
      const args = [many, String(Math.max(...group.map((each) => Number(each.args[1]))))]
      for (const each of group) {
        for (let i = ACCOUNT_KEYS; i < each.keys.length; i++) keys.push(each.keys[i]!)
        for (const count of each.counts) args.push(count)
        for (let i = 2; i < each.args.length; i++) args.push(each.args[i]!)
      }
      send(lua, command(keys, args), (reply) => {
        done()
        const replies = reply as ReadonlyArray<unknown>
        group.forEach((each, i) => each.onReply(replies[i]))
      }, (cause) => {
        done()
        for (const each of group) each.onError(cause)
      })
    }
    const groupsOf = (many: string, delayMs = 0) => delayMs > 0 ? AccountGroups.make(delayMs, sendGroup(many)) : undefined
    const admissions = groupsOf("admitmany", options.admissionGroupMs)
    const settlements = groupsOf("settlemany", options.settlementGroupMs)

    // A step of the account, alone or grouped.
    const step = <A, E>(
      groups: ((accountId: string, step: GroupedStep) => void) | undefined,
      accountId: string,
      keys: ReadonlyArray<string>,
      args: ReadonlyArray<string>,
      counts: () => ReadonlyArray<string>,
      decode: (reply: Reply) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | Errors.ServiceUnavailable> =>
      groups === undefined ? call(keys, args, decode) : Effect.callback((resume) =>
        groups(accountId, {
          keys,
          args,
          counts: counts(),
          onReply: (reply) => resume(decode(reply as Reply)),
          onError: () => resume(Effect.fail(unavailable()))
        })
      )

    const admit = (input: Admission.AdmitInput): Effect.Effect<Admission.AdmitReply, Errors.ServiceUnavailable> => {
      const { hold, now } = input
      const { args, keys } = packAdmit(prefixes, input)
      const take: RateLimiterRedis.TakeInput = { now, counters: input.counters, mode: "checked" }
      const statesOf = (reply: unknown) => {
        const states: Array<RateLimiter.CounterState> = new Array(input.counters.length)
        RateLimiterRedis.decode(take, reply as ReadonlyArray<number>, 0, states)
        return states
      }
      // Grouped, the script finds where this admission ends by its counts of keys and arguments.
      const counts = () => [String(keys.length - ACCOUNT_KEYS - admitLayout.keys.length), String(args.length - 2 - admitLayout.args.length)]
      return step(admissions, input.accountId, keys, args, counts, (reply): Effect.Effect<Admission.AdmitReply> => {
        switch (reply[0]) {
          case "ok": {
            return Effect.succeed({
              _tag: "Admitted",
              states: statesOf(reply[1]),
              hold: {
                reference: hold.reference,
                amount: hold.amount,
                fromAllowance: Money.unsafeNano(Number(reply[2])),
                fromUsd: Money.unsafeNano(Number(reply[3])),
                priceVersion: reply[9] === undefined ? hold.priceVersion : String(reply[9]),
                expiresAt: Number(reply[4]),
                before: balanceAt(reply, 5)
              }
            })
          }
          case "cap":
            return Effect.succeed({
              _tag: "CapReached",
              cap: { usd: Money.unsafeNano(Number(reply[1])), period: reply[2] as KeyCaps.LimitPeriod },
              spent: Money.unsafeNano(Number(reply[3]))
            })
          case "limited":
            return Effect.succeed({ _tag: "RateLimited", states: statesOf(reply[1]) })
          default:
            return Effect.succeed({
              _tag: "HoldRefused",
              error: CreditLedgerRedis.ledgerError(reply[1] as CreditLedger.LedgerError["reason"])
            })
        }
      })
    }

    const settle = (input: Admission.SettleInput) => {
      const { args, keys } = packSettle(prefixes, input)
      const decode = (reply: Reply): Effect.Effect<CreditLedger.Settlement, CreditLedger.LedgerError> => {
        if (reply[0] === "err") return Effect.fail(CreditLedgerRedis.ledgerError(reply[1] as CreditLedger.LedgerError["reason"]))
        return Effect.succeed({
          fromAllowance: Money.unsafeNano(Number(reply[1])),
          fromUsd: Money.unsafeNano(Number(reply[2])),
          balance: balanceAt(reply, 3)
        })
      }
      return step(settlements, input.capture.accountId, keys, args, () => [String(input.adjustments.length)], decode)
    }

    const giveBack = (input: Admission.GiveBackInput) => {
      const { args, keys } = packGiveBack(prefixes, input)
      return call(keys, args, () => Effect.void)
    }

    return Admission.AdmissionStore.of({ completesRecordsInStep: true, settlesInProcess: false, admit, settle, giveBack })
  })

/**
 * The admission store on Redis, beside the Redis layers of the stores it writes to.
 *
 * @category layers
 */
export const layerRedis = (options: Options = {}): Layer.Layer<Admission.AdmissionStore, never, RedisConnection> =>
  Layer.effect(Admission.AdmissionStore, make(options))
