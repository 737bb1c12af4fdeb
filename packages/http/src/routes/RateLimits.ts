/**
 * The caller's rate limits, for a Bearer API key: `GET /api_keys/rate_limits` lists every current
 * limit (per text model tier and per kind, with the account's and key's overrides applied) and
 * what remains of it, plus the account's balances when a `CreditLedger` is provided;
 * `GET /api_keys/rate_limit_logs` lists the account's recent requests that hit a limit.
 * `PUT /rate_limits/overrides` is the operators': it sets an account's or a key's override in the
 * store, which every instance reads with the key's standing on its next call.
 *
 * @since 0.1.0
 */
import { AuditLog, CreditLedger, Errors, Money, RateLimitLog, RateLimits } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { type RateLimiter } from "@tollgate/core/RateLimiter"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"
import { BillingOptions } from "./Billing.ts"

const Window = Schema.Struct({ limit: Schema.Int, remaining: Schema.Int, reset: Schema.Int })

/**
 * The body of `GET /api_keys/rate_limits`.
 *
 * @category schemas
 */
export const RateLimitsBody = Schema.Struct({
  accountId: Schema.String,
  keyId: Schema.String,
  tier: Schema.Literals(["default", "partner"]),
  limits: Schema.Array(Schema.Struct({
    kind: Schema.String,
    modelTier: Schema.optionalKey(Schema.Literals(["XS", "S", "M", "L"])),
    type: Schema.Literals(["user", "api_key", "global"]),
    requests: Schema.optionalKey(Window),
    tokens: Schema.optionalKey(Schema.Struct({ limit: Schema.Int, remaining: Schema.Int, resetSeconds: Schema.Int })),
    credits: Schema.optionalKey(Window)
  })),
  balances: Schema.optionalKey(Schema.Struct({
    usd: Schema.String,
    heldUsd: Schema.String,
    stakedTokens: Schema.Finite,
    allowanceUsd: Schema.String
  }))
}).annotate({ identifier: "RateLimits" })

/**
 * The body of `GET /api_keys/rate_limit_logs`.
 *
 * @category schemas
 */
export const RateLimitLogsBody = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    timestamp: Schema.String,
    limit: Schema.String,
    limitType: Schema.Literals(["user", "api_key", "global"]),
    kind: Schema.String,
    model: Schema.optionalKey(Schema.String),
    keyId: Schema.optionalKey(Schema.String)
  }))
}).annotate({ identifier: "RateLimitLogs" })

/**
 * `GET /api/v1/api_keys/rate_limits`.
 *
 * @category routes
 */
export const rateLimits = Route.make(
  "GET",
  "/api/v1/api_keys/rate_limits",
  Effect.gen(function*() {
    const auth = yield* Auth
    const context = yield* Effect.context<RateLimiter | RateLimits.Overrides>()
    const ledger = yield* Effect.serviceOption(CreditLedger.CreditLedger)
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireKey(auth)
      const stored = yield* auth.storedLimits(principal.accountId, principal.keyId)
      const limits = yield* RateLimits.status(principal, stored).pipe(Effect.provide(context))
      const body: Record<string, unknown> = {
        accountId: principal.accountId,
        keyId: principal.keyId,
        tier: principal.tier,
        limits
      }
      if (Option.isSome(ledger)) {
        const balance = yield* ledger.value.balance(principal.accountId)
        body["balances"] = {
          usd: Money.formatUsd(balance.availableUsd),
          heldUsd: Money.formatUsd(balance.heldUsd),
          stakedTokens: balance.stakedTokens,
          allowanceUsd: Money.formatUsd(balance.availableAllowance)
        }
      }
      return HttpServerResponse.jsonUnsafe(body, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "The caller's current rate limits",
    description:
      "Every limit that applies to the key (per text model tier and per kind, overrides included) and what remains of it; requests reset at a Unix second, tokens in seconds. With the account's balances.",
    tags: ["Rate limits"],
    security: "key",
    responses: {
      200: { description: "Current limits", schema: RateLimitsBody }
    }
  }
)

/**
 * `GET /api/v1/api_keys/rate_limit_logs`: newest first.
 *
 * @category routes
 */
export const rateLimitLogs = Route.make(
  "GET",
  "/api/v1/api_keys/rate_limit_logs",
  Effect.gen(function*() {
    const auth = yield* Auth
    const log = yield* RateLimitLog.RateLimitLog
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireKey(auth)
      const entries = yield* log.list(principal.accountId)
      return HttpServerResponse.jsonUnsafe({
        data: entries.map((entry) => ({
          timestamp: new Date(entry.timestamp).toISOString(),
          limit: entry.limit,
          limitType: entry.limitType,
          kind: entry.kind,
          ...(entry.model === undefined ? {} : { model: entry.model }),
          ...(entry.keyId === undefined ? {} : { keyId: entry.keyId })
        }))
      }, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "The caller's recent rate-limited requests",
    description:
      "Newest first: when, which limit, the model or kind, and the key. At most 200 entries per account, none older than 7 days.",
    tags: ["Rate limits"],
    security: "key",
    responses: {
      200: { description: "Recent rejections", schema: RateLimitLogsBody }
    }
  }
)

/** @category routes */
/** @category schemas */
export const OverrideRequest = Schema.Struct({
  accountId: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  /** One key of the account; absent: the account's own override. */
  keyId: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))),
  /** The rates per category, as in the config file's `rateLimits.accounts`; `null` removes the override. */
  limits: Schema.NullOr(RateLimits.OverrideSchema)
})

/** @category routes */
export const setOverride = Route.make(
  "PUT",
  "/api/v1/rate_limits/overrides",
  Effect.gen(function*() {
    const auth = yield* Auth
    const { operatorAccountIds } = yield* BillingOptions
    const log = Option.getOrUndefined(yield* Effect.serviceOption(AuditLog.AuditLog))
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      if (!operatorAccountIds.includes(principal.accountId)) {
        return yield* new Errors.Forbidden({
          message: "Only operator accounts may set rate-limit overrides: the server lists them in TOLLGATE_OPERATOR_ACCOUNTS"
        })
      }
      const body = yield* RequestBody.schema(OverrideRequest)
      yield* auth.setLimits(body.accountId, body.keyId, body.limits ?? undefined)
      if (log !== undefined) {
        yield* log.append({
          actor: `key:${principal.keyId}`,
          action: "limits.changed",
          accountId: body.accountId,
          details: { keyId: body.keyId ?? null, limits: body.limits }
        })
      }
      return HttpServerResponse.jsonUnsafe({ accountId: body.accountId, keyId: body.keyId ?? null, limits: body.limits })
    })
  }),
  {
    summary: "Set an account's or a key's rate-limit override (operators)",
    description:
      "ADMIN key of an operator account. The override (rates per category, as the config file's `rateLimits.accounts`) is kept in the store and read with the key's standing on each call (a wallet's call reads its account's), so every instance enforces it from the next call on; `limits: null` removes it. It wins over the config file's override of the same account or key. A wallet's account is `wallet:evm:<address, lower-cased>` or `wallet:solana:<address>`.",
    tags: ["Rate limits"],
    security: "admin",
    request: { contentType: "application/json", schema: OverrideRequest },
    responses: {
      200: { description: "The override as set" },
      400: { description: "Invalid body, or a wallet's account id not as its calls name it", schema: Errors.DetailedError },
      403: { description: "Not an operator's ADMIN key", schema: Errors.StandardError },
      404: { description: "No such account or key", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [rateLimits, rateLimitLogs, setOverride] as const
