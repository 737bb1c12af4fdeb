/**
 * Prepaid credit: an account's USD balance in integer nano-USD and its daily allowance from staked
 * tokens (1 token = 1 USD of credit per UTC day, renewed at midnight, not carried over). Money
 * moves only through the operations here (top-up, grant, hold, capture, release, refund, stake);
 * each appends to the account's append-only journal and applies at most once per reference:
 * replaying it returns the first result and changes nothing. The USD balance is always the sum of
 * the journal's USD deltas.
 *
 * **When to use**
 *
 * A paid call holds its worst-case price, which pins the price version, and captures the actual
 * price (at most the hold), which releases the rest and appends the call's usage entry in the same
 * step. Readers page through an account's history with `journalStream` and `usageStream`.
 *
 * **Details**
 *
 * Spending draws on the allowance first, since it expires at the end of the day, and on the USD
 * balance for the rest (`split`). A hold not settled before its expiry is released by the next
 * operation on the account, or by `sweepExpired`, which a background sweep runs so a hold whose
 * request died (a store outage, a crash) is released on time even on an account nobody uses again.
 * `holdStats` reads the open holds and what they hold from the store itself, for the gauges.
 * Entries are kept for a retention (`Retention`), and the balances are running totals beside them,
 * so dropping an old entry never changes a balance.
 *
 * `layerMemory` is the single-process ledger; `@tollgate/redis` has the shared one. Both pass the
 * contract suite in `packages/testkit/src/contracts/CreditLedger.ts`.
 *
 * @since 0.1.0
 */
import { Clock, Context, Data, Effect, Layer, Option, Stream } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"
import * as Money from "./Money.ts"

/**
 * The currency an entry is in: `USD` for the balance, `DIEM` for the staked-token allowance.
 *
 * @category models
 */
export type Currency = "USD" | "DIEM"

/** @category models */
export type EntryKind = "topup" | "grant" | "refund" | "stake" | "hold" | "capture" | "release"

/**
 * One journal entry. `delta` changes the settled balance of its currency (for `DIEM`, a negative
 * delta is allowance used that day); `held` changes the amount reserved by open holds.
 *
 * @category models
 */
export interface JournalEntry {
  /** `<ms>-<seq>`, strictly increasing per account. */
  readonly id: string
  readonly timestamp: number
  readonly kind: EntryKind
  readonly reference: string
  readonly currency: Currency
  readonly delta: Money.Nano
  readonly held: Money.Nano
}

/**
 * What a request used, as the usage report shows it.
 *
 * @category models
 */
export interface UsageDetails {
  readonly sku: string
  readonly units: number
  readonly pricePerUnit: Money.Nano
  readonly notes?: string | undefined
  readonly requestId: string
  readonly executionMs: number
  readonly promptTokens?: number | undefined
  readonly completionTokens?: number | undefined
  /** The API key that paid, for usage analytics by key; absent for a wallet. */
  readonly keyId?: string | undefined
}

/**
 * A usage entry: one capture in one currency.
 *
 * @category models
 */
export interface UsageEntry extends UsageDetails {
  /** The id of the capture's journal entry; usage pages are keyed by it. */
  readonly id: string
  readonly timestamp: number
  readonly amount: Money.Nano
  readonly currency: Currency
}

/** @category models */
export interface Balance {
  /** Settled USD: the sum of the journal's USD deltas. */
  readonly usd: Money.Nano
  /** USD reserved by open holds. */
  readonly heldUsd: Money.Nano
  /** `usd - heldUsd`: what a new hold may take. */
  readonly availableUsd: Money.Nano
  readonly stakedTokens: number
  /** Today's allowance not yet used nor held. */
  readonly availableAllowance: Money.Nano
}

/** @category models */
export interface Receipt {
  readonly entry: JournalEntry
  readonly balance: Balance
}

/** @category models */
export interface Hold {
  readonly reference: string
  readonly amount: Money.Nano
  /** The part reserved from today's allowance; the rest is USD. */
  readonly fromAllowance: Money.Nano
  readonly fromUsd: Money.Nano
  readonly priceVersion: string
  readonly expiresAt: number
  /** The balance before the hold: what `x-service-balance-*` report. */
  readonly before: Balance
}

/** @category models */
export interface Settlement {
  readonly fromAllowance: Money.Nano
  readonly fromUsd: Money.Nano
  readonly balance: Balance
}

/** @category models */
export interface CreditInput {
  readonly accountId: string
  readonly amount: Money.Nano
  readonly reference: string
}

