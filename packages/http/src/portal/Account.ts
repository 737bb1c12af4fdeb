/**
 * What a signed-in customer sees and changes of the account: the balance, the staked-token
 * allowance and the credits of the last 30 days, the API keys (made, capped, restricted, revoked),
 * and the spend by day and sku with the latest calls. They call the same services as the key and
 * billing endpoints and answer keys as `/api_keys` does.
 *
 * @since 0.1.0
 */
import { AuditLog, CreditLedger, Errors, KeyCaps, KeyRestrictions, Money, Principal, Staking, Usage, UsageAnalytics } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Clock, Effect, Option, Schema, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as ApiKeys from "../routes/ApiKeys.ts"
import type * as PortalSession from "./Session.ts"
import { API, CHANGE, noStore, sessionDocs, sessionRoute } from "./SessionRoute.ts"

/** How far back the usage chart and the transactions reach. @category constants */
export const WINDOW_DAYS = 30

/** Calls listed in the usage table, newest first. @category constants */
export const RECENT_CALLS = 50

/** Top-ups, grants and refunds listed, newest first. @category constants */
export const RECENT_TRANSACTIONS = 20

/** The most entries read for one answer: the ledger's default memory cap per account. */
const MAX_ENTRIES = CreditLedger.DEFAULT_MAX_ENTRIES

/** The credits; a stake is shown as the allowance it gives, not as a line. */
const transactionKinds: ReadonlySet<CreditLedger.EntryKind> = new Set(["topup", "grant", "refund"])

/**
 * The journal entries since `since`, oldest first, at most `MAX_ENTRIES`. Journal ids start with
 * their millisecond, so a window starts at an id.
 */
const journalSince = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, since: number) =>
  CreditLedger.journalStream(ledger, accountId, `${since}-0`).pipe(Stream.take(MAX_ENTRIES), Stream.runCollect)

/**
 * The latest credits of the window, newest first. The journal reads forward only and mostly holds
 * the holds and captures of calls, so the last day is read first: a busy account whose 30 days
 * exceed what one read takes still sees today's top-ups; the whole window is read only when the
 * day has too few.
 */
const recentCredits = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, now: number) =>
  Effect.gen(function*() {
    const credits = new Map<string, CreditLedger.JournalEntry>()
    for (const days of [1, WINDOW_DAYS]) {
      for (const entry of yield* journalSince(ledger, accountId, now - days * CreditLedger.DAY_MS)) {
        if (transactionKinds.has(entry.kind)) credits.set(entry.id, entry)
      }
      if (credits.size >= RECENT_TRANSACTIONS) break
    }
    return [...credits.values()].sort((a, b) => CreditLedger.compareIds(b.id, a.id)).slice(0, RECENT_TRANSACTIONS)
  })

/**
 * `GET /api/v1/portal/account`: the balance, today's staked-token allowance (read from chain first
 * for a wallet, as a paid call would) and the credits of the last 30 days.
 *
 * @category routes
 */
export const account = sessionRoute(
  "GET",
  `${API}/account`,
  false,
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    const staking = yield* Staking.Staking
    return (current) =>
      Effect.gen(function*() {
        if (current.wallet !== undefined) {
          yield* staking.refresh(new Principal.WalletPrincipal({ accountId: current.accountId, ...current.wallet }))
        }
        const now = yield* Clock.currentTimeMillis
        const balance = yield* ledger.balance(current.accountId)
        const transactions = yield* recentCredits(ledger, current.accountId, now)
        return HttpServerResponse.jsonUnsafe({
          accountId: current.accountId,
          balanceUsd: Money.formatUsd(balance.usd),
          availableUsd: Money.formatUsd(balance.availableUsd),
          stakedTokens: balance.stakedTokens,
          allowanceUsd: Money.formatUsd(balance.availableAllowance),
          transactions: transactions.map((entry) => ({
            id: entry.id,
            timestamp: new Date(entry.timestamp).toISOString(),
            kind: entry.kind,
            amountUsd: Money.formatUsd(entry.delta),
            currency: entry.currency,
            reference: entry.reference
          }))
        }, { headers: noStore })
      })
  }),
  sessionDocs("The account's balance and credits", ".", { 200: { description: "Balance, allowance and the last credits" } })
)

