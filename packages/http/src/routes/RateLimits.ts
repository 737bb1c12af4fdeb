/**
 * The caller's rate limits, for a Bearer API key: `GET /api_keys/rate_limits` lists every current
 * limit (per text model tier and per kind, with the account's and key's overrides applied) and
 * what remains of it, plus the account's balances when a `CreditLedger` is provided;
 * `GET /api_keys/rate_limit_logs` lists the account's recent requests that hit a limit.
 *
 * `layerLimitPolicy` gives the metered pipeline the configured limits (`RateLimits.limitsFor`
 * over the `RateLimits.Overrides` store) in place of its built-in defaults.
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, RateLimitLog, RateLimits } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { RateLimiter } from "@tollgate/core/RateLimiter"
import { Effect, Layer, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { LimitPolicy } from "../Metered.ts"
import * as Route from "../Route.ts"

const apiKeyPrincipal = (auth: Auth["Service"]) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const found = yield* auth.authenticate(request.headers)
    if (Option.isNone(found) || found.value._tag !== "ApiKey") {
      return yield* new Errors.Unauthenticated({ message: "This operation needs 'Authorization: Bearer <API key>'" })
    }
    return found.value
  })

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
      const principal = yield* apiKeyPrincipal(auth)
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
  })
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
      const principal = yield* apiKeyPrincipal(auth)
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
  })
)

/** @category routes */
export const routes = [rateLimits, rateLimitLogs] as const

/**
 * The metered pipeline's limits from the configured tables and overrides.
 *
 * @category layers
 */
export const layerLimitPolicy: Layer.Layer<LimitPolicy, never, RateLimits.Overrides> = Layer.effect(
  LimitPolicy,
  Effect.map(RateLimits.policy, (policy) => LimitPolicy.of({ limitsFor: policy.limitsFor }))
)
