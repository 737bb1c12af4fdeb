/**
 * One paid call through the metered pipeline: what its steps share (the caller, the hold's
 * reference, the step a failure is counted under) and the steps, in the order they run. `Pipeline`
 * makes one per paid request; a route never uses it directly.
 *
 * **Details**
 *
 * The steps: `start` (authentication, or `paidBy` a payment sent with the call), `authenticated`
 * (then `walletReady` for a wallet), `claimAndAdmit` (the `Idempotency-Key`), `admitAndRun`,
 * `admit`, `runAdmitted` (the route's work), `respond` (with `recount` for a call a fallback model
 * of another tier served), then `settleAndAnswer`, which takes the path `SettlementChoice.choose`
 * names (`handOver`, `streamThenSettle`, `respondFirst`, `settleThenRespond`), `settle`, and
 * `giveBack` for a call that fails or is interrupted once admitted. A payment sent with the call is
 * accepted before the admission and finished after the settlement (`PerCallPayment`), each path
 * calling `answered`.
 *
 * A mutable class rather than closures: every paid request makes one, and methods on a prototype
 * are not allocated per call, where a generator per call allocated about 6 KB (docs/benchmarks.md).
 * The services it calls are resolved once per layer (`Services`).
 *
 * @since 0.1.0
 */
import {
  type Admission,
  CreditLedger,
  Errors,
  KeyCaps,
  KeyRestrictions,
  Money,
  Principal,
  type Spans,
  type Staking,
  X402
} from "@tollgate/core"
import type * as Auth from "@tollgate/core/Auth"
import type * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import type * as RateLimiter from "@tollgate/core/RateLimiter"
import type * as RateLimitPolicy from "@tollgate/core/RateLimitPolicy"
import { Clock, Context, Effect, Option, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type * as PerCallPayment from "../payment/PerCallPayment.ts"
import * as RequestContext from "../RequestContext.ts"
import { replayed, toStored } from "../StoredResponse.ts"
import type { LimitPolicy } from "./LimitPolicy.ts"
import type { DeferredOutcome, MeteredCall, ModelTier, Outcome, Produced, StreamingOutcome } from "./MeteredCall.ts"
import * as Metrics from "./Metrics.ts"
import type { PaymentRequiredBodies } from "./PaymentRequiredBodies.ts"
import * as SettlementChoice from "./SettlementChoice.ts"

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
  readonly perCall: PerCallPayment.PerCallPayment["Service"] | undefined
  /**
   * Runs a call's settlement on its own, after its response was sent (`PaidCall.respondFirst`);
   * the pipeline's layer awaits the settlements still running when it closes.
   */
  readonly settleLater: (settlement: Effect.Effect<void>) => Effect.Effect<unknown>
}

/**
 * What an admitted call took: the credit hold and the rate-limit admission, which `recount`
 * replaces when the call is counted under another model's tier.
 */
interface Admitted {
  readonly hold: CreditLedger.Hold
  admission: RateLimiter.Reservation
}

/** A key's credentials confirmed with the store: its standing, and the policy read with it. */
const confirmed = (found: Option.Option<Auth.Unconfirmed>): Effect.Effect<Option.Option<Auth.Unconfirmed>, Errors.ApiError> => {
  if (Option.isNone(found) || found.value.confirm === undefined) return Effect.succeed(found)
  const { principal } = found.value
  return Effect.map(found.value.confirm, (policy) => Option.some({ principal, confirm: undefined, policy }))
}

/** A payment sent with the call, accepted by the service that finishes it. */
interface Payment {
  readonly service: PerCallPayment.PerCallPayment["Service"]
  readonly accepted: PerCallPayment.Accepted
}

/**
 * The notes of a call's usage entry: the MCP tool that ran it first, so an operator reading the
 * usage history sees which tool an entry paid for, then the route's own notes.
 */
const notesOf = (notes: string | undefined, tool: string | undefined): string | undefined =>
  tool === undefined ? notes : notes === undefined || notes === "" ? `MCP tool ${tool}` : `MCP tool ${tool}, ${notes}`

