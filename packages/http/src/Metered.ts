/**
 * The metered pipeline: the one function every paid route calls. It authenticates the caller,
 * claims the `Idempotency-Key`, admits the call (rate limits and a credit hold for the worst-case
 * price, all or nothing), runs the route's work, captures the actual price and releases the rest
 * (appending the usage entry in the same ledger step), completes the idempotency record and adds
 * the rate-limit and balance headers. Once admitted, a failure or an interruption (a client that
 * disconnects) releases the hold in a finalizer; a streamed response captures what it produced
 * when the stream ends, fails or is cut. A call that starts a job (a video) hands its hold over to
 * the job instead (`Deferred`): the job captures or releases it later by its reference. A hold
 * that nothing settles (a process crash, a job never polled) expires.
 *
 * Which 402 a caller gets depends on who it is: an API key with too little balance gets the
 * StandardError `INSUFFICIENT_BALANCE`; a wallet gets the authenticated-wallet body and a caller
 * with no credentials the x402 discovery body, both built by the `PaymentRequiredBodies` service
 * so the x402 module owns their shape.
 *
 * @since 0.1.0
 */
import { AbuseGuard, Admission, type AuthStore, CreditLedger, Errors, Money, type PricingEngine, Principal, Spans, Staking, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import * as RateLimits from "@tollgate/core/RateLimits"
import { Clock, Context, Effect, Layer, Option, Stream } from "effect"
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Observability from "./Observability.ts"
import { CurrentRequest } from "./RequestContext.ts"

/** @category models */
export type Kind = RateLimits.Kind

/** @category models */
export type ModelTier = RateLimits.ModelTier

/** @category models */
export interface Usage {
  readonly units: number
  readonly pricePerUnit: Money.Nano
  readonly notes?: string | undefined
  readonly promptTokens?: number | undefined
  readonly completionTokens?: number | undefined
}

/**
 * What a call used: its actual price (at most the quote), its usage, and the tokens and credits
 * that settle the rate-limit reservations.
 *
 * @category models
 */
export interface Produced {
  readonly charge: Money.Nano
  readonly usage: Usage
  readonly actualTokens?: number | undefined
  readonly actualCredits?: number | undefined
}

/**
 * What a call produced: its response (route headers included) and what it used.
 *
 * @category models
 */
export interface Outcome extends Produced {
  readonly response: HttpServerResponse.HttpServerResponse
}

/**
 * A streamed response whose price is known only when the stream ends or the client disconnects:
 * `produced` is read then, and what it says is captured.
 *
 * @category models
 */
export interface StreamingOutcome {
  readonly _tag: "Streaming"
  readonly stream: Stream.Stream<Uint8Array, Errors.ApiError>
  readonly contentType: string
  readonly status?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly produced: Effect.Effect<Produced>
}

/**
 * The call started work that outlives the request (a video job): the hold is left open for the job
 * to capture or release by `CallContext.holdReference`, and expires with `MeteredCall.holdTtlMs`
 * if nothing settles it. The rate-limit admission is settled as it was taken.
 *
 * @category models
 */
export interface DeferredOutcome {
  readonly _tag: "Deferred"
  readonly response: HttpServerResponse.HttpServerResponse
}

/** @category models */
export interface CallContext {
  readonly principal: Principal.Principal
  readonly requestId: string
  /** The reference of the call's credit hold. */
  readonly holdReference: string
}

/** @category models */
export interface MeteredCall {
  /** Usage sku: `text-parser`, `image:<model>`, `chat:<model>`, `rpc:<network>`. */
  readonly sku: string
  readonly kind: Kind
  readonly modelTier?: ModelTier | undefined
  /** Tokens reserved at admission (chat: prompt + capped max_tokens). */
  readonly reserveTokens?: number | undefined
  /** RPC credits reserved against the rolling 24 h cap. */
  readonly reserveCredits?: number | undefined
  /** The worst-case price: held at admission; its version is pinned on the hold. */
  readonly quote: PricingEngine.Quote
  readonly idempotency?: { readonly key: string; readonly fingerprint: string } | undefined
  /** How long the hold lives if nothing settles it; by default the pipeline's `holdTtlMs`. */
  readonly holdTtlMs?: number | undefined
  readonly execute: (context: CallContext) => Effect.Effect<Outcome | StreamingOutcome | DeferredOutcome, Errors.ApiError>
}

/**
 * The bodies of the wallet 402s, owned by the x402 module. `discovery` answers a caller with no
 * credentials; `insufficientBalance` a signed-in wallet that cannot afford the call.
 *
 * @category services
 */
export class PaymentRequiredBodies extends Context.Service<PaymentRequiredBodies, {
  readonly discovery: (input: { readonly url: string }) => Effect.Effect<Errors.PaymentRequired>
  readonly insufficientBalance: (input: {
    readonly principal: Principal.WalletPrincipal
    readonly balance: CreditLedger.Balance
    readonly call: MeteredCall
  }) => Effect.Effect<Errors.PaymentRequired>
}>()("@tollgate/http/Metered/PaymentRequiredBodies") {}

/**
 * Minimal bodies until the x402 builders are provided: the discovery 402 names the resource and
 * the ways to authenticate; the wallet 402 carries the spec's required scalar fields.
 *
 * @category layers
 */
export const layerPaymentRequiredMinimal: Layer.Layer<PaymentRequiredBodies> = Layer.succeed(PaymentRequiredBodies, {
  discovery: ({ url }) =>
    Effect.succeed(new Errors.PaymentRequired({
      body: { x402Version: 2, error: "Payment required", resource: { url, description: "Metered API call", mimeType: "application/json" }, accepts: [] }
    })),
  insufficientBalance: ({ balance, call }) =>
    Effect.succeed(new Errors.PaymentRequired({
      body: {
        error: "Payment required",
        code: "PAYMENT_REQUIRED",
        reason: "insufficient_balance",
        message: "Insufficient credit balance",
        currentBalanceUsd: Money.toUsdNumber(balance.availableUsd),
        minimumBalanceUsd: Money.toUsdNumber(call.quote.amount)
      }
    }))
})

/**
 * Which rate limits apply to a call: `layerLimits` (the configured tables and overrides) or
 * `layerLimitsDefault` (the spec's tables).
 *
 * @category services
 */
export class LimitPolicy extends Context.Service<LimitPolicy, {
  readonly limitsFor: (principal: Principal.Principal, call: RateLimits.Call) => ReadonlyArray<RateLimiter.Limit>
}>()("@tollgate/http/Metered/LimitPolicy") {}

/**
 * The spec's default tables with no overrides (`RateLimits.limitsFor`).
 *
 * @category layers
 */
export const layerLimitsDefault: Layer.Layer<LimitPolicy> = Layer.succeed(LimitPolicy, {
  limitsFor: (principal, call) => RateLimits.limitsFor(principal, call)
})

/**
 * The tables with the configured and runtime overrides of `RateLimits.Overrides`.
 *
 * @category layers
 */
export const layerLimits: Layer.Layer<LimitPolicy, never, RateLimits.Overrides> = Layer.effect(LimitPolicy, RateLimits.policy)

/** @category options */
export interface Options {
  /** How long a hold lives if its request never settles it (a crashed process). */
  readonly holdTtlMs?: number
}

/** @category services */
export class Metered extends Context.Service<Metered, {
  readonly run: (call: MeteredCall) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError, HttpServerRequest.HttpServerRequest>
  /**
   * What a metered route's request must pass before the route reads its body: one without any
   * credentials gets the discovery 402 at once, or a 413 when its declared body is over the app's
   * default cap (that cap applies first; a route's higher cap is for callers with credentials).
   * So an anonymous caller cannot make the service parse or token-count a large body. `App` runs it
   * ahead of every route documented as `metered`.
   */
  readonly requireCredentials: Effect.Effect<void, Errors.ApiError, HttpServerRequest.HttpServerRequest>
}>()("@tollgate/http/Metered") {}

const replayed = (stored: IdempotencyStore.StoredResponse) =>
  HttpServerResponse.uint8Array(Buffer.from(stored.body, "base64"), {
    status: stored.status,
    headers: { ...stored.headers, "idempotent-replayed": "true" }
  })

const toStored = (response: HttpServerResponse.HttpServerResponse): IdempotencyStore.StoredResponse => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) headers[name] = value
  if (response.body._tag === "Uint8Array") headers["content-type"] ??= response.body.contentType
  const bytes = response.body._tag === "Uint8Array" ? response.body.body : new Uint8Array()
  return { status: response.status, headers, body: Buffer.from(bytes).toString("base64") }
}