/** @category models */
export interface HoldInput {
  readonly accountId: string
  readonly amount: Money.Nano
  readonly reference: string
  readonly priceVersion: string
  /** How long the hold lives if never settled; default 10 minutes. */
  readonly ttlMs?: number
}

/** @category models */
export interface CaptureInput {
  readonly accountId: string
  /** The hold's reference; a hold is captured at most once. */
  readonly reference: string
  readonly amount: Money.Nano
  readonly usage: UsageDetails
}

/**
 * A usage query. `after` is the id of the last entry of the previous page (keyset pagination: a
 * page never shifts when entries are appended meanwhile).
 *
 * @category models
 */
export interface UsageQuery {
  readonly from?: number | undefined
  readonly to?: number | undefined
  readonly currency?: Currency | undefined
  readonly order: "asc" | "desc"
  readonly limit: number
  readonly after?: string | undefined
}

/** @category models */
export interface UsagePage {
  readonly entries: ReadonlyArray<UsageEntry>
  /** Set when more entries may follow: pass it as `after`. */
  readonly next?: string | undefined
}

/**
 * Why an operation was refused. Nothing changed.
 *
 * @category errors
 */
export class LedgerError extends Data.TaggedError("LedgerError")<{
  readonly reason:
    | "InsufficientFunds"
    | "UnknownHold"
    | "HoldClosed"
    | "ExceedsHold"
    | "InvalidAmount"
    | "ReferenceConflict"
    | "BalanceCeiling"
  readonly message: string
}> {}

/**
 * Why a credit that would take an account's balance past `Money.MAX` is refused: every amount the
 * ledger stores or answers must stay a safe integer, or the account's reads and paid calls fail.
 *
 * @category constants
 */
export const BALANCE_CEILING_MESSAGE = `The balance would exceed the maximum of ${Money.formatUsd(Money.MAX)} USD`

/** @category constants */
export const DEFAULT_HOLD_TTL_MS = 10 * 60_000

/**
 * The reference prefix of a hold funded outside the balance: an x402 `upto` permit, which pays the
 * call's actual charge on chain once it is known. Such a hold takes nothing from the balance or the
 * allowance (it is placed whatever they hold, so the wallet's other calls cannot spend the permit's
 * money, nor the permit the wallet's credit), and its capture records the usage at the captured
 * amount while the balance stays as it was. A prefix rather than a flag so both stores, and the
 * admission's single store step, read it from the reference they already have.
 *
 * @category constants
 */
export const FUNDED_HOLD_PREFIX = "permit:"

/**
 * Whether a hold reference names a hold funded outside the balance (`FUNDED_HOLD_PREFIX`).
 *
 * @category predicates
 */
export const isFundedHold = (reference: string): boolean => reference.startsWith(FUNDED_HOLD_PREFIX)

/**
 * How long a closed hold (captured or released) is remembered. Within it a repeated capture
 * returns the same settlement and a release changes nothing; after it the hold's record is dropped
 * and its reference is unknown again, while its journal and usage entries stay. Every paid call
 * places a hold, so keeping the records forever would grow each account by one record per call.
 *
 * @category constants
 */
export const CLOSED_HOLD_RETENTION_MS = 60 * 60_000

/** @category constants */
export const DAY_MS = 86_400_000

/**
 * How long usage and journal entries are kept by default: what the billing reports look back on.
 * Older entries are dropped as the account is used; the balance is a running total kept beside
 * them, so it never depends on an entry that was dropped.
 *
 * @category constants
 */
export const DEFAULT_RETENTION_MS = 90 * DAY_MS

/**
 * How many usage entries (and, separately, journal entries and closed holds) the memory ledger keeps
 * per account by default: the newest ones. A paid call adds one usage entry and two journal entries.
 *
 * @category constants
 */
export const DEFAULT_MAX_ENTRIES = 10_000

/**
 * What the ledger keeps of the past (see `DEFAULT_RETENTION_MS`, `DEFAULT_MAX_ENTRIES`).
 *
 * @category options
 */
export interface Retention {
  /** Usage and journal entries older than this are dropped. */
  readonly retentionMs?: number | undefined
  /** Memory only: per account, at most this many usage entries, journal entries and closed holds. */
  readonly maxEntries?: number | undefined
}

/** @category models */
export interface Split {
  readonly fromAllowance: Money.Nano
  readonly fromUsd: Money.Nano
}