/**
 * The answer's own headers, then the rate-limit headers of the admission, the balance before the
 * call and those of a payment sent with it.
 */
const callHeaders = (
  { admission, hold }: Admitted,
  own: Readonly<Record<string, string>> | undefined,
  payment: Payment | undefined
): Record<string, string> => {
  const headers: Record<string, string> = Object.assign({}, own, admission.headers)
  headers["x-service-balance-usd"] = Money.formatUsd(hold.before.availableUsd)
  headers["x-service-balance-token"] = Money.formatUsd(hold.before.availableAllowance)
  return payment === undefined ? headers : Object.assign(headers, payment.accepted.headers)
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
  /** The rate-limit overrides the store keeps for the caller's account and key, read with its key's standing. */
  storedLimits: RateLimitPolicy.StoredOverrides | undefined = undefined
  /**
   * The hold was captured, or handed to a job or to the settlement after the response
   * (`respondFirst`): an interruption after that gives nothing back.
   */
  settled = false
  /** A payment sent with the call pays for it (`paidBy`). */
  payment: Payment | undefined = undefined
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
    // A payment sent with the call pays for it: accepted first, then the call runs as the paying
    // wallet (see `PerCallPayment`).
    if (perCall !== undefined && perCall.carries(this.request.headers)) {
      this.step = "other"
      const { quote, settlesActual } = this.call
      return Effect.flatMap(
        perCall.accept({ request: this.request, price: quote.amount, settlesActual }),
        (accepted) => accepted._tag === "Replayed" ? Effect.succeed(accepted.response) : this.paidBy({ service: perCall, accepted })
      )
    }
    // Credentials checked before the body was read (`requireCredentials`) are not checked again;
    // others are confirmed here, before anything is claimed or held, since the key's standing
    // brings its restrictions.
    const checked = this.currentRequest.credentials
    const authenticated = checked === undefined
      ? traced("tollgate.auth", Effect.flatMap(auth.authenticateUnconfirmed(this.request.headers), confirmed))
      : Effect.succeed(Option.some(checked))
    return Effect.flatMap(authenticated, (found) => this.authenticated(found))
  }

  /**
   * The call an accepted payment pays, as its wallet. Its answer is given by the payment's
   * `finish`: after the settlement on each path (`answered`), and here for a call that failed,
   * which is answered as one whose payment stayed as credit.
   */
  paidBy(payment: Payment): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    this.payment = payment
    const { accepted, service } = payment
    return this.authenticated(Option.some({ principal: accepted.principal, confirm: undefined })).pipe(
      Effect.tapError(this.countFailure),
      Effect.catch((error) => service.finish(accepted, { _tag: "Failed", error })),
      Effect.onInterrupt(() => service.abandon(accepted))
    )
  }

  /** The answer of a call that was settled (`charge` captured) or replayed, finishing its payment. */
  answered(
    response: HttpServerResponse.HttpServerResponse,
    charge: Money.Nano | undefined
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const payment = this.payment
    return payment === undefined ? Effect.succeed(response) : payment.service.finish(payment.accepted, { _tag: "Served", response, charge })
  }

  /** The call once its credentials were read: the discovery 402 without any, else the caller's call. */
  authenticated(found: Option.Option<Auth.Unconfirmed>): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    this.step = "other"
    if (Option.isNone(found)) {
      const { quote, settlesActual } = this.call
      return Effect.flatMap(
        this.services.bodies.discovery({ url: X402.resourceUrl(this.request.url), price: quote.amount, settlesActual }),
        Effect.fail
      )
    }
    const { policy, principal } = found.value
    const restrictions = policy?.restrictions
    this.principal = principal
    this.storedLimits = policy?.limits
    this.currentRequest.principalId = Principal.describe(principal)
    // A restricted key's call outside its operations, models or methods is refused before any
    // credit is held or its Idempotency-Key claimed.
    const refused = restrictions === undefined ? undefined : KeyRestrictions.checkCall(restrictions, this.call.sku, this.call.subject)
    if (refused !== undefined) return Effect.fail(refused)
    if (principal._tag === "Wallet") return Effect.flatMap(this.walletReady(principal), () => this.claimAndAdmit(found.value))
    return this.claimAndAdmit(found.value)
  }

  /**
   * What a wallet's call needs before its admission, read side by side: its staked tokens, which set
   * today's allowance, and the rate-limit override the store keeps for its account (a key's comes
   * with its standing; a wallet has none to read it with).
   */
  walletReady(principal: Principal.WalletPrincipal): Effect.Effect<void, Errors.ApiError> {
    const { auth, staking } = this.services
    return Effect.map(
      Effect.all([this.inStep("auth", auth.storedLimits(principal.accountId, undefined)), staking.refresh(principal)], { concurrency: 2 }),
      ([limits]) => {
        this.step = "other"
        this.storedLimits = limits
      }
    )
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
    const claiming = this.services.idempotency.claim(this.principal.accountId, idempotencyKey.key, idempotencyKey.fingerprint)
    const claimed = Effect.flatMap(this.inStep("idempotency", claiming), (claim) => {
      switch (claim._tag) {
        case "Replay": {
          const response = replayed(claim.response)
          return this.payment === undefined
            ? Effect.succeed(response)
            : this.answered(HttpServerResponse.setHeaders(response, this.payment.accepted.headers), undefined)
        }
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
    const funded = this.payment?.accepted.fundsHold === true ? CreditLedger.FUNDED_HOLD_PREFIX : ""
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

  // One store step decides the admission; what it refused decides the answer (the spend cap,
  // then a refused payment, the one a client can act on, then the rate limit), and a refusal
  // wrote nothing, so nothing is given back.
  admit(): Effect.Effect<Admitted, Errors.ApiError> {
    const { call, context, principal } = this
    const { limiter, policy, store, traced } = this.services
    const now = this.clock.currentTimeMillisUnsafe()
    const plan = limiter.plan(policy.limitsFor(principal, call, this.storedLimits), now)
    const admitted = store.admit({
      now,
      accountId: principal.accountId,
      spendKeyId: this.spendKeyId(),
      counters: plan.counters,
      hold: {
        amount: call.quote.amount,
        reference: this.holdReference,
        priceVersion: call.quote.version,
        ttlMs: call.holdTtlMs ?? this.services.holdTtlMs
      }
    })
    return traced(
      "tollgate.admission",
      Effect.flatMap(this.inStep("admission", admitted), (reply): Effect.Effect<Admitted, Errors.ApiError> => {
        this.step = "other"
        switch (reply._tag) {
          case "Admitted":
            Metrics.countAdmission("admitted", context)
            return Effect.succeed({ hold: reply.hold, admission: plan.admitted(reply.states) })
          case "CapReached":
            Metrics.countAdmission("balance", context)
            return Effect.fail(KeyCaps.refusal(reply.cap, reply.spent))
          case "HoldRefused":
            Metrics.countAdmission("balance", context)
            // A wallet's 402 reads its balance: a store failure there is the admission's.
            return this.inStep("admission", this.holdRefusal(reply.error))
          case "RateLimited":
            Metrics.countAdmission("rate_limit", context)
            return plan.rejected(reply.states)
        }
      })
    )
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
    // Once the backend is called, a client that disconnects does not stop it: the upstream's
    // work is a real cost, so the call runs to its end (bounded by the backend's own timeout)
    // and is settled with what it used, and only the answer is lost (docs/operations.md).
    return Effect.uninterruptible(Effect.suspend(() => {
      this.step = "backend"
      const startedAt = this.clock.currentTimeMillisUnsafe()
      const outcome = this.call.execute({
        principal: this.principal,
        requestId: this.currentRequest.requestId,
        holdReference: this.holdReference
      })
      return Effect.flatMap(
        this.services.traced("tollgate.backend", outcome, { sku: this.call.sku }),
        (outcome) => this.respond(admitted, outcome, startedAt)
      )
    }))
  }

  /**
   * Settles the call and answers it, on the path `SettlementChoice.choose` names, once its rate
   * limits are counted under the tier of the model that served it.
   */
  respond(
    admitted: Admitted,
    outcome: Outcome | StreamingOutcome | DeferredOutcome,
    startedAt: number
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const tier = "_tag" in outcome && outcome._tag === "Deferred" ? undefined : outcome.modelTier
    return tier === undefined || tier === this.call.modelTier
      ? this.settleAndAnswer(admitted, outcome, startedAt)
      : Effect.andThen(this.recount(admitted, tier), () => this.settleAndAnswer(admitted, outcome, startedAt))
  }

  /**
   * A call served by a model of another tier than the one it was admitted for (a fallback): the
   * serving tier's limits count it without checking (the call is served already; its next one is
   * refused if this one went past them), then the admitted tier's counters are given back. When
   * the store cannot be reached the call stays counted where it was admitted.
   */
  recount(admitted: Admitted, modelTier: ModelTier): Effect.Effect<void> {
    const { limiter, policy } = this.services
    const limits = policy.limitsFor(this.principal, { ...this.call, modelTier }, this.storedLimits)
    return limiter.count(limits).pipe(
      Effect.flatMap((counted) => {
        const { admission } = admitted
        admitted.admission = counted
        return admission.cancel
      }),
      Effect.catch(() => Effect.void)
    )
  }

  /** Settles the call and answers it, on the path `SettlementChoice.choose` names. */
  settleAndAnswer(
    admitted: Admitted,
    outcome: Outcome | StreamingOutcome | DeferredOutcome,
    startedAt: number
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { store } = this.services
    const kind = "_tag" in outcome ? outcome._tag : "Outcome"
    const headers = callHeaders(admitted, "_tag" in outcome ? undefined : outcome.headers, this.payment)
    // The choice follows the outcome's kind, so each path gets the outcome it names.
    switch (
      SettlementChoice.choose({
        outcome: kind,
        settlesInProcess: store.settlesInProcess,
        paymentSettlesCharge: this.payment?.accepted.fundsHold === true,
        holdLeftMs: admitted.hold.expiresAt - this.clock.currentTimeMillisUnsafe(),
        idempotencyKey: this.idempotencyKey !== undefined,
        completesRecordsInStep: store.completesRecordsInStep
      })
    ) {
      case "Deferred":
        return this.handOver(admitted, outcome as DeferredOutcome, headers)
      case "Stream":
        return this.streamThenSettle(admitted, outcome as StreamingOutcome, startedAt, headers)
      case "RespondFirst":
        return this.respondFirst(admitted, outcome as Outcome, startedAt, headers)
      case "SettleThenRespond":
        return this.settleThenRespond(admitted, outcome as Outcome, startedAt, headers)
    }
  }

  /**
   * The call's work outlives the request (a video job): its hold is left open for the job, the
   * rate-limit admission is settled as it was taken, and the `Idempotency-Key` record completed.
   */
  handOver(
    admitted: Admitted,
    outcome: DeferredOutcome,
    headers: Record<string, string>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { idempotencyKey } = this
    this.settled = true
    const response = HttpServerResponse.setHeaders(outcome.response, headers)
    const settled = Effect.as(admitted.admission.settle({}), response)
    const completed = idempotencyKey === undefined
      ? settled
      : Effect.andThen(
        settled,
        this.inStep(
          "idempotency",
          Effect.as(this.services.idempotency.complete(this.principal.accountId, idempotencyKey.key, toStored(response)), response)
        )
      )
    return this.payment === undefined ? completed : Effect.flatMap(completed, (response) => this.answered(response, undefined))
  }

  /**
   * A streamed answer goes at once and is settled when its stream ends, whatever ends it, with
   * what the call reports it used then; a settlement that fails gives the hold back.
   */
  streamThenSettle(
    admitted: Admitted,
    outcome: StreamingOutcome,
    startedAt: number,
    headers: Record<string, string>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse> {
    const settled = outcome.produced.pipe(
      Effect.flatMap((produced) =>
        Effect.as(Effect.tapError(this.settle(admitted, produced, startedAt, undefined), this.countFailure), this.chargeOf(produced))
      ),
      Effect.catchCause((cause) =>
        Effect.logError("settling a streamed call failed", cause).pipe(Effect.andThen(this.giveBack(admitted, false)), Effect.as(undefined))
      )
    )
    const payment = this.payment
    const stream: Stream.Stream<Uint8Array, Errors.ApiError> = outcome.stream.pipe(
      Stream.onExit((): Effect.Effect<unknown> =>
        payment === undefined
          ? settled
          // The payment is finished once the stream's settlement is known; its answer is gone by then.
          : Effect.flatMap(
            settled,
            (charge) => Effect.ignore(payment.service.finish(payment.accepted, { _tag: "Served", response, charge }))
          )
      )
    )
    const response: HttpServerResponse.HttpServerResponse = HttpServerResponse.stream(stream, {
      status: outcome.status,
      headers: { ...outcome.headers, ...headers },
      contentType: outcome.contentType
    })
    return Effect.succeed(response)
  }

  /** The response waits for the settlement. */
  settleThenRespond(
    admitted: Admitted,
    outcome: Outcome,
    startedAt: number,
    headers: Record<string, string>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { idempotencyKey, principal } = this
    const accountId = principal.accountId
    if (principal._tag === "Wallet") {
      // A wallet's response names the balance after the capture, and a payment sent with the call
      // is finished after it, so its idempotency record is completed after the settlement.
      return Effect.flatMap(this.settle(admitted, outcome, startedAt, undefined), (settlement) => {
        headers["x-balance-remaining"] = Money.formatUsd(settlement.balance.availableUsd)
        const answered = this.answered(HttpServerResponse.setHeaders(outcome.response, headers), this.chargeOf(outcome))
        if (idempotencyKey === undefined) return answered
        return Effect.flatMap(
          answered,
          (response) =>
            this.inStep(
              "idempotency",
              Effect.as(this.services.idempotency.complete(accountId, idempotencyKey.key, toStored(response)), response)
            )
        )
      })
    }
    // An API key's call: no payment is sent with it (a payment's call runs as its wallet).
    const response = HttpServerResponse.setHeaders(outcome.response, headers)
    const completion = idempotencyKey === undefined
      ? undefined
      : { scope: accountId, key: idempotencyKey.key, response: toStored(response) }
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
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> {
    const { idempotencyKey, principal } = this
    const charge = this.chargeOf(outcome)
    if (principal._tag === "Wallet") {
      headers["x-balance-remaining"] = Money.formatUsd(
        Money.subtract(
          admitted.hold.before.availableUsd,
          CreditLedger.split(charge, admitted.hold.fromAllowance, this.payment?.accepted.fundsHold === true).fromUsd
        )
      )
    }
    const response = HttpServerResponse.setHeaders(outcome.response, headers)
    const completion = idempotencyKey === undefined
      ? undefined
      : { scope: principal.accountId, key: idempotencyKey.key, response: toStored(response) }
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
    const handed = Effect.as(this.services.settleLater(Effect.asVoid(settlement)), response)
    return this.payment === undefined ? handed : Effect.flatMap(handed, (response) => this.answered(response, charge))
  }

  /** What the call's settlement captures: what it used, at most its quote. */
  chargeOf(produced: Produced): Money.Nano {
    return Money.min(produced.charge, this.call.quote.amount)
  }

  settle(
    { admission }: Admitted,
    produced: Produced,
    startedAt: number,
    completion: Admission.SettleInput["completion"]
  ): Effect.Effect<CreditLedger.Settlement, Errors.ApiError> {
    const { call, context } = this
    const amount = this.chargeOf(produced)
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
          notes: notesOf(produced.usage.notes, this.currentRequest.tool),
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
    return this.services.traced(
      "tollgate.capture",
      Effect.matchEffect(this.inStep("admission", settled), {
        onFailure: (error) => error._tag === "LedgerError" ? Effect.die(error) : Effect.fail(error),
        onSuccess: (settlement) => {
          this.settled = true
          Metrics.countCaptured(context, amount)
          return Effect.succeed(settlement)
        }
      })
    )
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
