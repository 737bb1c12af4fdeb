/**
 * The metered pipeline: the one function every paid route calls. It authenticates the caller,
 * claims the `Idempotency-Key`, admits the call (rate limits and a credit hold for the worst-case
 * price, all or nothing), runs the route's work, captures the actual price and releases the rest
 * (appending the usage entry in the same ledger step), completes the idempotency record and adds
 * the rate-limit and balance headers. Once admitted, a failure, or an interruption (a client that
 * disconnects) before the route's work starts, releases the hold in a finalizer; once the work has
 * started it is not interrupted, and is captured for what it used; a streamed response captures
 * what it produced when the stream ends, fails or is cut. A call that starts a job (a video) hands its hold over to
 * the job instead (`Deferred`): the job captures or releases it later by its reference. A hold
 * that nothing settles (a process crash, a job never polled) expires.
 *
 * Which 402 a caller gets depends on who it is: an API key with too little balance gets the
 * StandardError `INSUFFICIENT_BALANCE`; a wallet gets the authenticated-wallet body and a caller
 * with no credentials the x402 discovery body, both built by the `PaymentRequiredBodies` service
 * so the x402 module owns their shape. A call that carries an x402 payment is paid by it: when
 * `PerCallPayment` is provided, the payment is settled and credited to the paying wallet at the
 * start of the call, which then runs as that wallet.
 *
 * @since 0.1.0
 */
import { AbuseGuard, Admission, type AuthStore, CreditLedger, Errors, KeyCaps, Money, Principal, Spans, Staking, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { Clock, Context, Effect, Layer, Option, Stream } from "effect"
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Authenticate from "./Authenticate.ts"
import * as ErrorResponse from "./ErrorResponse.ts"
import { LimitPolicy } from "./metered/LimitPolicy.ts"
import { countAdmission, countCaptured, countFailure, type Step } from "./metered/Metrics.ts"
import type { DeferredOutcome, MeteredCall, Outcome, Produced, StreamingOutcome } from "./metered/Models.ts"
import { PaymentRequiredBodies } from "./metered/PaymentRequiredBodies.ts"
import * as PerCallPayment from "./PerCallPayment.ts"
import * as RequestContext from "./RequestContext.ts"
import { replayed, toStored } from "./StoredResponse.ts"

export type { CallContext, DeferredOutcome, Kind, MeteredCall, ModelTier, Outcome, Produced, StreamingOutcome, Usage } from "./metered/Models.ts"
export { LimitPolicy, layerLimits, layerLimitsDefault } from "./metered/LimitPolicy.ts"
export { PaymentRequiredBodies } from "./metered/PaymentRequiredBodies.ts"

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
   * So an anonymous caller cannot make the service parse or token-count a large body. Credentials
   * are checked whole here (`Authenticate.upFront`), so bad ones cannot hold upload memory either.
   * With `PerCallPayment`, an x402 payment header counts as credentials (it is verified when the
   * call starts), and an anonymous body of at most `PerCallPayment.PRICED_BODY_MAX_BYTES` is read
   * and priced, so its 402 offers the call. `App` runs it ahead of every route marked `metered`
   * (`Route.Route.metered`).
   */
  readonly requireCredentials: Effect.Effect<void, Errors.ApiError, HttpServerRequest.HttpServerRequest>
}>()("@tollgate/http/Metered") {}

/** What an admitted call took: the credit hold and the rate-limit admission. */
interface Admitted {
  readonly hold: CreditLedger.Hold
  readonly admission: RateLimiter.Admission
}

const keyStands: AuthStore.KeyStatus = { accountExists: true, revoked: false }

/** The answer's own headers, then the rate-limit headers of the admission and the balance before the call. */
const callHeaders = ({ admission, hold }: Admitted, own: Readonly<Record<string, string>> | undefined): Record<string, string> => {
  const headers: Record<string, string> = Object.assign({}, own, admission.headers)
  headers["x-service-balance-usd"] = Money.formatUsd(hold.before.availableUsd)
  headers["x-service-balance-token"] = Money.formatUsd(hold.before.availableAllowance)
  return headers
}

