/**
 * One paid call through the metered pipeline: what its steps share (the caller, the hold's
 * reference, the step a failure is counted under) and the steps, in the order they run:
 * `start` (a payment sent with the call, or authentication), `authenticated`, `claimAndAdmit`
 * (the `Idempotency-Key`), `admitAndRun`, `admit`, `runAdmitted` (the route's work), `respond`
 * (`respondFirst` when the response may go before the settlement is acknowledged) and `settle`,
 * and `giveBack` for a call that fails or is interrupted once admitted.
 *
 * A mutable class rather than closures: every paid request makes one, and methods on a prototype
 * are not allocated per call (the generator this replaced allocated about 6 KB per call; see
 * docs/benchmarks.md). The services it calls are resolved once per layer (`Services`).
 *
 * @since 0.1.0
 */
import { AbuseGuard, type Admission, type AuthStore, CreditLedger, Errors, KeyCaps, Money, Principal, type Spans, type Staking, X402 } from "@tollgate/core"
import type * as Auth from "@tollgate/core/Auth"
import type * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import type * as RateLimiter from "@tollgate/core/RateLimiter"
import { Clock, Context, Effect, Option, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type * as PerCallPayment from "../PerCallPayment.ts"
import * as RequestContext from "../RequestContext.ts"
import { replayed, toStored } from "../StoredResponse.ts"
import type { LimitPolicy } from "./LimitPolicy.ts"
import * as Metrics from "./Metrics.ts"
import type { DeferredOutcome, MeteredCall, Outcome, Produced, StreamingOutcome } from "./Models.ts"
import type { PaymentRequiredBodies } from "./PaymentRequiredBodies.ts"

/**
 * The services a paid call uses, resolved once when the pipeline's layer is built.
 *
 * @category models
 */
export interface Services {
  readonly auth: Auth.Auth["Service"]
  readonly limiter: RateLimiter.RateLimiter["Service"]
  readonly ledger: CreditLedger.CreditLedger["Service"]
  readonly idempotency: IdempotencyStore.IdempotencyStore["Service"]
  readonly store: Admission.AdmissionStore["Service"]
  readonly bodies: PaymentRequiredBodies["Service"]
  readonly policy: LimitPolicy["Service"]
  readonly staking: Staking.Service
  readonly traced: Spans.Span
  /** How long a hold lives when the call does not say (`MeteredCall.holdTtlMs`). */
  readonly holdTtlMs: number
  /**
   * The abuse guard's name for a caller's block, when the admission's store step can read the
   * guard's blocks (both on Redis): a key's block is read there, one round trip fewer per paid
   * call than asking the guard afterwards.
   */
  readonly abuseBlockKeyOf: ((caller: string) => string) | undefined
  readonly perCall: PerCallPayment.PerCallPayment["Service"] | undefined
  /**
   * Runs a call's settlement on its own, after its response was sent (`PaidCall.respondFirst`);
   * the pipeline's layer awaits the settlements still running when it closes.
   */
  readonly settleLater: (settlement: Effect.Effect<void>) => Effect.Effect<unknown>
}

/** What an admitted call took: the credit hold and the rate-limit admission. */
interface Admitted {
  readonly hold: CreditLedger.Hold
  readonly admission: RateLimiter.Admission
}

/**
 * How long before its hold expires a call's response may still go before its settlement: enough
 * for the settlement to wait for its group (`AdmissionStoreRedis.Options.settlementGroupMs`) and
 * for Redis to answer (its timeout), many times over. A call that ran closer to its hold's expiry
 * is settled first, as every call was before: its capture may find the hold released.
 */
const RESPOND_FIRST_MARGIN_MS = 10_000

/** The USD the call's charge takes: what the hold did not reserve from the allowance (`CreditLedger` capture). */
const usdOfCharge = (hold: CreditLedger.Hold, charge: Money.Nano): Money.Nano =>
  Money.unsafeNano(charge - Math.min(charge, hold.fromAllowance))

/** What the admission's store step found of a key it let through: it exists and is not revoked. */
const keyInGoodStanding: AuthStore.KeyStatus = { accountExists: true, revoked: false }

/** The answer's own headers, then the rate-limit headers of the admission and the balance before the call. */
const callHeaders = ({ admission, hold }: Admitted, own: Readonly<Record<string, string>> | undefined): Record<string, string> => {
  const headers: Record<string, string> = Object.assign({}, own, admission.headers)
  headers["x-service-balance-usd"] = Money.formatUsd(hold.before.availableUsd)
  headers["x-service-balance-token"] = Money.formatUsd(hold.before.availableAllowance)
  return headers
}

/**
 * One paid call: made by `Metered.run` for each call and run by `start`.
 *
 * @category models
 */
export class PaidCall {
  /** The step the call is in, under which a failure that ends it is counted (`Metrics.countFailure`). */
  step: Metrics.Step = "auth"
  principal!: Principal.Principal
  /**
   * An API key whose standing (exists, not revoked) is still to be looked up: the admission's
   * store step looks it up with everything else, and what follows a good standing (the abuse
   * guard) runs after it (`guardAfterStanding`). `undefined` for a wallet, a paying caller, a key
   * checked before the body was read, and a key confirmed on its own before its `Idempotency-Key`
   * is claimed.
   */
  pendingKey: Auth.Unconfirmed["pending"]
  /** The admission's store step read the key's abuse block, so the guard need not ask its store. */
  blockReadByAdmission = false
  /**
   * The hold was captured, or handed to a job or to the settlement after the response
   * (`respondFirst`): an interruption after that gives nothing back.
   */
  settled = false
  /** An x402 `upto` permit pays the call: its hold is funded by the permit, and learns the capture. */
  funding: PerCallPayment.Funding | undefined = undefined
  holdReference = ""
  readonly services: Services
  readonly call: MeteredCall
  readonly context: Context.Context<HttpServerRequest.HttpServerRequest>
  readonly request: HttpServerRequest.HttpServerRequest
  readonly currentRequest: RequestContext.RequestContext
  readonly clock: Clock.Clock
  readonly idempotencyKey: MeteredCall["idempotency"]

  constructor(services: Services, call: MeteredCall, context: Context.Context<HttpServerRequest.HttpServerRequest>) {
    this.services = services
    this.call = call
    this.context = context
    this.request = Context.get(context, HttpServerRequest.HttpServerRequest)
    this.currentRequest = Context.get(context, RequestContext.CurrentRequest)
    this.clock = Context.get(context, Clock.Clock)
    this.idempotencyKey = call.idempotency
  }

  /** Counts the failure that ends the call under the step it came from. */
  readonly countFailure = (error: { readonly _tag: string }) =>
    Effect.sync(() => Metrics.countFailure(error, this.step, this.call.sku, this.context))

  /** `effect`, whose failure counts as `step`'s from when it starts. */
  inStep<A, E>(step: Metrics.Step, effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
    return Effect.suspend(() => {
      this.step = step
      return effect
    })
  }

  start(): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { auth, perCall, traced } = this.services
    // A payment sent with the call pays for it: settled and credited first, then the call runs
    // as the paying wallet (see `PerCallPayment`).
    if (perCall !== undefined && perCall.carries(this.request.headers)) {
      this.step = "other"
      return perCall.pay({
        request: this.request,
        price: this.call.quote.amount,
        settlesActual: this.call.settlesActual,
        serve: (principal, funding) => {
          this.funding = funding
          return Effect.tapError(this.authenticated(Option.some({ principal, confirm: undefined, pending: undefined })), this.countFailure)
        }
      })
    }
    // Credentials checked before the body was read (`requireCredentials`) are not checked again.
    const checked = this.currentRequest.credentials
    const authenticated = checked === undefined
      ? traced("tollgate.auth", auth.authenticateUnconfirmed(this.request.headers))
      : Effect.succeed(Option.some(checked))
    return Effect.flatMap(authenticated, (found) => this.authenticated(found))
  }

  /** The call once its credentials were read: the discovery 402 without any, else the caller's call. */
  authenticated(found: Option.Option<Auth.Unconfirmed>): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    this.step = "other"
    if (Option.isNone(found)) {
      const { quote, settlesActual } = this.call
      return Effect.flatMap(this.services.bodies.discovery({ url: X402.resourceUrl(this.request.url), price: quote.amount, settlesActual }), Effect.fail)
    }
    const principal = found.value.principal
    this.principal = principal
    this.pendingKey = found.value.pending
    this.currentRequest.principalId = Principal.describe(principal)
    // A wallet's staked tokens set today's allowance, so they are current before the hold.
    if (principal._tag === "Wallet") return Effect.flatMap(this.services.staking.refresh(principal), () => this.claimAndAdmit(found.value))
    return this.claimAndAdmit(found.value)
  }

  /** The key whose spend cap the call counts against. */
  spendKeyId(): string | undefined {
    return this.principal._tag === "ApiKey" ? this.principal.keyId : undefined
  }

  /** Claims the `Idempotency-Key`, when there is one, then admits. */
  claimAndAdmit(found: Auth.Unconfirmed): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const idempotencyKey = this.idempotencyKey
    if (idempotencyKey === undefined) return this.admitAndRun()
    // A key is claimed only for a confirmed caller, so a revoked key burns no key.
    this.pendingKey = undefined
    const claiming = this.services.idempotency.claim(this.principal.accountId, idempotencyKey.key, idempotencyKey.fingerprint)
    const claimed = Effect.flatMap(this.inStep("idempotency", claiming), (claim) => {
      switch (claim._tag) {
        case "Replay":
          return Effect.succeed(replayed(claim.response))
        case "InFlight":
          Metrics.countAdmission("idempotency_conflict", this.context)
          return Effect.fail(new Errors.Conflict({ message: "A request with this Idempotency-Key is still in progress" }))
        case "Mismatch":
          Metrics.countAdmission("idempotency_conflict", this.context)
          return Effect.fail(new Errors.InvalidRequest({ message: "Idempotency-Key was already used with a different request body" }))
        case "Claimed":
          return this.admitAndRun()
      }
    })
    return found.confirm === undefined ? claimed : Effect.andThen(this.inStep("auth", found.confirm), claimed)
  }

  /** Admits the call and runs it; an admitted call that fails or is interrupted gives back what it took. */
  admitAndRun(): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const idempotencyKey = this.idempotencyKey
    this.blockReadByAdmission = this.pendingKey !== undefined && this.services.abuseBlockKeyOf !== undefined
    const funded = this.funding === undefined ? "" : CreditLedger.FUNDED_HOLD_PREFIX
    this.holdReference = `${funded}${this.currentRequest.requestId}:${crypto.randomUUID()}`
    const admitted = this.admit()
    return Effect.acquireUseRelease(
      idempotencyKey === undefined
        ? admitted
        : Effect.onError(admitted, () => Effect.ignore(this.services.idempotency.abandon(this.principal.accountId, idempotencyKey.key))),
      (admitted) => this.runAdmitted(admitted),
      (admitted, exit) => exit._tag === "Success" || this.settled ? Effect.void : this.giveBack(admitted, true)
    )
  }

  // What follows a key's standing found good: the abuse guard names the principal and may
  // refuse it, without asking its store again when the admission read the block.
  guardAfterStanding(pendingKey: NonNullable<Auth.Unconfirmed["pending"]>): Effect.Effect<void, Errors.ApiError> {
    return this.inStep("auth", this.blockReadByAdmission ? AbuseGuard.identifyRead(this.principal, 0) : pendingKey.standing(keyInGoodStanding))
  }

  // A refusal after the key's standing was found good: the abuse guard's check runs before the
  // refusal is answered, since the guard's refusal comes first.
  refuseAfterStanding(refusal: Effect.Effect<never, Errors.ApiError>): Effect.Effect<never, Errors.ApiError> {
    return this.pendingKey === undefined ? refusal : Effect.andThen(this.guardAfterStanding(this.pendingKey), this.inStep("other", refusal))
  }

  // One store step decides the admission; what it refused decides the answer (the key's
  // standing first, then a refused payment, the one a client can act on, then the rate limit),
  // and a refusal wrote nothing, so nothing is given back.
  admit(): Effect.Effect<Admitted, Errors.ApiError> {
    const { call, context, pendingKey, principal } = this
    const { abuseBlockKeyOf, limiter, policy, store, traced } = this.services
    const now = this.clock.currentTimeMillisUnsafe()
    const plan = limiter.plan(policy.limitsFor(principal, call), now)
    const admitted = store.admit({
      now,
      accountId: principal.accountId,
      keyId: pendingKey?.keyId,
      abuseBlockKey: this.blockReadByAdmission ? abuseBlockKeyOf!(AbuseGuard.principalCaller(principal)) : undefined,
      spendKeyId: this.spendKeyId(),
      counters: plan.counters,
      hold: { amount: call.quote.amount, reference: this.holdReference, priceVersion: call.quote.version, ttlMs: call.holdTtlMs ?? this.services.holdTtlMs }
    })
    return traced("tollgate.admission", Effect.flatMap(this.inStep("admission", admitted), (reply): Effect.Effect<Admitted, Errors.ApiError> => {
      this.step = "other"
      switch (reply._tag) {
        case "Admitted":
          Metrics.countAdmission("admitted", context)
          return Effect.succeed({ hold: reply.hold, admission: plan.admitted(reply.states) })
        case "KeyRefused":
          this.step = "auth"
          return pendingKey!.standing(reply.status) as Effect.Effect<never, Errors.ApiError>
        case "Blocked":
          this.step = "auth"
          return AbuseGuard.identifyRead(principal, reply.ms) as Effect.Effect<never, Errors.ApiError>
        case "CapReached":
          Metrics.countAdmission("balance", context)
          return this.refuseAfterStanding(Effect.fail(KeyCaps.refusal(reply.cap, reply.spent)))
        case "HoldRefused":
          Metrics.countAdmission("balance", context)
          // A wallet's 402 reads its balance: a store failure there is the admission's.
          return this.refuseAfterStanding(this.inStep("admission", this.holdRefusal(reply.error)))
        case "RateLimited":
          Metrics.countAdmission("rate_limit", context)
          return this.refuseAfterStanding(plan.rejected(reply.states))
      }
    }))
  }

  /** Why the hold was refused, as the caller sees it: a 402 whose body depends on who is paying. */
  holdRefusal(error: CreditLedger.LedgerError): Effect.Effect<never, Errors.ApiError> {
    const { call, principal } = this
    if (error.reason !== "InsufficientFunds") return Effect.die(error)
    if (principal._tag === "ApiKey") {
      return Effect.fail(new Errors.InsufficientBalance({ message: "Insufficient balance to pay for this request" }))
    }
    const { bodies, ledger } = this.services
    return ledger.balance(principal.accountId).pipe(
      Effect.flatMap((balance) => bodies.insufficientBalance({ principal, balance, call, url: X402.resourceUrl(this.request.url) })),
      Effect.flatMap(Effect.fail)
    )
  }

  runAdmitted(admitted: Admitted): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    // The key's standing was found good in the admission's step; what follows it (the abuse
    // guard's check of the principal) runs now, and a refusal gives the admission back.
    // Once the backend is called, a client that disconnects does not stop it: the upstream's
    // work is a real cost, so the call runs to its end (bounded by the backend's own timeout)
    // and is settled with what it used, and only the answer is lost (docs/operations.md).
    const executed = Effect.uninterruptible(Effect.suspend(() => {
      this.step = "backend"
      const startedAt = this.clock.currentTimeMillisUnsafe()
      const outcome = this.call.execute({ principal: this.principal, requestId: this.currentRequest.requestId, holdReference: this.holdReference })
      return Effect.flatMap(this.services.traced("tollgate.backend", outcome, { sku: this.call.sku }), (outcome) => this.respond(admitted, outcome, startedAt))
    }))
    return this.pendingKey === undefined ? executed : Effect.andThen(this.guardAfterStanding(this.pendingKey), executed)
  }

  respond(
    admitted: Admitted,
    outcome: Outcome | StreamingOutcome | DeferredOutcome,
    startedAt: number
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { idempotencyKey, principal } = this
    const { idempotency } = this.services
    const accountId = principal.accountId
    const headers = callHeaders(admitted, "_tag" in outcome ? undefined : outcome.headers)
    if ("_tag" in outcome) {
      if (outcome._tag === "Deferred") {
        this.settled = true
        const response = HttpServerResponse.setHeaders(outcome.response, headers)
        const settled = Effect.as(admitted.admission.settle({}), response)
        if (idempotencyKey === undefined) return settled
        return Effect.andThen(settled, this.inStep("idempotency", Effect.as(idempotency.complete(accountId, idempotencyKey.key, toStored(response)), response)))
      }
      const stream = outcome.stream.pipe(Stream.onExit(() =>
        outcome.produced.pipe(
          Effect.flatMap((produced) => Effect.tapError(this.settle(admitted, produced, startedAt, undefined), this.countFailure)),
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
    // A call an `upto` permit pays settles on chain what was captured, after the response is
    // built (`PerCallPayment`): its capture must be known by then.
    if (
      !this.services.store.settlesInProcess &&
      this.funding === undefined &&
      this.clock.currentTimeMillisUnsafe() < admitted.hold.expiresAt - RESPOND_FIRST_MARGIN_MS &&
      (idempotencyKey === undefined || this.services.store.completesRecordsInStep)
    ) {
      return this.respondFirst(admitted, outcome, startedAt, headers)
    }
    if (principal._tag === "Wallet") {
      // A wallet's response names the balance after the capture, so its idempotency record is
      // completed after the settlement.
      return Effect.flatMap(this.settle(admitted, outcome, startedAt, undefined), (settlement) => {
        headers["x-balance-remaining"] = Money.formatUsd(settlement.balance.availableUsd)
        const response = HttpServerResponse.setHeaders(outcome.response, headers)
        if (idempotencyKey === undefined) return Effect.succeed(response)
        return this.inStep("idempotency", Effect.as(idempotency.complete(accountId, idempotencyKey.key, toStored(response)), response))
      })
    }
    const response = HttpServerResponse.setHeaders(outcome.response, headers)
    const completion = idempotencyKey === undefined ? undefined : { scope: accountId, key: idempotencyKey.key, response: toStored(response) }
    return Effect.as(this.settle(admitted, outcome, startedAt, completion), response)
  }

  /**
   * The response goes before the settlement is acknowledged: the settlement is handed to the
   * store now and runs on its own (`Services.settleLater`). What the response says does not wait
   * for it: a wallet's `X-Balance-Remaining` is its balance at the admission less what the charge
   * takes of its USD (the capture's split), and the rate-limit headers are the admission's. The
   * `Idempotency-Key` record is completed by the settlement, so a replay before it gets the
   * in-progress 409; a call with a key comes here only when the store completes the record in the
   * settlement's own step (`Admission.AdmissionStore.completesRecordsInStep`), since a record
   * completed by a later store call could miss a replay sent once the answer is in. A settlement
   * that fails is logged and the hold given back, as a stream's is; a process that stops before it
   * leaves the hold to expire: the caller is never charged more than the quote.
   */
  respondFirst(
    admitted: Admitted,
    outcome: Outcome,
    startedAt: number,
    headers: Record<string, string>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse> {
    const { idempotencyKey, principal } = this
    if (principal._tag === "Wallet") {
      const charge = Money.min(outcome.charge, this.call.quote.amount)
      headers["x-balance-remaining"] = Money.formatUsd(Money.subtract(admitted.hold.before.availableUsd, usdOfCharge(admitted.hold, charge)))
    }
    const response = HttpServerResponse.setHeaders(outcome.response, headers)
    const completion = idempotencyKey === undefined ? undefined : { scope: principal.accountId, key: idempotencyKey.key, response: toStored(response) }
    const settlement = this.settle(admitted, outcome, startedAt, completion).pipe(
      Effect.tapError(this.countFailure),
      Effect.catchCause((cause) =>
        Effect.logError("settling a call after its response failed", cause).pipe(Effect.andThen(this.giveBack(admitted, false)))
      )
    )
    // Handed over, as a deferred job's hold is: from here the settlement gives back on its own
    // failure. A client gone meanwhile has its interruption applied when the backend's
    // uninterruptible step ends, and `admitAndRun`'s release must not give the hold back then, under
    // a settlement still waiting for its group.
    this.settled = true
    return Effect.as(this.services.settleLater(Effect.asVoid(settlement)), response)
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
    const settled = this.services.store.settle({
      now,
      spendKeyId: this.spendKeyId(),
      capture: {
        accountId: this.principal.accountId,
        reference: this.holdReference,
        amount,
        usage: {
          sku: produced.usage.sku ?? call.sku,
          units: produced.usage.units,
          pricePerUnit: produced.usage.pricePerUnit,
          notes: produced.usage.notes,
          requestId: this.currentRequest.requestId,
          executionMs: now - startedAt,
          promptTokens: produced.usage.promptTokens,
          completionTokens: produced.usage.completionTokens,
          keyId: this.spendKeyId()
        }
      },
      adjustments: admission.settlement({ tokens: produced.actualTokens, credits: produced.actualCredits }),
      completion
    })
    return this.services.traced("tollgate.capture", Effect.matchEffect(this.inStep("admission", settled), {
      onFailure: (error) => error._tag === "LedgerError" ? Effect.die(error) : Effect.fail(error),
      onSuccess: (settlement) => {
        this.settled = true
        if (this.funding !== undefined) this.funding.charged = amount
        Metrics.countCaptured(context, amount)
        return Effect.succeed(settlement)
      }
    }))
  }

  // A failed or interrupted call after admission: the hold is released, the rate-limit
  // reservations go back to what was used (nothing) and, with `freeIdempotencyKey`, the
  // idempotency key is freed.
  giveBack({ admission }: Admitted, freeIdempotencyKey: boolean): Effect.Effect<void> {
    const idempotencyKey = this.idempotencyKey
    const accountId = this.principal.accountId
    return this.services.store.giveBack({
      now: this.clock.currentTimeMillisUnsafe(),
      accountId,
      reference: this.holdReference,
      spendKeyId: this.spendKeyId(),
      adjustments: admission.settlement({ tokens: 0, credits: 0 }),
      abandon: freeIdempotencyKey && idempotencyKey !== undefined ? { scope: accountId, key: idempotencyKey.key } : undefined
    }).pipe(
      Effect.tapError((error) => Effect.sync(() => Metrics.countFailure(error, "admission", this.call.sku, this.context))),
      Effect.ignore
    )
  }
}