/** @category routes */
export const listKeys = sessionRoute(
  "GET",
  `${API}/keys`,
  false,
  Effect.gen(function*() {
    const auth = yield* Auth
    const caps = yield* KeyCaps.KeyCaps
    return (current) =>
      Effect.gen(function*() {
        const keys = yield* auth.listKeys(current.accountId)
        const spend = yield* caps.read(current.accountId, keys.map((key) => key.id), yield* Clock.currentTimeMillis)
        return HttpServerResponse.jsonUnsafe({ data: keys.map((key) => ApiKeys.metadata(key, spend.get(key.id))) }, { headers: noStore })
      })
  }),
  sessionDocs("The account's API keys", ".", {
    200: {
      description: "Metadata of every key of the account, as `GET /api_keys` answers it: a capped key with its spend in the current period"
    }
  })
)

/** @category schemas */
export const CreateKeyRequest = Schema.Struct({
  description: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))
})

/**
 * `POST /api/v1/portal/keys`: an INFERENCE key for the signed-in account, shown once.
 *
 * @category routes
 */
export const createKey = sessionRoute(
  "POST",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    return (current) =>
      Effect.gen(function*() {
        const body = yield* RequestBody.schema(CreateKeyRequest)
        // A wallet's account is recorded with its first key (sign-in stores nothing), so only a wallet
        // that holds credit may make one: wallets that cost nothing to create leave no state behind.
        if (Principal.isWalletAccountId(current.accountId) && (yield* ledger.balance(current.accountId)).usd <= 0) {
          return yield* new Errors.InsufficientBalance({ message: "Top up this wallet before creating a key" })
        }
        const created = yield* auth.createKey({
          accountId: current.accountId,
          type: "INFERENCE",
          tier: current.tier ?? "default",
          description: body.description
        })
        return HttpServerResponse.jsonUnsafe({ ...ApiKeys.metadata(created.record, undefined), apiKey: created.key }, {
          status: 201,
          headers: noStore
        })
      })
  }),
  {
    ...sessionDocs("Create an INFERENCE key", CHANGE, {
      201: { description: "The new key (`apiKey`), shown this once, and its metadata" },
      400: { description: "Invalid body", schema: Errors.DetailedError },
      402: { description: "A wallet without credit: top up first", schema: Errors.StandardError },
      403: { description: "No CSRF token", schema: Errors.StandardError }
    }),
    request: { contentType: "application/json", schema: CreateKeyRequest }
  }
)

/** @category schemas */
export const ChangeKeyRequest = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  consumptionLimit: Schema.optionalKey(ApiKeys.ConsumptionLimit),
  limitPeriod: Schema.optionalKey(ApiKeys.LimitPeriod),
  /** Replaces the key's restrictions; `null` or `{}` lifts them. */
  restrictions: Schema.optionalKey(Schema.NullOr(KeyRestrictions.Restrictions))
})

/**
 * Who changed a key through the portal, as the audit log names them: the ADMIN key that signed in,
 * or the wallet, by its account id (`wallet:<family>:<address>`).
 */
const actorOf = (session: PortalSession.Session): AuditLog.Actor =>
  session.keyId !== undefined ? `key:${session.keyId}` : `wallet:${session.accountId.slice("wallet:".length)}`

/**
 * `PATCH /api/v1/portal/keys`: sets or removes a key's spend cap and its restrictions, with the
 * body and the service calls of `PATCH /api_keys` (those fields only): the period's spend is kept
 * when the amount changes and starts afresh when the period does; the restrictions are replaced
 * whole and recorded in the audit log.
 *
 * @category routes
 */