/**
 * How an amount splits between today's allowance and USD: the allowance first, up to `allowance`
 * (at a hold, the allowance available; at a capture, what the hold reserved from it), the rest in
 * USD. A hold funded outside the balance (`FUNDED_HOLD_PREFIX`) takes neither. The TypeScript twin
 * of the split in the ledger's Lua (`holdCheck` and `ledgerCapture` in `@tollgate/redis`'s
 * `CreditLedgerRedis`), which must agree with it.
 *
 * @category constructors
 */
export const split = (amount: number, allowance: number, funded: boolean): Split => {
  if (funded) return { fromAllowance: Money.zero, fromUsd: Money.zero }
  const fromAllowance = Math.max(0, Math.min(amount, allowance))
  return { fromAllowance: Money.unsafeNano(fromAllowance), fromUsd: Money.unsafeNano(amount - fromAllowance) }
}

/**
 * The UTC day number of a time: allowance is counted per day.
 *
 * @category constructors
 */
export const dayOf = (ms: number): number => Math.floor(ms / DAY_MS)

/**
 * Orders entry ids (`<ms>-<seq>`) numerically.
 *
 * @category ordering
 */
export const compareIds = (a: string, b: string): number => {
  const [am = 0, as = 0] = a.split("-").map(Number)
  const [bm = 0, bs = 0] = b.split("-").map(Number)
  return am !== bm ? am - bm : as - bs
}

/**
 * The open holds of every account and what they hold (USD and today's allowance), as the store
 * has them.
 *
 * @category models
 */
export interface HoldStats {
  readonly open: number
  readonly held: Money.Nano
}

