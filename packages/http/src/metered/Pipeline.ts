/**
 * The `Metered` service and its layer: the layer resolves the services the pipeline coordinates
 * once, `run` runs each paid call as a `PaidCall`, and `requireCredentials` is the check a metered
 * route's request passes before its body is read. What the pipeline guarantees is described in
 * `Metered.ts`, its public entry.
 *
 * @since 0.1.0
 */
import { Admission, CreditLedger, type Errors, KeyRestrictions, Spans, Staking, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { Context, Effect, type Fiber, FiberSet, Layer, Option } from "effect"
import { HttpIncomingMessage, HttpServerRequest, type HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as ErrorResponse from "../ErrorResponse.ts"
import * as PerCallPayment from "../payment/PerCallPayment.ts"
import { CurrentRequest } from "../RequestContext.ts"
import { LimitPolicy } from "./LimitPolicy.ts"
import type { MeteredCall } from "./MeteredCall.ts"
import * as Metrics from "./Metrics.ts"
import * as PaidCall from "./PaidCall.ts"
import { PaymentRequiredBodies } from "./PaymentRequiredBodies.ts"

/** @category options */
export interface Options {
  /** How long a hold lives if its request never settles it (a crashed process). */
  readonly holdTtlMs?: number
}

/** @category services */
export class Metered extends Context.Service<Metered, {
  readonly run: (
    call: MeteredCall
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError, HttpServerRequest.HttpServerRequest>
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

/**
 * The pipeline over the services it coordinates.
 *
 * Every paid request runs it, so the common case is a short direct sequence of Effect steps, with
 * no generator and no wrapper per step: authenticate, one admission
 * (`Admission.AdmissionStore.admit`: the key's standing, every rate limit and the credit hold in
 * one store step), the route's work, one settlement (capture with its usage entry, the rate-limit
 * settlement and the idempotency record in one store step), handed to the store before the
 * response goes and acknowledged after it (`PaidCall.respondFirst`). Metrics are updated in place from the
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
  Layer.effect(
    Metered,
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const store = yield* Admission.AdmissionStore
      const bodies = yield* PaymentRequiredBodies
      const traced = yield* Spans.current
      const perCall = Option.getOrUndefined(yield* Effect.serviceOption(PerCallPayment.PerCallPayment))
      // Settlements sent after their responses: a stopping server waits for them (finalizers run
      // last-added first, so before the set would interrupt them), and none is cut short.
      const settlements = yield* FiberSet.make<unknown>()
      yield* Effect.addFinalizer(() => FiberSet.awaitEmpty(settlements))
      const services: PaidCall.Services = {
        auth,
        limiter: yield* RateLimiter.RateLimiter,
        ledger: yield* CreditLedger.CreditLedger,
        idempotency: yield* IdempotencyStore.IdempotencyStore,
        store,
        bodies,
        policy: yield* LimitPolicy,
        staking: yield* Staking.Staking,
        traced,
        holdTtlMs: options.holdTtlMs ?? CreditLedger.DEFAULT_HOLD_TTL_MS,
        perCall,
        settleLater: (settlement) => FiberSet.run(settlements, Effect.uninterruptible(settlement))
      }

      const run = (
        call: MeteredCall
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError, HttpServerRequest.HttpServerRequest> =>
        traced(
          "Metered.run",
          Effect.withFiber((fiber) => {
            const context = fiber.context as Context.Context<HttpServerRequest.HttpServerRequest>
            const paid = new PaidCall.PaidCall(services, call, context)
            return Effect.tapError(paid.start(), paid.countFailure)
          })
        )

      // A key's restrictions that the request line and headers decide (its address, the RPC network
      // of its path) refuse the call before its body is read.
      const requestRestricted = (fiber: Fiber.Fiber<unknown, unknown>): Effect.Effect<void, Errors.Forbidden> => {
        const current = fiber.getRef(CurrentRequest)
        const restrictions = current.credentials?.policy?.restrictions
        if (restrictions === undefined) return Effect.void
        const refused = KeyRestrictions.checkRequest(restrictions, {
          address: current.clientAddress ?? "unknown",
          network: current.params["network"]
        })
        return refused === undefined ? Effect.void : Effect.fail(refused)
      }

      // Every paid call passes it: the request is read from the fiber, not as an Effect step.
      const requireCredentials: Metered["Service"]["requireCredentials"] = Effect.withFiber((fiber) => {
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        // A payment is verified when the call starts, and takes precedence over other credentials.
        if (perCall?.carries(request.headers) === true) return Effect.void
        if (Auth.hasCredentials(request.headers)) {
          return traced("tollgate.auth", Effect.flatMap(Authenticate.upFront(auth), () => requestRestricted(fiber))).pipe(
            Effect.tapError((error) => Effect.sync(() => Metrics.countFailure(error, "auth", "", fiber.context)))
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
    })
  )