const balanceHeaders = (before: CreditLedger.Balance): Record<string, string> => ({
  "x-service-balance-usd": Money.formatUsd(before.availableUsd),
  "x-service-balance-token": Money.formatUsd(before.availableAllowance)
})

type AdmissionOutcome = "admitted" | "rate_limit" | "balance" | "idempotency_conflict" | "abuse_guard"

const countAdmission = (outcome: AdmissionOutcome, context: Context.Context<never>) =>
  Observability.countUnsafe(Observability.admissions, { outcome }, context)

type Service = "auth" | "admission" | "idempotency"

/**
 * Counts what a failed step says about the stores: every store the pipeline calls refuses the call
 * when it is unreachable (the policy is fail-closed), and authentication's refusals include the
 * abuse guard's. Counted from the failure itself, so the steps that succeed pay nothing for it.
 */
const countFailure = (error: { readonly _tag: string }, service: Service, context: Context.Context<never>) => {
  if (error._tag === "ServiceUnavailable") {
    Observability.countUnsafe(Observability.redisErrors, { service, policy: "fail-closed" }, context)
  } else if (service === "auth" && error._tag === "RateLimited") {
    countAdmission("abuse_guard", context)
  }
}

/** `self`, with its failure counted by `countFailure`. */
const counted = <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>, service: Service, context: Context.Context<never>) =>
  Effect.tapError(self, (error) => Effect.sync(() => countFailure(error, service, context)))

