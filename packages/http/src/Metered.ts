/**
 * The metered pipeline: the one function every paid route calls. It authenticates the caller,
 * claims the `Idempotency-Key`, admits the call (rate limits and a credit hold for the worst-case
 * price, all or nothing), runs the route's work, captures the actual price and releases the rest
 * (appending the usage entry in the same ledger step), completes the idempotency record and adds
 * the rate-limit and balance headers. Once admitted, a failure or an interruption (a client that
 * disconnects) releases the hold in a finalizer; a streamed response captures what it produced
 * when the stream ends, fails or is cut. A hold that nothing settles (a process crash) expires.
 *
 * Which 402 a caller gets depends on who it is: an API key with too little balance gets the
 * StandardError `INSUFFICIENT_BALANCE`; a wallet gets the authenticated-wallet body and a caller
 * with no credentials the x402 discovery body, both built by the `PaymentRequiredBodies` service
 * so the x402 module owns their shape.
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, type PricingEngine, Principal } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import * as RateLimits from "@tollgate/core/RateLimits"
import { Clock, Context, Effect, Exit, Layer, Metric, Option, References, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
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

/** @category models */
export interface CallContext {
  readonly principal: Principal.Principal
  readonly requestId: string
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
  readonly execute: (context: CallContext) => Effect.Effect<Outcome | StreamingOutcome, Errors.ApiError>
}

/**
 * The bodies of the wallet 402s, owned by the x402 module. `discovery` answers a caller with no
 * credentials; `insufficientBalance` a signed-in wallet that cannot afford the call.
 *
 * @category services
 */
export class PaymentRequiredBodies extends Context.Service<PaymentRequiredBodies, {
  readonly discovery: (input: { readonly url: string; readonly call: MeteredCall }) => Effect.Effect<Errors.PaymentRequired>
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

const countAdmission = (name: "admitted" | "rate_limit" | "balance" | "idempotency_conflict" | "abuse_guard") =>
  Observability.count(Observability.admissions, { outcome: name })

/** Every store the pipeline calls refuses the call when it is unreachable: the policy is fail-closed. */
const storeFailure = (service: string) => <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>) =>
  Effect.tapError(self, (error) =>
    error._tag === "ServiceUnavailable"
      ? Observability.count(Observability.redisErrors, { service, policy: "fail-closed" })
      : Effect.void)

type Confirm = Effect.Effect<void, Errors.ApiError>

/** Authentication's failures counted: an unreachable store, and the abuse guard's refusals. */
const authChecked = <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>) =>
  storeFailure("auth")(self).pipe(
    Effect.tapError((error) => error._tag === "RateLimited" ? countAdmission("abuse_guard") : Effect.void)
  )

type Traced = <A, E, R>(
  name: string,
  self: Effect.Effect<A, E, R>,
  attributes?: Record<string, string>
) => Effect.Effect<A, E, R>

/**
 * The pipeline's spans, when tracing is on: with no call-site stack, since capturing one
 * (`Effect.fn` and `Effect.withSpan` do it on every call) is a measurable share of a proxied RPC
 * call and the span names already say where they come from (data-first, since the data-last
 * `withSpan` ignores `captureStackTrace`). With tracing off the steps are not wrapped at all: even
 * a span that is never recorded costs a context change per step.
 */
const tracer = (enabled: boolean): Traced =>
  enabled
    ? (name, self, attributes) => Effect.withSpan(self, name, { captureStackTrace: false, ...(attributes === undefined ? {} : { attributes }) })
    : (_name, self) => self

const upstreamFailures = new Set<string>(["BadGateway", "GatewayTimeout", "InferenceFailed", "ServiceUnavailable"])

