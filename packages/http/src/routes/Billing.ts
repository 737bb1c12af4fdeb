/**
 * The billing endpoints (beta), all for ADMIN keys, all read from the credit ledger's journal; a
 * wallet signed in with SIGN-IN-WITH-X reads its own usage history and balance as well (its account
 * is its own, so an agent paying from its credit over MCP sees what it spent):
 *
 * - `GET /billing/usage` (deprecated): offset pages of usage entries as JSON or CSV (`Accept:
 *   text/csv`), with `x-pagination-*`, `Deprecation`, `Sunset` and a `Link` to its successor;
 *   accounts created on or after the cutoff (2026-07-07) get 410; 5 requests per minute per user.
 * - `GET /billing/usage-history`: keyset pages behind an opaque cursor; a page never shifts while
 *   new entries arrive, and its cost does not grow with the history.
 * - `GET /billing/usage-analytics`: the same entries added up by day, sku, model and key.
 * - `GET /billing/balance` (any key of the account): what the account may spend, in USD and from
 *   today's staked allowance.
 * - `POST /billing/credits`: an operator grants credit to an account, once per reference.
 * - `POST /billing/refunds`: an operator refunds a charged call to its account, once per call.
 *
 * Bad query parameters are a 400 DetailedError naming every bad field.
 *
 * @since 0.1.0
 */
import { AuditLog, CreditLedger, Errors, Money, Refunds, Usage, UsageAnalytics } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { RateLimiter } from "@tollgate/core/RateLimiter"
import { Clock, Context, Effect, Option, Result, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import { LimitPolicy } from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

/**
 * What the billing endpoints are configured with.
 *
 * @category models
 */
export interface Options {
  /** Accounts created at or after this instant get 410 from the deprecated usage endpoint. */
  readonly usageCutoff: Date
  /** Sent as `Sunset` on the deprecated endpoint. */
  readonly usageSunset: Date
  /** Accounts whose ADMIN keys may grant credits and refund calls (of any account); nobody else may. */
  readonly operatorAccountIds: ReadonlyArray<string>
}

/**
 * The spec's values: accounts created on or after 2026-07-07 get 410 from the deprecated report;
 * nobody may grant credits until operators are named.
 *
 * @category options
 */
export const defaultOptions: Options = {
  usageCutoff: new Date("2026-07-07T00:00:00Z"),
  usageSunset: new Date("2027-01-01T00:00:00Z"),
  operatorAccountIds: []
}

/**
 * The billing options; provide another value to change them.
 *
 * @category references
 */
export const BillingOptions = Context.Reference<Options>("@tollgate/http/routes/Billing/Options", {
  defaultValue: () => defaultOptions
})

const INVALID_QUERY = "Invalid query parameters"

const DEPRECATION_NOTICE = "GET /api/v1/billing/usage is deprecated and will be removed; use GET /api/v1/billing/usage-history"

const IsoDate = RequestQuery.IsoDate

const PageSize = RequestQuery.DecimalInteger.check(
  Schema.isInt({ message: "must be an integer" }),
  Schema.isBetween({ minimum: 1, maximum: 500 }, { message: "must be between 1 and 500" })
)

const Filters = {
  currency: Schema.optionalKey(Schema.Literals(Usage.currencies)),
  startDate: Schema.optionalKey(IsoDate),
  endDate: Schema.optionalKey(IsoDate),
  limit: Schema.optionalKey(PageSize),
  sortOrder: Schema.optionalKey(Schema.Literals(["asc", "desc"]))
}

/** @category schemas */
export const UsageQuery = Schema.Struct({
  ...Filters,
  page: Schema.optionalKey(RequestQuery.DecimalInteger.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isGreaterThanOrEqualTo(1, { message: "must be at least 1" })
  ))
})

/** @category schemas */
export const UsageHistoryQuery = Schema.Struct({
  ...Filters,
  cursor: Schema.optionalKey(Schema.String)
})

/** The ids accounts are created with (`Auth.createAccount`), wallets' included. */
const ACCOUNT_ID = /^[A-Za-z0-9_.:-]{1,128}$/u

/** A wallet's account id (`Principal.walletAccountId`): its account exists once it has credit. */
const WALLET_ACCOUNT_ID = /^wallet:(?:evm:0x[0-9a-f]{40}|solana:[1-9A-HJ-NP-Za-km-z]{32,44})$/u