const upstreamFailures = new Set<string>(["BadGateway", "GatewayTimeout", "InferenceFailed", "ServiceUnavailable"])

/** What an admitted call took: the credit hold and the rate-limit admission. */
interface Admitted {
  readonly hold: CreditLedger.Hold
  readonly admission: RateLimiter.Admission
}

const keyStands: AuthStore.KeyStatus = { accountExists: true, revoked: false }

/**
 * The pipeline over the services it coordinates.
 *
 * Every paid request runs it, so the common case is a short direct sequence: authenticate, one
 * admission (`Admission.AdmissionStore.admit`: the key's standing, every rate limit and the credit
 * hold in one store step), the route's work, one settlement (capture with its usage entry, the
 * rate-limit settlement and the idempotency record in one store step). Metrics are updated in place
 * from the request's context and store failures are counted from the failures themselves. Effect
 * supplies the rest: the errors, and the finalizer that gives back the hold, the reservations and
 * the idempotency key of an admitted call that fails or is interrupted.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<
  Metered,
  never,
  | Auth.Auth
  | RateLimiter.RateLimiter
  | CreditLedger.CreditLedger
  | IdempotencyStore.IdempotencyStore
  | Admission.AdmissionStore
  | PaymentRequiredBodies
  | LimitPolicy
> =>
  Layer.effect(Metered, Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const limiter = yield* RateLimiter.RateLimiter
    const ledger = yield* CreditLedger.CreditLedger
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const store = yield* Admission.AdmissionStore
    const bodies = yield* PaymentRequiredBodies
    const policy = yield* LimitPolicy
    const staking = yield* Staking.Staking
    const traced = yield* Spans.current
    const ttlMs = options.holdTtlMs ?? CreditLedger.DEFAULT_HOLD_TTL_MS
    // When the admission's store step can read the abuse guard's blocks (both on Redis), a key's
    // block is read there: one round trip fewer per paid call than asking the guard afterwards.
    const guard = Option.getOrUndefined(yield* Effect.serviceOption(AbuseGuard.AbuseGuard))
    const blockKeyOf = store.readsAbuseBlocks ? guard?.blockKey : undefined

    /** Why a hold was refused, as the caller sees it: a 402 whose body depends on who is paying. */
    const holdRefusal = (principal: Principal.Principal, call: MeteredCall, error: CreditLedger.LedgerError): Effect.Effect<never, Errors.ApiError> => {
      if (error.reason !== "InsufficientFunds") return Effect.die(error)
      if (principal._tag === "ApiKey") {
        return Effect.fail(new Errors.InsufficientBalance({ message: "Insufficient balance to pay for this request" }))
      }
      return ledger.balance(principal.accountId).pipe(
        Effect.flatMap((balance) => bodies.insufficientBalance({ principal, balance, call })),
        Effect.flatMap(Effect.fail)
      )
    }

    // What follows a key's standing found good: the abuse guard names the principal and may refuse
    // it, without asking its store again when the admission read the block.
    const afterStanding = (pending: NonNullable<Auth.Unconfirmed["pending"]>, principal: Principal.Principal, blockRead: boolean) =>
      blockRead ? AbuseGuard.identifyRead(principal, 0) : pending.standing(keyStands)

    // A refusal after the key's standing was found good: what follows the standing runs before the
    // refusal is answered, since the guard's refusal comes first.
    const stood = (
      pending: Auth.Unconfirmed["pending"],
      principal: Principal.Principal,
      blockRead: boolean,
      context: Context.Context<never>,
      refusal: Effect.Effect<never, Errors.ApiError>
    ) => pending === undefined ? refusal : Effect.andThen(counted(afterStanding(pending, principal, blockRead), "auth", context), refusal)

    // One store step decides the admission; what it refused decides the answer (the key's standing
    // first, then a refused payment, the one a client can act on, then the rate limit), and a
    // refusal wrote nothing, so nothing is given back.
    const admit = (
      principal: Principal.Principal,
      call: MeteredCall,
      reference: string,
      pending: Auth.Unconfirmed["pending"],
      blockRead: boolean,
      clock: Clock.Clock,
      context: Context.Context<never>
    ): Effect.Effect<Admitted, Errors.ApiError> => {
      const now = clock.currentTimeMillisUnsafe()
      const plan = limiter.plan(policy.limitsFor(principal, call), now)
      const admitted = store.admit({
        now,
        accountId: principal.accountId,
        keyId: pending?.keyId,
        abuseBlockKey: blockRead ? blockKeyOf!(AbuseGuard.principalCaller(principal)) : undefined,
        counters: plan.counters,
        hold: { amount: call.quote.amount, reference, priceVersion: call.quote.version, ttlMs: call.holdTtlMs ?? ttlMs }
      })
      return traced("tollgate.admission", Effect.flatMap(counted(admitted, "admission", context), (reply): Effect.Effect<Admitted, Errors.ApiError> => {
        switch (reply._tag) {
          case "Admitted":
            countAdmission("admitted", context)
            return Effect.succeed({ hold: reply.hold, admission: plan.admitted(reply.states) })
          case "KeyRefused":
            return counted(pending!.standing(reply.status), "auth", context) as Effect.Effect<never, Errors.ApiError>
          case "Blocked":
            return counted(AbuseGuard.identifyRead(principal, reply.ms), "auth", context) as Effect.Effect<never, Errors.ApiError>
          case "HoldRefused":
            countAdmission("balance", context)
            return stood(pending, principal, blockRead, context, holdRefusal(principal, call, reply.error))
          case "RateLimited":
            countAdmission("rate_limit", context)
            return stood(pending, principal, blockRead, context, plan.rejected(reply.states))
        }
      }))
    }

    const run = Effect.fnUntraced(function*(call: MeteredCall) {
      const context = yield* Effect.context<HttpServerRequest.HttpServerRequest>()
      const request = Context.get(context, HttpServerRequest.HttpServerRequest)
      const current = Context.get(context, CurrentRequest)
      const requestId = current.requestId
      const found = yield* traced("tollgate.auth", counted(auth.authenticateUnconfirmed(request.headers), "auth", context))
      if (Option.isNone(found)) {
        return yield* Effect.flatMap(bodies.discovery({ url: X402.resourceUrl(request.url) }), Effect.fail)
      }
      const principal = found.value.principal
      let pending = found.value.pending
      current.principalId = Principal.describe(principal)
      // A wallet's staked tokens set today's allowance, so they are current before the hold.
      if (principal._tag === "Wallet") yield* staking.refresh(principal)
      const idem = call.idempotency
      if (idem !== undefined) {
        // A key is claimed only for a confirmed caller, so a revoked key burns no key.
        if (found.value.confirm !== undefined) yield* counted(found.value.confirm, "auth", context)
        pending = undefined
        const claim = yield* counted(idempotency.claim(principal.accountId, idem.key, idem.fingerprint), "idempotency", context)
        switch (claim._tag) {
          case "Replay":
            return replayed(claim.response)
          case "InFlight":
            countAdmission("idempotency_conflict", context)
            return yield* new Errors.Conflict({ message: "A request with this Idempotency-Key is still in progress" })
          case "Mismatch":
            countAdmission("idempotency_conflict", context)
            return yield* new Errors.InvalidRequest({ message: "Idempotency-Key was already used with a different request body" })
        }
      }
      const accountId = principal.accountId
      const blockRead = pending !== undefined && blockKeyOf !== undefined
      const abandon = idem === undefined ? Effect.void : Effect.ignore(idempotency.abandon(accountId, idem.key))
      const reference = `${requestId}:${crypto.randomUUID()}`
      const clock = Context.get(context, Clock.Clock)

      // A failed or interrupted call after admission: the hold is released, the rate-limit
      // reservations go back to what was used (nothing) and the idempotency key is freed.
      const giveBack = ({ admission }: Admitted, freeKey: boolean) =>
        store.giveBack({
          now: clock.currentTimeMillisUnsafe(),
          accountId,
          reference,
          adjustments: admission.settlement({ tokens: 0, credits: 0 }),
          abandon: freeKey && idem !== undefined ? { scope: accountId, key: idem.key } : undefined
        }).pipe(
          Effect.tapError((error) => Effect.sync(() => countFailure(error, "admission", context))),
          Effect.ignore
        )

      const settle = (
        { admission }: Admitted,
        produced: Produced,
        startedAt: number,
        completion: Admission.SettleInput["completion"]
      ) => {
        const amount = Money.min(produced.charge, call.quote.amount)
        const now = clock.currentTimeMillisUnsafe()
        const settled = store.settle({
          now,
          capture: {
            accountId,
            reference,
            amount,
            usage: {
              sku: call.sku,
              units: produced.usage.units,
              pricePerUnit: produced.usage.pricePerUnit,
              notes: produced.usage.notes,
              requestId,
              executionMs: now - startedAt,
              promptTokens: produced.usage.promptTokens,
              completionTokens: produced.usage.completionTokens
            }
          },
          adjustments: admission.settlement({ tokens: produced.actualTokens, credits: produced.actualCredits }),
          completion
        })
        return traced("tollgate.capture", Effect.map(counted(settled, "admission", context), (settlement) => {
          Observability.countUnsafe(Observability.creditsCaptured, {}, context, amount)
          return settlement
        }).pipe(Effect.catchTag("LedgerError", Effect.die)))
      }

      const use = Effect.fnUntraced(function*(admitted: Admitted) {
        // The key's standing was found good in the admission's step; what follows it (the abuse
        // guard's check of the principal) runs now, and a refusal gives the admission back.
        if (pending !== undefined) yield* counted(afterStanding(pending, principal, blockRead), "auth", context)
        const startedAt = clock.currentTimeMillisUnsafe()
        const outcome = yield* traced(
          "tollgate.backend",
          Effect.tapError(call.execute({ principal, requestId, holdReference: reference }), (error) =>
            Effect.sync(() => {
              if (upstreamFailures.has(error._tag)) Observability.countUnsafe(Observability.upstreamErrors, { sku: call.sku }, context)
            })),
          { sku: call.sku }
        )
        const headers = { ...admitted.admission.headers, ...balanceHeaders(admitted.hold.before) }
        if ("_tag" in outcome && outcome._tag === "Deferred") {
          yield* admitted.admission.settle({})
          const response = HttpServerResponse.setHeaders(outcome.response, headers)
          if (idem !== undefined) yield* counted(idempotency.complete(accountId, idem.key, toStored(response)), "idempotency", context)
          return response
        }
        if ("_tag" in outcome) {
          const stream = outcome.stream.pipe(Stream.onExit(() =>
            outcome.produced.pipe(
              Effect.flatMap((produced) => settle(admitted, produced, startedAt, undefined)),
              Effect.catchCause((cause) =>
                Effect.logError("settling a streamed call failed", cause).pipe(Effect.andThen(giveBack(admitted, false)))
              )
            )
          ))
          return HttpServerResponse.stream(stream, {
            status: outcome.status,
            headers: { ...outcome.headers, ...headers },
            contentType: outcome.contentType
          })
        }
        if (principal._tag === "Wallet") {
          // A wallet's response names the balance after the capture, so its idempotency record is
          // completed after the settlement.
          const settlement = yield* settle(admitted, outcome, startedAt, undefined)
          const response = HttpServerResponse.setHeaders(outcome.response, {
            ...headers,
            "x-balance-remaining": Money.formatUsd(settlement.balance.availableUsd)
          })
          if (idem !== undefined) yield* counted(idempotency.complete(accountId, idem.key, toStored(response)), "idempotency", context)
          return response
        }
        const response = HttpServerResponse.setHeaders(outcome.response, headers)
        yield* settle(admitted, outcome, startedAt, idem === undefined ? undefined : { scope: accountId, key: idem.key, response: toStored(response) })
        return response
      })

      const admitted = admit(principal, call, reference, pending, blockRead, clock, context)
      return yield* Effect.acquireUseRelease(
        idem === undefined ? admitted : Effect.onError(admitted, () => abandon),
        use,
        (admitted, exit) => exit._tag === "Success" ? Effect.void : giveBack(admitted, true)
      )
    }, (effect) => traced("Metered.run", effect))

    const requireCredentials: Metered["Service"]["requireCredentials"] = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (Auth.hasCredentials(request.headers)) return Effect.void
      return Effect.flatMap(HttpIncomingMessage.MaxBodySize, (cap): Effect.Effect<never, Errors.ApiError> => {
        const declared = Number(request.headers["content-length"] ?? 0)
        if (cap !== undefined && declared > Number(cap)) {
          return Effect.fail(new Errors.PayloadTooLarge({ message: "Request body is too large" }))
        }
        return Effect.flatMap(bodies.discovery({ url: X402.resourceUrl(request.url) }), Effect.fail)
      })
    })

    return Metered.of({ run, requireCredentials })
  }))