/**
 * The pipeline over the services it coordinates.
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
  | PaymentRequiredBodies
  | LimitPolicy
> =>
  Layer.effect(Metered, Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const limiter = yield* RateLimiter.RateLimiter
    const ledger = yield* CreditLedger.CreditLedger
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const bodies = yield* PaymentRequiredBodies
    const policy = yield* LimitPolicy
    const traced = tracer(yield* References.TracerEnabled)

    const ledgerFailure = (error: CreditLedger.LedgerError) => Effect.die(error)

    // The references of the holds this instance placed and has not settled: a hold is settled once
    // (capture, or release on failure) even when both paths run, so the gauge cannot drift.
    const openHolds = new Set<string>()
    const holdPlaced = (reference: string) =>
      Effect.suspend(() => {
        openHolds.add(reference)
        return Metric.modify(Observability.holdsOpen, 1)
      })
    const holdSettled = (reference: string) =>
      Effect.suspend(() => openHolds.delete(reference) ? Metric.modify(Observability.holdsOpen, -1) : Effect.void)

    const hold = (principal: Principal.Principal, call: MeteredCall, reference: string) =>
      ledger.hold({
        accountId: principal.accountId,
        amount: call.quote.amount,
        reference,
        priceVersion: call.quote.version,
        ...(options.holdTtlMs === undefined ? {} : { ttlMs: options.holdTtlMs })
      }).pipe(storeFailure("credit_ledger"), Effect.catchTag("LedgerError", (error): Effect.Effect<never, Errors.ApiError> => {
        if (error.reason !== "InsufficientFunds") return ledgerFailure(error)
        if (principal._tag === "ApiKey") {
          return Effect.fail(new Errors.InsufficientBalance({ message: "Insufficient balance to pay for this request" }))
        }
        return ledger.balance(principal.accountId).pipe(
          Effect.flatMap((balance) => bodies.insufficientBalance({ principal, balance, call })),
          Effect.flatMap(Effect.fail)
        )
      }))

    // The credit hold, the rate-limit take and an API key's standing (its account exists, it is not
    // revoked) go to different stores, so they are made together: with Redis that is one round trip
    // instead of three. Whichever refuses decides the answer (a 401 first, then a refused payment,
    // the one a client can act on, then the rate limit), and what the others took is given back, so
    // a refused call holds nothing and leaves every limit where it was.
    const admit = (principal: Principal.Principal, call: MeteredCall, reference: string, confirm: Confirm | undefined) =>
      traced("tollgate.admission", Effect.gen(function*() {
        // Exits, not results: even a defect on one side gives back what the other sides took.
        const [held, taken, confirmed] = yield* Effect.all([
          Effect.exit(hold(principal, call, reference)),
          Effect.exit(storeFailure("rate_limiter")(limiter.admit(policy.limitsFor(principal, call)))),
          confirm === undefined ? Effect.succeed(Exit.void) : Effect.exit(confirm)
        ], { concurrency: 3 })
        if (Exit.isSuccess(confirmed) && Exit.isSuccess(held) && Exit.isSuccess(taken)) {
          yield* holdPlaced(reference)
          yield* countAdmission("admitted")
          return { hold: held.value, admission: taken.value }
        }
        if (Exit.isSuccess(taken)) yield* taken.value.cancel
        if (Exit.isSuccess(held)) yield* Effect.ignore(ledger.release(principal.accountId, reference))
        const outcomes: ReadonlyArray<Exit.Exit<unknown, Errors.ApiError>> = [confirmed, held, taken]
        const refused = outcomes.find(Exit.isFailure)!
        const error = Exit.findErrorOption(refused)
        if (Option.isSome(error)) {
          if (refused === held && (error.value._tag === "InsufficientBalance" || error.value._tag === "PaymentRequired")) {
            yield* countAdmission("balance")
          } else if (refused === taken && error.value._tag === "RateLimited") {
            yield* countAdmission("rate_limit")
          }
        }
        return yield* Effect.failCause(refused.cause)
      }))

    const settleFailure = (principal: Principal.Principal, reference: string, admission: RateLimiter.Admission, claimed: (() => Effect.Effect<void>) | undefined) =>
      Effect.all([
        Effect.ignore(ledger.release(principal.accountId, reference)).pipe(Effect.andThen(holdSettled(reference))),
        admission.settle({ tokens: 0, credits: 0 }),
        claimed === undefined ? Effect.void : claimed()
      ], { discard: true })

    const run = Effect.fnUntraced(function*(call: MeteredCall) {
      const request = yield* HttpServerRequest.HttpServerRequest
      const current = yield* CurrentRequest
      const requestId = current.requestId
      const found = yield* traced("tollgate.auth", authChecked(auth.authenticateUnconfirmed(request.headers)))
      if (Option.isNone(found)) {
        return yield* Effect.flatMap(bodies.discovery({ url: request.url, call }), Effect.fail)
      }
      const principal = found.value.principal
      const confirm = found.value.confirm === undefined ? undefined : authChecked(found.value.confirm)
      current.principalId = Principal.describe(principal)
      const idem = call.idempotency
      if (idem !== undefined) {
        // A key is claimed only for a confirmed caller, so a revoked key burns no key.
        if (confirm !== undefined) yield* confirm
        const claim = yield* idempotency.claim(principal.accountId, idem.key, idem.fingerprint).pipe(storeFailure("idempotency"))
        switch (claim._tag) {
          case "Replay":
            return replayed(claim.response)
          case "InFlight":
            yield* countAdmission("idempotency_conflict")
            return yield* new Errors.Conflict({ message: "A request with this Idempotency-Key is still in progress" })
          case "Mismatch":
            yield* countAdmission("idempotency_conflict")
            return yield* new Errors.InvalidRequest({ message: "Idempotency-Key was already used with a different request body" })
        }
      }
      const abandon = idem === undefined
        ? undefined
        : () => Effect.ignore(idempotency.abandon(principal.accountId, idem.key))
      const reference = `${requestId}:${crypto.randomUUID()}`

      const capture = (admission: RateLimiter.Admission, produced: Produced, startedAt: number) =>
        traced("tollgate.capture", Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const amount = Money.min(produced.charge, call.quote.amount)
          // The capture and the rate-limit settlement touch different stores: with Redis, running
          // them together saves a round trip on every paid request.
          const [settlement] = yield* Effect.all([
            ledger.capture({
              accountId: principal.accountId,
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
            }).pipe(Effect.catchTag("LedgerError", ledgerFailure)),
            admission.settle({
              ...(produced.actualTokens === undefined ? {} : { tokens: produced.actualTokens }),
              ...(produced.actualCredits === undefined ? {} : { credits: produced.actualCredits })
            })
          ], { concurrency: 2 })
          yield* holdSettled(reference)
          yield* Observability.count(Observability.creditsCaptured, {}, amount)
          return settlement
        }))

      const use = ({ admission, hold }: { readonly hold: CreditLedger.Hold; readonly admission: RateLimiter.Admission }) =>
        Effect.gen(function*() {
          const startedAt = yield* Clock.currentTimeMillis
          const outcome = yield* traced(
            "tollgate.backend",
            call.execute({ principal, requestId }).pipe(Effect.tapError((error) =>
              upstreamFailures.has(error._tag) ? Observability.count(Observability.upstreamErrors, { sku: call.sku }) : Effect.void
            )),
            { sku: call.sku }
          )
          const headers = { ...admission.headers, ...balanceHeaders(hold.before) }
          if ("_tag" in outcome) {
            const stream = outcome.stream.pipe(Stream.onExit(() =>
              outcome.produced.pipe(
                Effect.flatMap((produced) => capture(admission, produced, startedAt)),
                Effect.catchCause((cause) =>
                  Effect.logError("settling a streamed call failed", cause).pipe(
                    Effect.andThen(settleFailure(principal, reference, admission, undefined))
                  )
                )
              )
            ))
            return HttpServerResponse.stream(stream, {
              status: outcome.status,
              headers: { ...outcome.headers, ...headers },
              contentType: outcome.contentType
            })
          }
          const settlement = yield* capture(admission, outcome, startedAt)
          const response = HttpServerResponse.setHeaders(outcome.response, principal._tag === "Wallet"
            ? { ...headers, "x-balance-remaining": Money.formatUsd(settlement.balance.availableUsd) }
            : headers)
          if (idem !== undefined) yield* idempotency.complete(principal.accountId, idem.key, toStored(response))
          return response
        })

      return yield* Effect.acquireUseRelease(
        admit(principal, call, reference, idem === undefined ? confirm : undefined).pipe(Effect.onError(() => abandon === undefined ? Effect.void : abandon())),
        use,
        ({ admission }, exit) => Exit.isSuccess(exit) ? Effect.void : settleFailure(principal, reference, admission, abandon)
      )
    }, (effect) => traced("Metered.run", effect))

    return Metered.of({ run })
  }))