/** @category schemas */
export const GrantRequest = Schema.Struct({
  accountId: Schema.String.check(Schema.isPattern(ACCOUNT_ID, { message: "must match [A-Za-z0-9_.:-]{1,128}" })),
  amountUsd: Schema.String.check(Schema.makeFilter((text: string) => {
    const parsed = Money.parseUsd(text)
    return Result.isSuccess(parsed) && parsed.success > 0 ? true : "must be a positive decimal amount of USD with at most 9 decimals"
  })),
  reference: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_:.-]{1,200}$/u, { message: "must match [A-Za-z0-9_:.-]{1,200}" }))
})

const DAY_MS = 86_400_000

/** The longest lookback of usage analytics, in days. */
const MAX_LOOKBACK_DAYS = 90

const PlainDate = Schema.String.check(
  Schema.makeFilter((text: string) =>
    /^\d{4}-\d{2}-\d{2}$/.test(text) && !Number.isNaN(Date.parse(text)) ? true : "must be a date, YYYY-MM-DD"
  )
)

/** @category schemas */
export const UsageAnalyticsQuery = Schema.Struct({
  lookback: Schema.optionalKey(Schema.String.check(Schema.makeFilter((text: string) => {
    const days = /^[1-9]\d*d$/.test(text) ? Number(text.slice(0, -1)) : 0
    return days >= 1 && days <= MAX_LOOKBACK_DAYS ? true : `must be 1d to ${MAX_LOOKBACK_DAYS}d`
  }))),
  startDate: Schema.optionalKey(PlainDate),
  endDate: Schema.optionalKey(PlainDate)
})

/** The time range of the filters, checked for order. */
const rangeOf = (query: { readonly startDate?: string; readonly endDate?: string }) => {
  const from = query.startDate === undefined ? undefined : Date.parse(query.startDate)
  const to = query.endDate === undefined ? undefined : Date.parse(query.endDate)
  if (from !== undefined && to !== undefined && from > to) {
    return Effect.fail(
      new Errors.InvalidRequest({
        message: INVALID_QUERY,
        details: Errors.fieldErrors([{ path: ["endDate"], message: "must not be before startDate" }])
      })
    )
  }
  return Effect.succeed({ from, to })
}

const ledgerCurrency = (currency: Usage.QueryCurrency | undefined): CreditLedger.Currency | "none" | undefined =>
  currency === undefined ? undefined : currency === "USD" || currency === "DIEM" ? currency : "none"

const httpDate = (date: Date) => date.toUTCString()