export const changeKey = sessionRoute(
  "PATCH",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    const caps = yield* KeyCaps.KeyCaps
    const audit = Option.getOrUndefined(yield* Effect.serviceOption(AuditLog.AuditLog))
    return (current) =>
      Effect.gen(function*() {
        const { accountId } = current
        const body = yield* RequestBody.schema(ChangeKeyRequest)
        const found = yield* auth.getKey(accountId, body.id)
        const storeCap = yield* ApiKeys.capChange(caps, accountId, found.id, body, yield* Clock.currentTimeMillis)
        const record = body.restrictions === undefined
          ? found
          : yield* auth.restrictKey(accountId, found.id, body.restrictions ?? undefined)
        const spend = yield* storeCap(found.id)
        if (body.restrictions !== undefined && audit !== undefined) {
          yield* audit.append({
            actor: actorOf(current),
            action: "key.restricted",
            accountId,
            details: { keyId: found.id, restrictions: record.restrictions ?? null }
          })
        }
        return HttpServerResponse.jsonUnsafe(ApiKeys.metadata(record, spend), { headers: noStore })
      })
  }),
  {
    ...sessionDocs("Set or remove a key's spend cap and restrictions", CHANGE, {
      200: { description: "The key's metadata with its cap (`consumptionLimits`, `limitPeriod`, `currentPeriodUsage`) and `restrictions`" },
      400: { description: "Invalid body, or a period for a key without a cap", schema: Errors.DetailedError },
      403: { description: "No CSRF token", schema: Errors.StandardError },
      404: { description: "No key with this id in the account", schema: Errors.StandardError }
    }),
    request: { contentType: "application/json", schema: ChangeKeyRequest }
  }
)

/** @category routes */
export const revokeKey = sessionRoute(
  "DELETE",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    return (current) =>
      Effect.gen(function*() {
        const query = yield* RequestQuery.schema(Schema.Struct({ id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)) }))
        yield* auth.revokeKey(current.accountId, query.id)
        return HttpServerResponse.jsonUnsafe({ id: query.id, revoked: true }, { headers: noStore })
      })
  }),
  sessionDocs("Revoke a key of the account", CHANGE, {
    200: { description: "The key is revoked" },
    403: { description: "No CSRF token", schema: Errors.StandardError },
    404: { description: "No key with this id in the account", schema: Errors.StandardError }
  })
)

/**
 * The usage of the window, newest first, at most `MAX_ENTRIES`: the entries the billing reports
 * page through.
 */
const usageSince = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, from: number) =>
  CreditLedger.usageStream(ledger, accountId, { from, order: "desc" }).pipe(Stream.take(MAX_ENTRIES), Stream.runCollect)

const dateOf = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/**
 * Spend by UTC day and sku over the window, every day present (an empty one has no skus): the
 * usage analytics' tally of the window's entries.
 *
 * @category aggregation
 */
export const spendByDay = (entries: ReadonlyArray<CreditLedger.UsageEntry>, now: number) => {
  const firstDay = CreditLedger.dayOf(now) - (WINDOW_DAYS - 1)
  const lastDay = CreditLedger.dayOf(now)
  const { byDate, bySku, skuDays } = UsageAnalytics.tally(entries.filter((entry) => {
    const day = CreditLedger.dayOf(entry.timestamp)
    return day >= firstDay && day <= lastDay
  }))
  // The chart shows what a day cost, whichever balance paid it.
  const formatUsd = (total: UsageAnalytics.Total | undefined) =>
    Money.formatUsd(Money.unsafeNano(total === undefined ? 0 : total.usd + total.diem))
  return {
    skus: [...bySku]
      .sort(([a, x], [b, y]) => y.usd + y.diem - (x.usd + x.diem) || a.localeCompare(b))
      .map(([sku, total]) => ({ sku, amountUsd: formatUsd(total) })),
    days: Array.from({ length: WINDOW_DAYS }, (_, index) => {
      const date = dateOf((firstDay + index) * CreditLedger.DAY_MS)
      return {
        date,
        amountUsd: formatUsd(byDate.get(date)),
        skus: [...skuDays.get(date) ?? []].map(([sku, total]) => ({ sku, amountUsd: formatUsd(total) }))
      }
    })
  }
}

/**
 * `GET /api/v1/portal/usage`: spend by day and sku over 30 days, and the latest calls as the
 * billing reports show them.
 *
 * @category routes
 */
export const usage = sessionRoute(
  "GET",
  `${API}/usage`,
  false,
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    return (current) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const from = (CreditLedger.dayOf(now) - (WINDOW_DAYS - 1)) * CreditLedger.DAY_MS
        const entries = yield* usageSince(ledger, current.accountId, from)
        return HttpServerResponse.jsonUnsafe({
          ...spendByDay(entries, now),
          recent: entries.slice(0, RECENT_CALLS).map(Usage.toWire)
        }, { headers: noStore })
      })
  }),
  sessionDocs("Spend by day and sku, and the latest calls", ".", {
    200: { description: "`days` (30, oldest first), `skus` by total, `recent` usage entries" }
  })
)
