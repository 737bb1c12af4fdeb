/**
 * `GET /x402/transactions/:walletAddress`: a wallet's money movements, newest first, in the
 * published reference's shape, each with the USD balance after it. The wallet itself reads its own
 * (SIGN-IN-WITH-X); an ADMIN key of an operator account reads any; anyone else is refused.
 *
 * **Details**
 *
 * The movements are top-ups (`TOP_UP`, with the credit reference and the hash of the transaction
 * that paid, from `TopUpTransactions`), operator grants (`GRANT`), charges (`CHARGE`, with the
 * request id and model of the usage entry the capture wrote) and refunds (`REFUND`). Pages are
 * keyset: `nextCursor` names the last entry shown, so a page never shifts while the wallet keeps
 * paying. The published reference's `offset`, and the 1-based `page` of the spec's paginated
 * endpoints (with their `x-pagination-*` headers), page the same list for clients written against
 * those.
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, Principal, TopUpTransactions, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Option, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"
import { BillingOptions } from "./Billing.ts"
import * as X402Route from "./X402.ts"

/** @category schemas */
export const TransactionsQuery = Schema.Struct({
  limit: Schema.optionalKey(Schema.FiniteFromString.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isBetween({ minimum: 1, maximum: 100 }, { message: "must be between 1 and 100" })
  )),
  cursor: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^\d+-\d+$/, { message: "is not a cursor this endpoint issued" }))),
  offset: Schema.optionalKey(Schema.FiniteFromString.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isGreaterThanOrEqualTo(0, { message: "must be 0 or more" })
  )),
  page: Schema.optionalKey(Schema.FiniteFromString.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isGreaterThanOrEqualTo(1, { message: "must be 1 or more" })
  ))
})

const TYPES: Partial<Record<CreditLedger.EntryKind, string>> = { topup: "TOP_UP", grant: "GRANT", capture: "CHARGE", refund: "REFUND" }

/** Journal ids compare by their time, then their sequence. */
const before = (a: string, b: string) => {
  const [am, as] = a.split("-").map(Number) as [number, number]
  const [bm, bs] = b.split("-").map(Number) as [number, number]
  return am < bm || (am === bm && as < bs)
}

/** @category routes */
export const transactions = Route.make(
  "GET",
  "/api/v1/x402/transactions/:walletAddress",
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    const topUps = yield* TopUpTransactions.TopUpTransactions
    const { operatorAccountIds } = yield* BillingOptions
    return Effect.gen(function*() {
      const params = yield* Route.params
      const wallet = X402.parseWalletAddress(params["walletAddress"] ?? "")
      if (Option.isNone(wallet)) {
        return yield* Errors.invalidField("walletAddress", "must be an EVM address (0x + 40 hex) or a Solana address (base58)")
      }
      const request = yield* HttpServerRequest.HttpServerRequest
      const found = yield* auth.authenticate(request.headers)
      if (Option.isNone(found))
        return yield* new Errors.Unauthenticated({ message: "Sign in with the wallet (SIGN-IN-WITH-X), or use an operator's ADMIN key" })
      const accountId = Principal.walletAccountId(wallet.value.family, wallet.value.address)
      const principal = found.value
      const allowed = principal._tag === "Wallet"
        ? principal.accountId === accountId
        : principal.keyType === "ADMIN" && operatorAccountIds.includes(principal.accountId)
      if (!allowed) return yield* new Errors.Forbidden({ message: "Only the wallet itself or an operator may read its transactions" })
      const query = yield* RequestQuery.schema(TransactionsQuery)
      if ([query.cursor, query.offset, query.page].filter((given) => given !== undefined).length > 1) {
        return yield* Errors.invalidField("offset", "give one of cursor, offset and page")
      }
      const limit = query.limit ?? 50

      // The whole journal, to know the balance after each entry: what the retention dropped is
      // folded into the balance, which the running total is aligned to.
      const journal = yield* Stream.runCollect(CreditLedger.journalStream(ledger, accountId))
      const balance = yield* ledger.balance(accountId)
      const moves = journal.filter((entry) => entry.currency === "USD" && entry.delta !== 0 && TYPES[entry.kind] !== undefined)
      const paid = yield* Stream.runCollect(CreditLedger.usageStream(ledger, accountId, { order: "asc", currency: "USD" }))
      const charges = new Map(paid.map((entry) => [entry.id, entry]))
      let running = balance.usd - journal.reduce((sum, entry) => entry.currency === "USD" ? sum + entry.delta : sum, 0)
      const balanceAfter = new Map<string, number>()
      for (const entry of journal) {
        if (entry.currency !== "USD") continue
        running += entry.delta
        balanceAfter.set(entry.id, running)
      }
      const newest = moves.reverse()
      // Where the page starts in the newest-first list: after the cursor's entry, or at the offset.
      const afterCursor = (cursor: string) => {
        const index = newest.findIndex((entry) => before(entry.id, cursor))
        return index === -1 ? newest.length : index
      }
      const at = query.cursor !== undefined ? afterCursor(query.cursor) : query.offset ?? ((query.page ?? 1) - 1) * limit
      const page = newest.slice(at, at + limit)
      const hasMore = newest.length > at + limit
      const hashes = yield* topUps.read(accountId, page.flatMap((entry) => entry.kind === "topup" ? [entry.reference] : []))
      return HttpServerResponse.jsonUnsafe({
        success: true,
        data: {
          walletAddress: wallet.value.address,
          currentBalance: Money.toUsdNumber(balance.availableUsd),
          transactions: page.map((entry) => {
            const usage = charges.get(entry.id)
            return {
              id: entry.id,
              amount: Money.toUsdNumber(entry.delta),
              balanceAfter: Money.toUsdNumber(Money.unsafeNano(balanceAfter.get(entry.id)!)),
              type: TYPES[entry.kind]!,
              createdAt: new Date(entry.timestamp).toISOString(),
              requestId: usage?.requestId ?? null,
              modelId: usage === undefined ? null : usage.sku.slice(usage.sku.indexOf(":") + 1),
              reference: entry.reference,
              transactionHash: hashes.get(entry.reference) ?? null
            }
          }),
          pagination: { limit, offset: at, hasMore, nextCursor: hasMore ? page.at(-1)!.id : null }
        }
      }, {
        headers: {
          "cache-control": "no-store",
          "x-pagination-limit": String(limit),
          "x-pagination-page": String(Math.floor(at / limit) + 1),
          "x-pagination-total": String(newest.length),
          "x-pagination-total-pages": String(Math.ceil(newest.length / limit))
        }
      })
    })
  }),
  {
    summary: "A wallet's top-ups, grants, charges and refunds",
    description: "The wallet signed in with SIGN-IN-WITH-X, or an ADMIN key of an operator account. Newest first; pass " +
      "`pagination.nextCursor` as `cursor` for the next page (a page that never shifts), or page by `offset` or a 1-based `page`.",
    tags: [X402Route.tag],
    security: "key",
    query: TransactionsQuery,
    responses: {
      200: {
        description: "A page of the wallet's transactions",
        headers: ["x-pagination-limit", "x-pagination-page", "x-pagination-total", "x-pagination-total-pages"]
      },
      400: { description: "Invalid wallet address or query", schema: Errors.DetailedError },
      401: { description: "No credentials", schema: Errors.StandardError },
      403: { description: "Another wallet, or a key that is not an operator's ADMIN key", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [transactions] as const