/** @category routes */
export const usage = Route.make(
  "GET",
  "/api/v1/billing/usage",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    const limiter = yield* RateLimiter
    const policy = yield* LimitPolicy
    const options = yield* BillingOptions
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const deprecation = {
        deprecation: `@${Math.floor(options.usageCutoff.getTime() / 1000)}`,
        sunset: httpDate(options.usageSunset),
        link: "</api/v1/billing/usage-history>; rel=\"successor-version\""
      }
      const account = yield* auth.getAccount(principal.accountId)
      if (Option.isSome(account) && account.value.createdAt.getTime() >= options.usageCutoff.getTime()) {
        return yield* new Errors.Gone({
          message: `${DEPRECATION_NOTICE}. It is not available to accounts created on or after ${
            options.usageCutoff.toISOString().slice(0, 10)
          }.`
        })
      }
      const request = yield* HttpServerRequest.HttpServerRequest
      const query = yield* RequestQuery.schema(UsageQuery, INVALID_QUERY)
      const { from, to } = yield* rangeOf(query)
      const admission = yield* limiter.admit(policy.limitsFor(principal, { kind: "billing_usage" }))
      const limit = query.limit ?? 200
      const page = query.page ?? 1
      const currency = ledgerCurrency(query.currency)
      const result = currency === "none"
        ? { entries: [], total: 0 }
        : yield* ledger.usageOffset(principal.accountId, {
          from,
          to,
          currency,
          order: query.sortOrder ?? "desc",
          limit,
          offset: (page - 1) * limit
        })
      const headers = {
        ...admission.headers,
        ...deprecation,
        "x-pagination-limit": String(limit),
        "x-pagination-page": String(page),
        "x-pagination-total": String(result.total),
        "x-pagination-total-pages": String(Math.ceil(result.total / limit))
      }
      const accept = request.headers["accept"] ?? ""
      if (/\btext\/csv\b/i.test(accept)) {
        return HttpServerResponse.text(Usage.toCsv(result.entries), {
          contentType: "text/csv; charset=utf-8",
          headers: { ...headers, "content-disposition": "attachment; filename=\"usage.csv\"" }
        })
      }
      return HttpServerResponse.jsonUnsafe({ warning: DEPRECATION_NOTICE, data: result.entries.map(Usage.toWire) }, { headers })
    })
  }),
  {
    summary: "Usage entries, page by page (deprecated)",
    description:
      `${DEPRECATION_NOTICE}. JSON or CSV by Accept. 410 for accounts created on or after 2026-07-07. 5 requests per minute per user.`,
    tags: ["Billing"],
    security: "admin",
    query: UsageQuery,
    deprecated: true,
    responses: {
      200: {
        description: "Usage entries",
        headers: [
          "x-pagination-limit",
          "x-pagination-page",
          "x-pagination-total",
          "x-pagination-total-pages",
          "deprecation",
          "sunset",
          "link"
        ]
      },
      400: { description: "Invalid query parameters", schema: Errors.DetailedError },
      410: { description: "Not available to accounts created on or after 2026-07-07", schema: Errors.StandardError },
      429: { description: "More than 5 requests in a minute", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const usageHistory = Route.make(
  "GET",
  "/api/v1/billing/usage-history",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireOwner(auth)
      const query = yield* RequestQuery.schema(UsageHistoryQuery, INVALID_QUERY)
      const { from, to } = yield* rangeOf(query)
      const order = query.sortOrder ?? "desc"
      const cursor = query.cursor === undefined ? undefined : Usage.decodeCursor(query.cursor)
      if (query.cursor !== undefined && (cursor === undefined || cursor.order !== order)) {
        return yield* new Errors.InvalidRequest({
          message: INVALID_QUERY,
          details: Errors.fieldErrors([{
            path: ["cursor"],
            message: cursor === undefined ? "is not a cursor this endpoint issued" : "was issued for the other sortOrder"
          }])
        })
      }
      const limit = query.limit ?? 200
      const currency = ledgerCurrency(query.currency)
      const page: CreditLedger.UsagePage = currency === "none"
        ? { entries: [] }
        : yield* ledger.usage(principal.accountId, { from, to, currency, order, limit, after: cursor?.id })
      return HttpServerResponse.jsonUnsafe({
        data: page.entries.map(Usage.toWire),
        nextCursor: page.next === undefined ? null : Usage.encodeCursor(order, page.next),
        hasMore: page.next !== undefined
      }, { headers: { "x-pagination-limit": String(limit) } })
    })
  }),
  {
    summary: "Usage entries behind a cursor",
    description: "Keyset pagination: pass `nextCursor` as `cursor` for the next page (with the same sortOrder). " +
      "A page never shifts while new entries arrive. A wallet signed in with SIGN-IN-WITH-X reads its own.",
    tags: ["Billing"],
    security: "admin",
    wallets: true,
    query: UsageHistoryQuery,
    responses: {
      200: { description: "A page of usage entries and the cursor of the next" },
      400: { description: "Invalid query parameters", schema: Errors.DetailedError }
    }
  }
)

/** The ADMIN key of an operator account, or a 403 saying who may `action`. */
const requireOperator = (auth: Auth["Service"], options: Options, action: string) =>
  Effect.gen(function*() {
    const principal = yield* Authenticate.requireAdmin(auth)
    if (!options.operatorAccountIds.includes(principal.accountId)) {
      return yield* new Errors.Forbidden({
        message: `Only operator accounts may ${action}: the server lists them in TOLLGATE_OPERATOR_ACCOUNTS`
      })
    }
    return principal
  })

/** @category schemas */
export const RefundRequest = Schema.Struct({
  accountId: GrantRequest.fields.accountId,
  requestId: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_:.-]{1,200}$/u, { message: "must match [A-Za-z0-9_:.-]{1,200}" })),
  amountUsd: Schema.optionalKey(GrantRequest.fields.amountUsd),
  reason: Schema.String.check(
    Schema.isMinLength(1, { message: "must be 1 to 500 characters" }),
    Schema.isMaxLength(500, { message: "must be 1 to 500 characters" })
  )
})