/** @category services */
export class CreditLedger extends Context.Service<CreditLedger, {
  readonly topUp: (input: CreditInput) => Effect.Effect<Receipt, LedgerError | ServiceUnavailable>
  /** Credit given by an operator (the admin endpoint, the CLI, dev mode). */
  readonly grant: (input: CreditInput) => Effect.Effect<Receipt, LedgerError | ServiceUnavailable>
  /** Credit returned for a charge, to the USD balance. */
  readonly refund: (input: CreditInput) => Effect.Effect<Receipt, LedgerError | ServiceUnavailable>
  /** Sets the staked tokens behind the daily allowance (an entry of delta 0, for the record). */
  readonly stake: (
    input: { readonly accountId: string; readonly tokens: number; readonly reference: string }
  ) => Effect.Effect<Receipt, LedgerError | ServiceUnavailable>
  readonly hold: (input: HoldInput) => Effect.Effect<Hold, LedgerError | ServiceUnavailable>
  /** Takes `amount` (<= the hold; allowance part first) and releases the rest of the hold. */
  readonly capture: (input: CaptureInput) => Effect.Effect<Settlement, LedgerError | ServiceUnavailable>
  /**
   * Releases an open hold; releasing a closed one changes nothing. A hold closed more than
   * `CLOSED_HOLD_RETENTION_MS` ago (in memory, also one beyond the newest `maxEntries` closed holds
   * of its account) is forgotten: capturing or releasing it is `UnknownHold`.
   */
  readonly release: (accountId: string, reference: string) => Effect.Effect<Balance, LedgerError | ServiceUnavailable>
  readonly balance: (accountId: string) => Effect.Effect<Balance, ServiceUnavailable>
  /** Journal entries after `after` (exclusive), oldest first. */
  readonly journal: (
    accountId: string,
    options: { readonly after?: string; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<JournalEntry>, ServiceUnavailable>
  readonly usage: (accountId: string, query: UsageQuery) => Effect.Effect<UsagePage, ServiceUnavailable>
  /**
   * Releases every open hold past its expiry, on every account; succeeds with how many accounts had
   * one. Its own operation, apart from the paid path's.
   */
  readonly sweepExpired: Effect.Effect<number, ServiceUnavailable>
  /** The open holds of every account, from the store (not from what this process placed). */
  readonly holdStats: Effect.Effect<HoldStats, ServiceUnavailable>
  /** Offset pagination with a total, for the deprecated usage endpoint (cost grows with the offset). */
  readonly usageOffset: (
    accountId: string,
    query: Omit<UsageQuery, "after"> & { readonly offset: number }
  ) => Effect.Effect<{ readonly entries: ReadonlyArray<UsageEntry>; readonly total: number }, ServiceUnavailable>
}>()("@tollgate/core/CreditLedger") {}

/**
 * How many entries one read of `journalStream` or `usageStream` takes.
 *
 * @category streams
 */
export const STREAM_PAGE = 500

/**
 * An account's journal entries after `after` (exclusive; from the start when omitted), oldest
 * first, read a page at a time as the stream is pulled.
 *
 * **When to use**
 *
 * Whenever a caller needs more of the journal than one page: to stop early (`Stream.take`,
 * `Stream.runHead`) or to read it whole. Journal ids start with their millisecond, so
 * an `after` of `${ms}-0` starts at a time.
 *
 * @category streams
 */
export const journalStream = (
  ledger: CreditLedger["Service"],
  accountId: string,
  after?: string
): Stream.Stream<JournalEntry, ServiceUnavailable> =>
  Stream.paginate(after, (cursor: string | undefined) =>
    Effect.map(
      ledger.journal(accountId, cursor === undefined ? { limit: STREAM_PAGE } : { after: cursor, limit: STREAM_PAGE }),
      (page) => [page, page.length < STREAM_PAGE ? Option.none() : Option.some(page.at(-1)!.id)] as const
    ))

/**
 * An account's usage entries matching `query`, in its order, read a page at a time as the stream
 * is pulled (keyset pages: entries appended meanwhile never repeat one).
 *
 * @category streams
 */
export const usageStream = (
  ledger: CreditLedger["Service"],
  accountId: string,
  query: Omit<UsageQuery, "limit" | "after">
): Stream.Stream<UsageEntry, ServiceUnavailable> =>
  Stream.paginate(undefined, (after: string | undefined) =>
    Effect.map(
      ledger.usage(accountId, { ...query, limit: STREAM_PAGE, after }),
      (page) => [page.entries, Option.fromNullishOr(page.next)] as const
    ))

const fail = (reason: LedgerError["reason"], message: string) => new LedgerError({ reason, message })

const checkAmount = (amount: number, allowZero: boolean) =>
  Number.isSafeInteger(amount) && (allowZero ? amount >= 0 : amount > 0)
    ? undefined
    : fail("InvalidAmount", `${amount} is not a ${allowZero ? "non-negative" : "positive"} integer amount of nano-USD`)

interface MemoryHold {
  readonly hold: Omit<Hold, "before">
  readonly day: number
  state: "open" | "captured" | "released"
  settlement?: { readonly fromAllowance: Money.Nano; readonly fromUsd: Money.Nano }
}

interface MemoryAccount {
  usd: number
  heldUsd: number
  stakedTokens: number
  lastMs: number
  seq: number
  readonly allowanceUsed: Map<number, number>
  readonly allowanceHeld: Map<number, number>
  readonly holds: Map<string, MemoryHold>
  readonly open: Set<MemoryHold>
  /**
   * No open hold expires before this: the sweep walks `open` only from then on, not on every
   * operation (with many calls in flight the walk was a measurable part of each).
   */
  nextExpiry: number
  /**
   * The references of closed holds in the order they closed, with when each is forgotten, from
   * `closedHead` on. Arrays with a moving head rather than a Map: a Map whose oldest entries are
   * deleted one by one leaves holes that every walk from its start skips again.
   */
  readonly closed: Array<string>
  readonly forgetAt: Array<number>
  closedHead: number
  readonly references: Map<string, { readonly kind: EntryKind; readonly amount: number; readonly entry: JournalEntry }>
  readonly journal: Array<JournalEntry>
  readonly usage: Array<UsageEntry>
}

const emptyAccount = (): MemoryAccount => ({
  usd: 0,
  heldUsd: 0,
  stakedTokens: 0,
  lastMs: 0,
  seq: 0,
  allowanceUsed: new Map(),
  allowanceHeld: new Map(),
  holds: new Map(),
  open: new Set(),
  nextExpiry: Number.POSITIVE_INFINITY,
  closed: [],
  forgetAt: [],
  closedHead: 0,
  references: new Map(),
  journal: [],
  usage: []
})

const balanceOf = (account: MemoryAccount, now: number): Balance => {
  const day = dayOf(now)
  const allowance = account.stakedTokens * Money.NANO_PER_USD
    - (account.allowanceUsed.get(day) ?? 0) - (account.allowanceHeld.get(day) ?? 0)
  return {
    usd: Money.unsafeNano(account.usd),
    heldUsd: Money.unsafeNano(account.heldUsd),
    availableUsd: Money.unsafeNano(account.usd - account.heldUsd),
    stakedTokens: account.stakedTokens,
    availableAllowance: Money.unsafeNano(Math.max(0, allowance))
  }
}

/** First index whose id is greater than `id` (entries are in id order). */
const upperBound = (entries: ReadonlyArray<{ readonly id: string }>, id: string): number => {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (compareIds(entries[mid]!.id, id) <= 0) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** First index whose timestamp is at least `ms`. */
const lowerBoundTime = (entries: ReadonlyArray<{ readonly timestamp: number }>, ms: number): number => {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (entries[mid]!.timestamp < ms) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * Drops what `retention` no longer keeps from the front of `entries` (oldest first), in batches: a
 * drop happens once the excess is a sixteenth of the cap, or once the oldest entry is a sixty-fourth
 * of the retention past it, so an append pays O(1) on average.
 */
const trim = (entries: Array<{ readonly timestamp: number }>, now: number, retentionMs: number, maxEntries: number) => {
  const excess = entries.length - maxEntries
  let drop = excess >= Math.max(1, maxEntries >> 4) ? excess : 0
  const cutoff = now - retentionMs
  if (entries.length > 0 && entries[0]!.timestamp < cutoff - (retentionMs >> 6)) {
    drop = Math.max(drop, lowerBoundTime(entries, cutoff))
  }
  if (drop > 0) entries.splice(0, drop)
}

/**
 * A page from up to `limit + 1` matches: the extra one only says that more follow.
 *
 * @category internals
 */
export const finishPage = (matches: ReadonlyArray<UsageEntry>, limit: number): UsagePage =>
  matches.length > limit
    ? { entries: matches.slice(0, limit), next: matches[limit - 1]!.id }
    : { entries: matches }

/**
 * The usage entries of a query, scanned from the time bounds and the cursor: cost is the page, not
 * the history.
 *
 * @category internals
 */
export const pageOf = (entries: ReadonlyArray<UsageEntry>, query: UsageQuery): UsagePage => {
  let start = query.from === undefined ? 0 : lowerBoundTime(entries, query.from)
  let end = query.to === undefined ? entries.length : lowerBoundTime(entries, query.to + 1)
  if (query.after !== undefined) {
    const cut = upperBound(entries, query.after)
    if (query.order === "asc") start = Math.max(start, cut)
    else end = Math.min(end, cut - (cut > 0 && entries[cut - 1]!.id === query.after ? 1 : 0))
  }
  const page: Array<UsageEntry> = []
  const step = query.order === "asc" ? 1 : -1
  for (let i = query.order === "asc" ? start : end - 1; i >= start && i < end && page.length <= query.limit; i += step) {
    const entry = entries[i]!
    if (query.currency === undefined || entry.currency === query.currency) page.push(entry)
  }
  return finishPage(page, query.limit)
}

/**
 * The memory ledger's hold, capture, release and balance as plain functions at a given time: for a
 * caller that runs them inside its own synchronous step with other stores' (see
 * `Admission.layerMemory`). A refusal is returned, not thrown.
 *
 * @category store
 */
export class Memory extends Context.Service<Memory, {
  /** With `dryRun`, says whether the hold would be placed, placing nothing. */
  readonly hold: (input: HoldInput, now: number, dryRun?: boolean) => Hold | LedgerError
  readonly capture: (input: CaptureInput, now: number) => Settlement | LedgerError
  readonly release: (accountId: string, reference: string, now: number) => Balance | LedgerError
  readonly balance: (accountId: string, now: number) => Balance
  /** Where the hold stands: open, released, captured (for how much), or unknown (never placed, or forgotten). */
  readonly holdState: (
    accountId: string,
    reference: string,
    now: number
  ) => "open" | "released" | { readonly captured: Money.Nano } | undefined
}>()("@tollgate/core/CreditLedger/Memory") {}

/**
 * The ledger in process memory, with its primitives as `Memory`, keeping what `retention` says.
 * Every operation runs in one synchronous step, so concurrent operations on an account never
 * interleave. Its twin on Redis is the ledger's Lua (`@tollgate/redis` `src/lua/ledger.lua` and
 * `ledger-script.lua`), which must keep the same rules.
 *
 * @category layers
 */
export const layerMemoryWith = (retention: Retention = {}): Layer.Layer<CreditLedger | Memory> =>
  Layer.syncContext(() => {
    const retentionMs = retention.retentionMs ?? DEFAULT_RETENTION_MS
    const maxEntries = retention.maxEntries ?? DEFAULT_MAX_ENTRIES
    const accounts = new Map<string, MemoryAccount>()
    const accountOf = (id: string) => {
      let account = accounts.get(id)
      if (account === undefined) {
        account = emptyAccount()
        accounts.set(id, account)
      }
      return account
    }
    /**
     * The account for a read or an operation that may be refused: one that was never written is
     * not stored, so a caller that only looks (a wallet that never held credit, a balance query for
     * any address) leaves nothing behind.
     */
    const peek = (id: string) => accounts.get(id) ?? emptyAccount()

    const append = (
      account: MemoryAccount,
      now: number,
      entry: Omit<JournalEntry, "id" | "timestamp">
    ): JournalEntry => {
      if (now > account.lastMs) {
        account.lastMs = now
        account.seq = 1
      } else {
        account.seq += 1
      }
      const full: JournalEntry = { ...entry, id: `${account.lastMs}-${account.seq}`, timestamp: account.lastMs }
      account.journal.push(full)
      trim(account.journal, now, retentionMs, maxEntries)
      return full
    }

    /** Forgets the oldest closed hold; the arrays drop their forgotten front once it is half of them. */
    const forgetOldest = (account: MemoryAccount) => {
      account.holds.delete(account.closed[account.closedHead]!)
      account.closedHead++
      if (account.closedHead >= 1024 && account.closedHead * 2 >= account.closed.length) {
        account.closed.splice(0, account.closedHead)
        account.forgetAt.splice(0, account.closedHead)
        account.closedHead = 0
      }
    }

    const closeHold = (account: MemoryAccount, now: number, held: MemoryHold, fromAllowance: number, fromUsd: number) => {
      const { hold } = held
      account.open.delete(held)
      account.closed.push(hold.reference)
      account.forgetAt.push(now + CLOSED_HOLD_RETENTION_MS)
      if (account.closed.length - account.closedHead > maxEntries) forgetOldest(account)
      if (hold.fromAllowance > 0 || fromAllowance > 0) {
        account.allowanceHeld.set(held.day, (account.allowanceHeld.get(held.day) ?? 0) - hold.fromAllowance)
        account.allowanceUsed.set(held.day, (account.allowanceUsed.get(held.day) ?? 0) + fromAllowance)
      }
      account.heldUsd -= hold.fromUsd
      account.usd -= fromUsd
      const kind: EntryKind = held.state === "captured" ? "capture" : "release"
      const entries: Array<JournalEntry> = []
      if (hold.fromAllowance > 0 || fromAllowance > 0) {
        entries.push(append(account, now, {
          kind,
          reference: hold.reference,
          currency: "DIEM",
          delta: Money.unsafeNano(-fromAllowance),
          held: Money.unsafeNano(-hold.fromAllowance)
        }))
      }
      if (hold.fromUsd > 0 || fromUsd > 0 || entries.length === 0) {
        entries.push(append(account, now, {
          kind,
          reference: hold.reference,
          currency: "USD",
          delta: Money.unsafeNano(-fromUsd),
          held: Money.unsafeNano(-hold.fromUsd)
        }))
      }
      return entries
    }

    /** Releases the account's expired holds and forgets its old closed ones; true when it released one. */
    const sweep = (account: MemoryAccount, now: number): boolean => {
      let released = false
      if (account.nextExpiry <= now) {
        let next = Number.POSITIVE_INFINITY
        for (const held of account.open) {
          if (held.state !== "open") continue
          if (held.hold.expiresAt <= now) {
            held.state = "released"
            closeHold(account, now, held, 0, 0)
            released = true
          } else if (held.hold.expiresAt < next) {
            next = held.hold.expiresAt
          }
        }
        account.nextExpiry = next
      }
      while (account.closedHead < account.closed.length && account.forgetAt[account.closedHead]! <= now) forgetOldest(account)
      return released
    }

    const credit = (kind: "topup" | "grant" | "refund") =>
      Effect.fn(`CreditLedger.${kind}`)(function*(input: CreditInput) {
        const invalid = checkAmount(input.amount, false)
        if (invalid !== undefined) return yield* invalid
        const now = yield* Clock.currentTimeMillis
        const account = accountOf(input.accountId)
        sweep(account, now)
        const previous = account.references.get(input.reference)
        if (previous !== undefined) {
          if (previous.kind !== kind || previous.amount !== input.amount) {
            return yield* fail("ReferenceConflict", `Reference ${input.reference} was used for another operation`)
          }
          return { entry: previous.entry, balance: balanceOf(account, now) }
        }
        if (account.usd + input.amount > Money.MAX) return yield* fail("BalanceCeiling", BALANCE_CEILING_MESSAGE)
        account.usd += input.amount
        const entry = append(account, now, { kind, reference: input.reference, currency: "USD", delta: input.amount, held: Money.zero })
        account.references.set(input.reference, { kind, amount: input.amount, entry })
        return { entry, balance: balanceOf(account, now) }
      })

    const stake = Effect.fn("CreditLedger.stake")(
      function*(input: { readonly accountId: string; readonly tokens: number; readonly reference: string }) {
        if (!Number.isSafeInteger(input.tokens) || input.tokens < 0) {
          return yield* fail("InvalidAmount", `${input.tokens} is not a whole number of tokens`)
        }
        const now = yield* Clock.currentTimeMillis
        const account = accountOf(input.accountId)
        sweep(account, now)
        const previous = account.references.get(input.reference)
        if (previous !== undefined) {
          if (previous.kind !== "stake" || previous.amount !== input.tokens) {
            return yield* fail("ReferenceConflict", `Reference ${input.reference} was used for another operation`)
          }
          return { entry: previous.entry, balance: balanceOf(account, now) }
        }
        account.stakedTokens = input.tokens
        const entry = append(account, now, {
          kind: "stake",
          reference: input.reference,
          currency: "DIEM",
          delta: Money.zero,
          held: Money.zero
        })
        account.references.set(input.reference, { kind: "stake", amount: input.tokens, entry })
        return { entry, balance: balanceOf(account, now) }
      }
    )

    // The metered pipeline holds, captures and releases on every paid request, through
    // `Admission.layerMemory`, which calls these plain functions inside its own synchronous step;
    // the service's `hold`, `capture` and `release` are the same functions in an Effect.
    const hold = (input: HoldInput, now: number, dryRun = false): Hold | LedgerError => {
      const invalid = checkAmount(input.amount, true)
      if (invalid !== undefined) return invalid
      const account = peek(input.accountId)
      sweep(account, now)
      const existing = account.holds.get(input.reference)
      if (existing !== undefined) {
        if (existing.hold.amount !== input.amount) {
          return fail("ReferenceConflict", `Hold ${input.reference} exists with another amount`)
        }
        return { ...existing.hold, before: balanceOf(account, now) }
      }
      if (account.references.has(input.reference)) {
        return fail("ReferenceConflict", `Reference ${input.reference} was used for another operation`)
      }
      const before = balanceOf(account, now)
      const { fromAllowance, fromUsd } = split(input.amount, before.availableAllowance, isFundedHold(input.reference))
      if (fromUsd > before.availableUsd) return fail("InsufficientFunds", "Insufficient balance")
      if (dryRun)
        return {
          reference: input.reference,
          amount: input.amount,
          fromAllowance,
          fromUsd,
          priceVersion: input.priceVersion,
          expiresAt: now,
          before
        }
      accounts.set(input.accountId, account)
      const day = dayOf(now)
      const created: MemoryHold = {
        hold: {
          reference: input.reference,
          amount: input.amount,
          fromAllowance,
          fromUsd,
          priceVersion: input.priceVersion,
          expiresAt: now + (input.ttlMs ?? DEFAULT_HOLD_TTL_MS)
        },
        day,
        state: "open"
      }
      account.holds.set(input.reference, created)
      account.open.add(created)
      if (created.hold.expiresAt < account.nextExpiry) account.nextExpiry = created.hold.expiresAt
      account.heldUsd += fromUsd
      if (fromAllowance > 0) {
        account.allowanceHeld.set(day, (account.allowanceHeld.get(day) ?? 0) + fromAllowance)
        append(account, now, {
          kind: "hold",
          reference: input.reference,
          currency: "DIEM",
          delta: Money.zero,
          held: created.hold.fromAllowance
        })
      }
      if (fromUsd > 0 || fromAllowance === 0) {
        append(account, now, { kind: "hold", reference: input.reference, currency: "USD", delta: Money.zero, held: created.hold.fromUsd })
      }
      return { ...created.hold, before }
    }

    const capture = (input: CaptureInput, now: number): Settlement | LedgerError => {
      const invalid = checkAmount(input.amount, true)
      if (invalid !== undefined) return invalid
      const account = peek(input.accountId)
      sweep(account, now)
      const held = account.holds.get(input.reference)
      if (held === undefined) return fail("UnknownHold", `No hold ${input.reference}`)
      if (held.state === "captured" && held.settlement !== undefined) {
        return { ...held.settlement, balance: balanceOf(account, now) }
      }
      if (held.state !== "open") return fail("HoldClosed", `Hold ${input.reference} was released`)
      if (input.amount > held.hold.amount) {
        return fail("ExceedsHold", `Capture of ${input.amount} exceeds the hold of ${held.hold.amount}`)
      }
      const funded = isFundedHold(input.reference)
      const settlement = split(input.amount, held.hold.fromAllowance, funded)
      const { fromAllowance, fromUsd } = settlement
      held.state = "captured"
      held.settlement = settlement
      const entries = closeHold(account, now, held, fromAllowance, fromUsd)
      const charged = entries.filter((entry) => entry.delta < 0)
      for (const entry of charged.length > 0 ? charged : entries.slice(-1)) {
        account.usage.push({
          ...input.usage,
          id: entry.id,
          timestamp: entry.timestamp,
          amount: funded ? input.amount : Money.unsafeNano(-entry.delta),
          currency: entry.currency
        })
      }
      trim(account.usage, now, retentionMs, maxEntries)
      return { ...held.settlement, balance: balanceOf(account, now) }
    }

    const release = (accountId: string, reference: string, now: number): Balance | LedgerError => {
      const account = peek(accountId)
      sweep(account, now)
      const held = account.holds.get(reference)
      if (held === undefined) return fail("UnknownHold", `No hold ${reference}`)
      if (held.state === "open") {
        held.state = "released"
        closeHold(account, now, held, 0, 0)
      }
      return balanceOf(account, now)
    }

    const balance = (accountId: string, now: number): Balance => {
      const account = peek(accountId)
      sweep(account, now)
      return balanceOf(account, now)
    }

    const holdState = (
      accountId: string,
      reference: string,
      now: number
    ): "open" | "released" | { readonly captured: Money.Nano } | undefined => {
      const account = accountOf(accountId)
      sweep(account, now)
      const held = account.holds.get(reference)
      if (held === undefined) return undefined
      if (held.state !== "captured") return held.state
      const settlement = held.settlement!
      return { captured: Money.unsafeNano(settlement.fromAllowance + settlement.fromUsd) }
    }

    const memory = Memory.of({ hold, capture, release, balance, holdState })
    const lift = <A>(result: A | LedgerError): Effect.Effect<A, LedgerError> =>
      result instanceof LedgerError ? Effect.fail(result) : Effect.succeed(result)

    const sweepAll = (now: number) => {
      let swept = 0
      for (const account of accounts.values()) {
        if (account.nextExpiry <= now && sweep(account, now)) swept++
      }
      return swept
    }

    const holdStats = (now: number): HoldStats => {
      const day = dayOf(now)
      let open = 0
      let held = 0
      for (const account of accounts.values()) {
        for (const hold of account.open) if (hold.state === "open") open++
        held += account.heldUsd + (account.allowanceHeld.get(day) ?? 0)
      }
      return { open, held: Money.unsafeNano(held) }
    }

    const service = CreditLedger.of({
      sweepExpired: Clock.clockWith((clock) => Effect.sync(() => sweepAll(clock.currentTimeMillisUnsafe()))),
      holdStats: Clock.clockWith((clock) => Effect.sync(() => holdStats(clock.currentTimeMillisUnsafe()))),
      topUp: credit("topup"),
      grant: credit("grant"),
      refund: credit("refund"),
      stake,
      hold: (input) => Clock.clockWith((clock) => lift(hold(input, clock.currentTimeMillisUnsafe()))),
      capture: (input) => Clock.clockWith((clock) => lift(capture(input, clock.currentTimeMillisUnsafe()))),
      release: (accountId, reference) => Clock.clockWith((clock) => lift(release(accountId, reference, clock.currentTimeMillisUnsafe()))),
      balance: (accountId) => Clock.clockWith((clock) => Effect.succeed(balance(accountId, clock.currentTimeMillisUnsafe()))),
      journal: (accountId, options) =>
        Effect.sync(() => {
          const journal = peek(accountId).journal
          const start = options.after === undefined ? 0 : upperBound(journal, options.after)
          return journal.slice(start, start + options.limit)
        }),
      usage: (accountId, query) => Effect.sync(() => pageOf(peek(accountId).usage, query)),
      usageOffset: (accountId, query) =>
        Effect.sync(() => {
          const all = pageOf(peek(accountId).usage, { ...query, limit: Number.MAX_SAFE_INTEGER }).entries
          return { entries: all.slice(query.offset, query.offset + query.limit), total: all.length }
        })
    })
    return Context.make(CreditLedger, service).pipe(Context.add(Memory, memory))
  })

/**
 * The memory ledger with the default retention (90 days, 10,000 entries per account).
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<CreditLedger | Memory> = layerMemoryWith()
