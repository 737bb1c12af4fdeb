/**
 * `GET /audit_log`: the audit log of key management (`AuditLog`), newest first, a page at a time.
 * An account's ADMIN key reads its own account's entries; an ADMIN key of an operator account
 * (`TOLLGATE_OPERATOR_ACCOUNTS`) reads every entry with `scope=all`.
 *
 * @since 0.1.0
 */
import { AuditLog, Errors } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"
import { BillingOptions } from "./Billing.ts"

/** @category schemas */
export const Query = Schema.Struct({
  limit: Schema.optionalKey(Schema.FiniteFromString.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isBetween({ minimum: 1, maximum: AuditLog.MAX_PAGE }, { message: `must be between 1 and ${AuditLog.MAX_PAGE}` })
  )),
  /** The `next` of the previous page. */
  before: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(/^\d{1,20}-\d{1,20}$/u, { message: "must be the next of a previous page" }))
  ),
  /** `account` (the default): the caller's account; `all`: every entry, for operators. */
  scope: Schema.optionalKey(Schema.Literals(["account", "all"]))
})

const wire = (entry: AuditLog.Entry) => ({
  id: entry.id,
  at: entry.at.toISOString(),
  actor: entry.actor,
  action: entry.action,
  accountId: entry.accountId ?? null,
  details: entry.details
})

/** @category routes */
export const list = Route.make(
  "GET",
  "/api/v1/audit_log",
  Effect.gen(function*() {
    const auth = yield* Auth
    const log = yield* AuditLog.AuditLog
    const { operatorAccountIds } = yield* BillingOptions
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const query = yield* RequestQuery.schema(Query)
      const all = query.scope === "all"
      if (all && !operatorAccountIds.includes(principal.accountId)) {
        return yield* new Errors.Forbidden({ message: "Only operator accounts may read every account's audit log" })
      }
      const page = yield* log.list({
        accountId: all ? undefined : principal.accountId,
        before: query.before,
        limit: query.limit ?? 50
      })
      return HttpServerResponse.jsonUnsafe({ data: page.entries.map(wire), next: page.next ?? null }, {
        headers: { "cache-control": "no-store" }
      })
    })
  }),
  {
    summary: "The audit log of key management",
    description:
      "ADMIN key. Who minted, rerolled, revoked, capped or restricted keys, granted credits or changed rate limits, and when: the account's own entries, or, with `scope=all` and an operator account's ADMIN key, every entry (with the signing keys each server started with). Newest first; pass `next` as `before` for the next page.",
    tags: ["API keys"],
    security: "admin",
    query: Query,
    responses: {
      200: { description: "A page of entries (`data`) and the cursor of the next (`next`)" },
      400: { description: "Invalid query parameters", schema: Errors.DetailedError },
      403: { description: "scope=all without an operator account's ADMIN key", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [list] as const