/**
 * `POST /billing/refunds`: an operator refunds a charged call (`Refunds.refundCall`): the whole USD
 * charge, or `amountUsd` of it, once per call. The reason goes to the log with the refund.
 *
 * @category routes
 */
export const refundCall = Route.make(
  "POST",
  "/api/v1/billing/refunds",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    const options = yield* BillingOptions
    return Effect.gen(function*() {
      const principal = yield* requireOperator(auth, options, "refund calls")
      const body = yield* RequestBody.schema(RefundRequest)
      const refund = yield* Refunds.refundCall(ledger, {
        accountId: body.accountId,
        requestId: body.requestId,
        amount: body.amountUsd === undefined ? undefined : Result.getOrThrow(Money.parseUsd(body.amountUsd))
      })
      yield* Effect.logInfo("refund").pipe(Effect.annotateLogs({
        operator: principal.accountId,
        accountId: refund.accountId,
        requestId: refund.requestId,
        amountUsd: Money.formatUsd(refund.amount),
        entryId: refund.receipt.entry.id,
        reason: body.reason
      }))
      return HttpServerResponse.jsonUnsafe({
        accountId: refund.accountId,
        requestId: refund.requestId,
        amountUsd: Money.formatUsd(refund.amount),
        chargedUsd: Money.formatUsd(refund.charged),
        reference: refund.receipt.entry.reference,
        entryId: refund.receipt.entry.id,
        balanceUsd: Money.formatUsd(refund.receipt.balance.usd)
      })
    })
  }),
  {
    summary: "Refund a charged call (operators)",
    description: "ADMIN key of an operator account. Credits the account with the call's USD charge (`requestId`: its `x-request-id`), " +
      "or `amountUsd` of it. A call is refunded once: a retry answers the same refund; what the staked allowance paid is not refunded.",
    tags: ["Billing"],
    security: "admin",
    request: { contentType: "application/json", schema: RefundRequest },
    responses: {
      200: { description: "The refund and the account's new balance" },
      400: {
        description:
          "Invalid body, an amount above the call's USD charge, a call charged nothing in USD, or a call already refunded another amount",
        schema: Errors.DetailedError
      },
      403: { description: "Not an operator's ADMIN key", schema: Errors.StandardError },
      404: { description: "The account has no charge with this request id", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const grantCredits = Route.make(
  "POST",
  "/api/v1/billing/credits",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    const options = yield* BillingOptions
    const log = Option.getOrUndefined(yield* Effect.serviceOption(AuditLog.AuditLog))
    return Effect.gen(function*() {
      const principal = yield* requireOperator(auth, options, "grant credits")
      const body = yield* RequestBody.schema(GrantRequest)
      if (!WALLET_ACCOUNT_ID.test(body.accountId) && Option.isNone(yield* auth.getAccount(body.accountId))) {
        return yield* new Errors.InvalidRequest({
          message: "Unknown account",
          details: Errors.fieldErrors([{ path: ["accountId"], message: "is not the id of an existing account or a wallet" }])
        })
      }
      const amount = Result.getOrThrow(Money.parseUsd(body.amountUsd))
      const receipt = yield* ledger.grant({ accountId: body.accountId, amount, reference: `grant:${body.reference}` }).pipe(
        Effect.catchTag("LedgerError", (error): Effect.Effect<never, Errors.ApiError> =>
          error.reason === "ReferenceConflict"
            ? Effect.fail(new Errors.Conflict({ message: "This reference was already used for another grant" }))
            : Effect.fail(new Errors.InvalidRequest({ message: error.message })))
      )
      if (log !== undefined) {
        yield* log.append({
          actor: `key:${principal.keyId}`,
          action: "credits.granted",
          accountId: body.accountId,
          details: { amountUsd: Money.formatUsd(amount), reference: body.reference, byAccount: principal.accountId }
        })
      }
      return HttpServerResponse.jsonUnsafe({
        accountId: body.accountId,
        amountUsd: Money.formatUsd(amount),
        reference: body.reference,
        entryId: receipt.entry.id,
        balanceUsd: Money.formatUsd(receipt.balance.usd)
      })
    })
  }),
  {
    summary: "Grant credits to an account (operators)",
    description: "ADMIN key of an operator account. Applied once per `reference`: a retry answers the same grant.",
    tags: ["Billing"],
    security: "admin",
    request: { contentType: "application/json", schema: GrantRequest },
    responses: {
      200: { description: "The grant and the account's new balance" },
      400: {
        description: "Invalid body, an account that does not exist, or a grant that would take the balance past the maximum",
        schema: Errors.DetailedError
      },
      403: { description: "Not an operator's ADMIN key", schema: Errors.StandardError },
      409: { description: "The reference was used for a different grant", schema: Errors.StandardError }
    }
  }
)

/**
 * `GET /billing/usage-analytics`: whole UTC days from `startDate` to `endDate` (both or neither), or
 * the last `lookback` days (default 7d, at most 90d), read page by page from the same usage entries
 * as `usage-history`.
 *
 * @category routes
 */
export const usageAnalytics = Route.make(
  "GET",
  "/api/v1/billing/usage-analytics",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const query = yield* RequestQuery.schema(UsageAnalyticsQuery, INVALID_QUERY)
      if ((query.startDate === undefined) !== (query.endDate === undefined)) {
        return yield* new Errors.InvalidRequest({
          message: INVALID_QUERY,
          details: Errors.fieldErrors([{
            path: [query.startDate === undefined ? "startDate" : "endDate"],
            message: "startDate and endDate go together"
          }])
        })
      }
      const now = yield* Clock.currentTimeMillis
      const lookback = query.startDate === undefined ? query.lookback ?? "7d" : `${query.startDate}:${query.endDate}`
      const days = query.startDate === undefined ? undefined : yield* rangeOf(query)
      // Whole days: the range ends at the last millisecond of endDate (the ledger's `to` is inclusive).
      const { from, to } = days === undefined
        ? { from: now - Number(lookback.slice(0, -1)) * DAY_MS, to: now }
        : { from: days.from, to: days.to! + DAY_MS - 1 }
      const entries = yield* Stream.runCollect(CreditLedger.usageStream(ledger, principal.accountId, { from, to, order: "asc" }))
      const keys = new Map((yield* auth.listKeys(principal.accountId)).map((key) => [key.id, key.description]))
      return HttpServerResponse.jsonUnsafe(UsageAnalytics.report(lookback, entries, keys), { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "Usage totals by day, sku, model and key",
    description: "ADMIN key. Whole UTC days from `startDate` to `endDate` (YYYY-MM-DD, both or neither), or the last `lookback` days " +
      "(`7d` by default, at most `90d`). Added up from the same usage entries as `usage-history`, so the totals equal its amounts to the nano-USD.",
    tags: ["Billing"],
    security: "admin",
    query: UsageAnalyticsQuery,
    responses: {
      200: { description: "The totals" },
      400: { description: "Invalid query parameters", schema: Errors.DetailedError }
    }
  }
)

/**
 * `GET /billing/balance`, in the published reference's shape: the USD left to spend (what open
 * holds reserve is not), and the staked-token allowance left today (`balances.diem`, null without
 * stake) out of the day's allocation.
 *
 * @category routes
 */
export const balance = Route.make(
  "GET",
  "/api/v1/billing/balance",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAccount(auth)
      const current = yield* ledger.balance(principal.accountId)
      const staking = current.stakedTokens > 0
      return HttpServerResponse.jsonUnsafe({
        canConsume: current.availableUsd > 0 || current.availableAllowance > 0,
        consumptionCurrency: current.availableAllowance > 0 ? "DIEM" : current.availableUsd > 0 ? "USD" : null,
        balances: {
          diem: staking ? Money.toUsdNumber(current.availableAllowance) : null,
          usd: Money.toUsdNumber(current.availableUsd)
        },
        diemEpochAllocation: current.stakedTokens
      }, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "The account's balance",
    description: "Any API key of the account. `balances.usd` is what new calls may spend (open holds excluded); " +
      "`balances.diem` the staked-token allowance left today (null without stake), out of `diemEpochAllocation`. " +
      "A wallet signed in with SIGN-IN-WITH-X reads its own credit.",
    tags: ["Billing"],
    security: "key",
    wallets: true,
    responses: { 200: { description: "The balance" } }
  }
)

/** @category routes */
export const routes = [usage, usageHistory, usageAnalytics, grantCredits, refundCall, balance] as const
