/**
 * What a paid route hands the metered pipeline (`MeteredCall`: what the call is, its worst-case
 * price and its work) and what that work returns: an `Outcome` settled at once, a
 * `StreamingOutcome` settled when its stream ends, or a `DeferredOutcome` whose hold a job settles
 * later. Types only, so the routes, the 402 bodies and the pipeline can share them without
 * depending on one another.
 *
 * @since 0.1.0
 */
import type { Errors, KeyRestrictions, Money, PricingEngine, Principal } from "@tollgate/core"
import type * as RateLimitPolicy from "@tollgate/core/RateLimitPolicy"
import type { Effect, Stream } from "effect"
import type { HttpServerResponse } from "effect/http"

/** @category models */
export type Kind = RateLimitPolicy.Kind

/** @category models */
export type ModelTier = RateLimitPolicy.ModelTier

/** @category models */
export interface Usage {
  readonly units: number
  readonly pricePerUnit: Money.Nano
  readonly notes?: string | undefined
  readonly promptTokens?: number | undefined
  readonly completionTokens?: number | undefined
  /** The sku the usage is recorded under when the work chose it (a fallback model); else the call's. */
  readonly sku?: string | undefined
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
 * The tier of the text model that served, when the work chose another model than the call was
 * admitted for (a fallback model) in another tier: the call's rate limits are then counted under
 * this tier instead of `MeteredCall.modelTier`'s.
 *
 * @category models
 */
export interface ServedBy {
  readonly modelTier?: ModelTier | undefined
}

/**
 * What a call produced: its response (route headers included) and what it used.
 *
 * @category models
 */
export interface Outcome extends Produced, ServedBy {
  readonly response: HttpServerResponse.HttpServerResponse
  /**
   * Headers of the answer that are added with the pipeline's own: the same as setting them on
   * `response`, with one copy of the response's headers fewer.
   */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/**
 * A streamed response whose price is known only when the stream ends or the client disconnects:
 * `produced` is read then, and what it says is captured.
 *
 * @category models
 */
export interface StreamingOutcome extends ServedBy {
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
  /** An operator's own kind (`OwnEndpoint`), whose rates limit the call instead of `kind`'s. */
  readonly custom?: RateLimitPolicy.CustomKind | undefined
  readonly modelTier?: ModelTier | undefined
  /** Tokens reserved at admission (chat: prompt + capped max_tokens). */
  readonly reserveTokens?: number | undefined
  /** RPC credits reserved against the rolling 24 h cap. */
  readonly reserveCredits?: number | undefined
  /** The worst-case price: held at admission; its version is pinned on the hold. */
  readonly quote: PricingEngine.Quote
  /**
   * The charge is known only from the outcome (tokens, seconds of audio), often below the quote: a
   * payment sent with the call may then be an x402 `upto` permit for the quote, settled at the
   * charge (`PerCallPayment`).
   */
  readonly settlesActual?: boolean | undefined
  readonly idempotency?: { readonly key: string; readonly fingerprint: string } | undefined
  /** How long the hold lives if nothing settles it; by default the pipeline's `holdTtlMs`. */
  readonly holdTtlMs?: number | undefined
  /** What a key's `models` and `methods` restrictions judge of the call (`KeyRestrictions.Subject`). */
  readonly subject?: KeyRestrictions.Subject | undefined
  readonly execute: (context: CallContext) => Effect.Effect<Outcome | StreamingOutcome | DeferredOutcome, Errors.ApiError>
}
