/**
 * The caller's rate limits, for a Bearer API key: `GET /api_keys/rate_limits` lists every current
 * limit (per text model tier and per kind, with the account's and key's overrides applied) and
 * what remains of it, plus the account's balances when a `CreditLedger` is provided;
 * `GET /api_keys/rate_limit_logs` lists the account's recent requests that hit a limit.
 * *
 * @since 0.1.0
 */
import { CreditLedger, Money, RateLimitLog, RateLimits } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { type RateLimiter } from "@tollgate/core/RateLimiter"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as Route from "../Route.ts"

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
      const limits = yield* RateLimits.status(principal).pipe(Effect.provide(context))
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
    description: "Every limit that applies to the key (per text model tier and per kind, overrides included) and what remains of it; requests reset at a Unix second, tokens in seconds. With the account's balances.",
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
    description: "Newest first: when, which limit, the model or kind, and the key. At most 200 entries per account, none older than 7 days.",
    tags: ["Rate limits"],
    security: "key",
    responses: {
      200: { description: "Recent rejections", schema: RateLimitLogsBody }
    }
  }
)

/** @category routes */
export const routes = [rateLimits, rateLimitLogs] as const