/**
 * The pipeline over the services it coordinates.
 *
 * Every paid request runs it, so the common case is a short direct sequence of Effect steps, with
 * no generator and no wrapper per step: authenticate, one admission
 * (`Admission.AdmissionStore.admit`: the key's standing, every rate limit and the credit hold in
 * one store step), the route's work, one settlement (capture with its usage entry, the rate-limit
 * settlement and the idempotency record in one store step). Metrics are updated in place from the
 * request's context, and a failure is counted once, by the step it came from. Effect supplies the
 * rest: the errors, and the finalizer that gives back the hold, the reservations and the
 * idempotency key of an admitted call that fails or is interrupted.
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
    const perCall = Option.getOrUndefined(yield* Effect.serviceOption(PerCallPayment.PerCallPayment))

    /** Why a hold was refused, as the caller sees it: a 402 whose body depends on who is paying. */
    const holdRefusal = (principal: Principal.Principal, call: MeteredCall, error: CreditLedger.LedgerError, url: string): Effect.Effect<never, Errors.ApiError> => {
      if (error.reason !== "InsufficientFunds") return Effect.die(error)
      if (principal._tag === "ApiKey") {
        return Effect.fail(new Errors.InsufficientBalance({ message: "Insufficient balance to pay for this request" }))
      }
      return ledger.balance(principal.accountId).pipe(
        Effect.flatMap((balance) => bodies.insufficientBalance({ principal, balance, call, url: X402.resourceUrl(url) })),
        Effect.flatMap(Effect.fail)
      )
    }

    /**
     * One paid call: what its steps share, and the steps as methods. A class rather than closures
     * over `run`'s locals: every paid request makes one, and methods on a prototype are not
     * allocated per call (the generator this replaced allocated about 6 KB per call; see
     * docs/benchmarks.md).
     */
    class Call {
      step: Step = "auth"
      principal!: Principal.Principal
      pending: Auth.Unconfirmed["pending"]
      blockRead = false
      /** The hold was captured or handed to a job: an interruption after that gives nothing back. */
      settled = false
      reference = ""
      readonly call: MeteredCall
      readonly context: Context.Context<HttpServerRequest.HttpServerRequest>
      readonly request: HttpServerRequest.HttpServerRequest
      readonly current: RequestContext.RequestContext
      readonly clock: Clock.Clock
      readonly idem: MeteredCall["idempotency"]

      constructor(call: MeteredCall, context: Context.Context<HttpServerRequest.HttpServerRequest>) {
        this.call = call
        this.context = context
        this.request = Context.get(context, HttpServerRequest.HttpServerRequest)
        this.current = Context.get(context, RequestContext.CurrentRequest)
        this.clock = Context.get(context, Clock.Clock)
        this.idem = call.idempotency
      }

      readonly counted = (error: { readonly _tag: string }) =>
        Effect.sync(() => countFailure(error, this.step, this.call.sku, this.context))

      /** `effect`, counted as `step` from when it starts. */
      at<A, E>(step: Step, effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
        return Effect.suspend(() => {
          this.step = step
          return effect
        })
      }

      start(): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        // A payment sent with the call pays for it: settled and credited first, then the call runs
        // as the paying wallet (see `PerCallPayment`).
        if (perCall !== undefined && perCall.carries(this.request.headers)) {
          this.step = "other"
          return perCall.pay({
            request: this.request,
            price: this.call.quote.amount,
            serve: (principal) => Effect.tapError(this.authenticated(Option.some({ principal, confirm: undefined, pending: undefined })), this.counted)
          })
        }
        // Credentials checked before the body was read (`requireCredentials`) are not checked again.
        const checked = this.current.credentials
        const authenticated = checked === undefined
          ? traced("tollgate.auth", auth.authenticateUnconfirmed(this.request.headers))
          : Effect.succeed(Option.some(checked))
        return Effect.flatMap(authenticated, (found) => this.authenticated(found))
      }

      authenticated(found: Option.Option<Auth.Unconfirmed>): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        this.step = "other"
        if (Option.isNone(found)) {
          return Effect.flatMap(bodies.discovery({ url: X402.resourceUrl(this.request.url), price: this.call.quote.amount }), Effect.fail)
        }
        const principal = found.value.principal
        this.principal = principal
        this.pending = found.value.pending
        this.current.principalId = Principal.describe(principal)
        // A wallet's staked tokens set today's allowance, so they are current before the hold.
        if (principal._tag === "Wallet") return Effect.flatMap(staking.refresh(principal), () => this.claim(found.value))
        return this.claim(found.value)
      }

      /** The key whose spend cap the call counts against. */
      spendKeyId(): string | undefined {
        return this.principal._tag === "ApiKey" ? this.principal.keyId : undefined
      }

      /** Claims the `Idempotency-Key`, when there is one, then admits. */
      claim(found: Auth.Unconfirmed): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        const idem = this.idem
        if (idem === undefined) return this.admitAndUse()
        // A key is claimed only for a confirmed caller, so a revoked key burns no key.
        this.pending = undefined
        const claimed = Effect.flatMap(this.at("idempotency", idempotency.claim(this.principal.accountId, idem.key, idem.fingerprint)), (claim) => {
          switch (claim._tag) {
            case "Replay":
              return Effect.succeed(replayed(claim.response))
            case "InFlight":
              countAdmission("idempotency_conflict", this.context)
              return Effect.fail(new Errors.Conflict({ message: "A request with this Idempotency-Key is still in progress" }))
            case "Mismatch":
              countAdmission("idempotency_conflict", this.context)
              return Effect.fail(new Errors.InvalidRequest({ message: "Idempotency-Key was already used with a different request body" }))
            case "Claimed":
              return this.admitAndUse()
          }
        })
        return found.confirm === undefined ? claimed : Effect.andThen(this.at("auth", found.confirm), claimed)
      }

      admitAndUse(): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        this.blockRead = this.pending !== undefined && blockKeyOf !== undefined
        this.reference = `${this.current.requestId}:${crypto.randomUUID()}`
        const idem = this.idem
        const admitted = this.admit()
        return Effect.acquireUseRelease(
          idem === undefined
            ? admitted
            : Effect.onError(admitted, () => Effect.ignore(idempotency.abandon(this.principal.accountId, idem.key))),
          (admitted) => this.use(admitted),
          (admitted, exit) => exit._tag === "Success" || this.settled ? Effect.void : this.giveBack(admitted, true)
        )
      }

      // What follows a key's standing found good: the abuse guard names the principal and may
      // refuse it, without asking its store again when the admission read the block.
      afterStanding(pending: NonNullable<Auth.Unconfirmed["pending"]>): Effect.Effect<void, Errors.ApiError> {
        return this.at("auth", this.blockRead ? AbuseGuard.identifyRead(this.principal, 0) : pending.standing(keyStands))
      }

      // A refusal after the key's standing was found good: what follows the standing runs before
      // the refusal is answered, since the guard's refusal comes first.
      stood(refusal: Effect.Effect<never, Errors.ApiError>): Effect.Effect<never, Errors.ApiError> {
        return this.pending === undefined ? refusal : Effect.andThen(this.afterStanding(this.pending), this.at("other", refusal))
      }

      // One store step decides the admission; what it refused decides the answer (the key's
      // standing first, then a refused payment, the one a client can act on, then the rate limit),
      // and a refusal wrote nothing, so nothing is given back.
      admit(): Effect.Effect<Admitted, Errors.ApiError> {
        const { call, context, pending, principal } = this
        const now = this.clock.currentTimeMillisUnsafe()
        const plan = limiter.plan(policy.limitsFor(principal, call), now)
        const admitted = store.admit({
          now,
          accountId: principal.accountId,
          keyId: pending?.keyId,
          abuseBlockKey: this.blockRead ? blockKeyOf!(AbuseGuard.principalCaller(principal)) : undefined,
          spendKeyId: this.spendKeyId(),
          counters: plan.counters,
          hold: { amount: call.quote.amount, reference: this.reference, priceVersion: call.quote.version, ttlMs: call.holdTtlMs ?? ttlMs }
        })
        return traced("tollgate.admission", Effect.flatMap(this.at("admission", admitted), (reply): Effect.Effect<Admitted, Errors.ApiError> => {
          this.step = "other"
          switch (reply._tag) {
            case "Admitted":
              countAdmission("admitted", context)
              return Effect.succeed({ hold: reply.hold, admission: plan.admitted(reply.states) })
            case "KeyRefused":
              this.step = "auth"
              return pending!.standing(reply.status) as Effect.Effect<never, Errors.ApiError>
            case "Blocked":
              this.step = "auth"
              return AbuseGuard.identifyRead(principal, reply.ms) as Effect.Effect<never, Errors.ApiError>
            case "CapReached":
              countAdmission("balance", context)
              return this.stood(Effect.fail(KeyCaps.refusal(reply.cap, reply.spent)))
            case "HoldRefused":
              countAdmission("balance", context)
              // A wallet's 402 reads its balance: a store failure there is the admission's.
              return this.stood(this.at("admission", holdRefusal(principal, call, reply.error, this.request.url)))
            case "RateLimited":
              countAdmission("rate_limit", context)
              return this.stood(plan.rejected(reply.states))
          }
        }))
      }

      use(admitted: Admitted): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        // The key's standing was found good in the admission's step; what follows it (the abuse
        // guard's check of the principal) runs now, and a refusal gives the admission back.
        // Once the backend is called, a client that disconnects does not stop it: the upstream's
        // work is a real cost, so the call runs to its end (bounded by the backend's own timeout)
        // and is settled with what it used, and only the answer is lost (docs/operations.md).
        const executed = Effect.uninterruptible(Effect.suspend(() => {
          this.step = "backend"
          const startedAt = this.clock.currentTimeMillisUnsafe()
          const outcome = this.call.execute({ principal: this.principal, requestId: this.current.requestId, holdReference: this.reference })
          return Effect.flatMap(traced("tollgate.backend", outcome, { sku: this.call.sku }), (outcome) => this.respond(admitted, outcome, startedAt))
        }))
        return this.pending === undefined ? executed : Effect.andThen(this.afterStanding(this.pending), executed)
      }

      respond(
        admitted: Admitted,
        outcome: Outcome | StreamingOutcome | DeferredOutcome,
        startedAt: number
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
        const { idem, principal } = this
        const accountId = principal.accountId
        const headers = callHeaders(admitted, "_tag" in outcome ? undefined : outcome.headers)
        if ("_tag" in outcome) {
          if (outcome._tag === "Deferred") {
            this.settled = true
            const response = HttpServerResponse.setHeaders(outcome.response, headers)
            const settled = Effect.as(admitted.admission.settle({}), response)
            if (idem === undefined) return settled
            return Effect.andThen(settled, this.at("idempotency", Effect.as(idempotency.complete(accountId, idem.key, toStored(response)), response)))
          }
          const stream = outcome.stream.pipe(Stream.onExit(() =>
            outcome.produced.pipe(
              Effect.flatMap((produced) => Effect.tapError(this.settle(admitted, produced, startedAt, undefined), this.counted)),
              Effect.catchCause((cause) =>
                Effect.logError("settling a streamed call failed", cause).pipe(Effect.andThen(this.giveBack(admitted, false)))
              )
            )
          ))
          return Effect.succeed(HttpServerResponse.stream(stream, {
            status: outcome.status,
            headers: { ...outcome.headers, ...headers },
            contentType: outcome.contentType
          }))
        }
        if (principal._tag === "Wallet") {
          // A wallet's response names the balance after the capture, so its idempotency record is
          // completed after the settlement.
          return Effect.flatMap(this.settle(admitted, outcome, startedAt, undefined), (settlement) => {
            headers["x-balance-remaining"] = Money.formatUsd(settlement.balance.availableUsd)
            const response = HttpServerResponse.setHeaders(outcome.response, headers)
            if (idem === undefined) return Effect.succeed(response)
            return this.at("idempotency", Effect.as(idempotency.complete(accountId, idem.key, toStored(response)), response))
          })
        }
        const response = HttpServerResponse.setHeaders(outcome.response, headers)
        const completion = idem === undefined ? undefined : { scope: accountId, key: idem.key, response: toStored(response) }
        return Effect.as(this.settle(admitted, outcome, startedAt, completion), response)
      }

      settle(
        { admission }: Admitted,
        produced: Produced,
        startedAt: number,
        completion: Admission.SettleInput["completion"]
      ): Effect.Effect<CreditLedger.Settlement, Errors.ApiError> {
        const { call, context } = this
        const amount = Money.min(produced.charge, call.quote.amount)
        const now = this.clock.currentTimeMillisUnsafe()
        const settled = store.settle({
          now,
          spendKeyId: this.spendKeyId(),
          capture: {
            accountId: this.principal.accountId,
            reference: this.reference,
            amount,
            usage: {
              sku: call.sku,
              units: produced.usage.units,
              pricePerUnit: produced.usage.pricePerUnit,
              notes: produced.usage.notes,
              requestId: this.current.requestId,
              executionMs: now - startedAt,
              promptTokens: produced.usage.promptTokens,
              completionTokens: produced.usage.completionTokens,
              keyId: this.spendKeyId()
            }
          },
          adjustments: admission.settlement({ tokens: produced.actualTokens, credits: produced.actualCredits }),
          completion
        })
        return traced("tollgate.capture", Effect.matchEffect(this.at("admission", settled), {
          onFailure: (error) => error._tag === "LedgerError" ? Effect.die(error) : Effect.fail(error),
          onSuccess: (settlement) => {
            this.settled = true
            countCaptured(context, amount)
            return Effect.succeed(settlement)
          }
        }))
      }

      // A failed or interrupted call after admission: the hold is released, the rate-limit
      // reservations go back to what was used (nothing) and the idempotency key is freed.
      giveBack({ admission }: Admitted, freeKey: boolean): Effect.Effect<void> {
        const idem = this.idem
        const accountId = this.principal.accountId
        return store.giveBack({
          now: this.clock.currentTimeMillisUnsafe(),
          accountId,
          reference: this.reference,
          spendKeyId: this.spendKeyId(),
          adjustments: admission.settlement({ tokens: 0, credits: 0 }),
          abandon: freeKey && idem !== undefined ? { scope: accountId, key: idem.key } : undefined
        }).pipe(
          Effect.tapError((error) => Effect.sync(() => countFailure(error, "admission", this.call.sku, this.context))),
          Effect.ignore
        )
      }
    }

    const run = (call: MeteredCall): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError, HttpServerRequest.HttpServerRequest> =>
      traced("Metered.run", Effect.withFiber((fiber) => {
        const context = fiber.context as Context.Context<HttpServerRequest.HttpServerRequest>
        const state = new Call(call, context)
        return Effect.tapError(state.start(), state.counted)
      }))

    const requireCredentials: Metered["Service"]["requireCredentials"] = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      // A payment is verified when the call starts, and takes precedence over other credentials.
      if (perCall?.carries(request.headers) === true) return Effect.void
      if (Auth.hasCredentials(request.headers)) {
        return Effect.withFiber((fiber) =>
          traced("tollgate.auth", Authenticate.upFront(auth)).pipe(
            Effect.tapError((error) => Effect.sync(() => countFailure(error, "auth", "", fiber.context))),
            Effect.asVoid
          )
        )
      }
      return Effect.flatMap(HttpIncomingMessage.MaxBodySize, (cap): Effect.Effect<void, Errors.ApiError> => {
        const declared = Number(request.headers["content-length"] ?? 0)
        if (cap !== undefined && declared > Number(cap)) {
          return Effect.fail(ErrorResponse.bodyTooLarge(cap))
        }
        // A small body is read and priced, so the 402 can offer the call at its price.
        if (perCall?.pricesAnonymous(request.headers) === true) return Effect.void
        return Effect.flatMap(bodies.discovery({ url: X402.resourceUrl(request.url) }), Effect.fail)
      })
    })

    return Metered.of({ run, requireCredentials })
  }))
