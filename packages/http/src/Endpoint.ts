/**
 * A paid endpoint as one declaration: how its request is decoded, how it is priced and what it
 * executes. Everything else a paid call needs is the declaration's, the same for every paid route
 * of tollgate and for an operator's own (`OwnEndpoint`):
 *
 * - the caller's credentials are checked before the body is read (`Route.Route.metered`, which
 *   `App` runs ahead of the handler), so a caller without any gets the discovery 402 at once;
 * - a malformed `Idempotency-Key` is a 400 before the body is read, when the endpoint takes one;
 * - decoding fails with a 400 DetailedError naming every bad field;
 * - a request the price tables cannot price is a 400 naming the field;
 * - admission (rate limits, the credit hold of the quote, the 402 forms), settlement (the capture
 *   of at most the quote, the usage entry under the sku), stream-aware capture and the response
 *   headers are `Metered.run`'s.
 *
 * @since 0.1.0
 */
import { Errors, IdempotencyStore, type KeyRestrictions, type Money, PricingEngine, type RateLimitPolicy } from "@tollgate/core"
import { Context, Effect, Result, Stream } from "effect"
import { HttpServerRequest } from "effect/http"
import * as Crypto from "node:crypto"
import * as Metered from "./Metered.ts"
import * as Route from "./Route.ts"

/**
 * What the limits see of a call besides its kind: a text model's tier and the tokens or credits
 * it reserves; and how long its hold lives when a job outlives the request.
 *
 * @category models
 */
export interface Shape {
  readonly modelTier?: Metered.ModelTier | undefined
  readonly reserveTokens?: number | undefined
  readonly reserveCredits?: number | undefined
  readonly holdTtlMs?: number | undefined
}

/**
 * How one request is served, built once from the services the endpoint needs.
 *
 * @category models
 */
export interface Serve<A> {
  /**
   * Reads and checks the request; every bad field in one 400 (`RequestBody.schema` does). Any
   * Effect: a route every call of which counts (the RPC proxy) writes it as a short chain of steps,
   * reading its path parameters from `CurrentRequest`.
   */
  readonly decode: Effect.Effect<A, Errors.ApiError, Route.RequestServices>
  /** The worst case of the decoded request: held at admission, never exceeded by the capture. */
  readonly quote: (input: A) => PricingEngine.Quote | PricingEngine.Unpriced
  readonly shape?: ((input: A, quote: PricingEngine.Quote) => Shape) | undefined
  /**
   * What makes two requests under one `Idempotency-Key` the same request (with the path); by
   * default the JSON of the input. Read only for a request that carries a key.
   */
  readonly fingerprint?: ((input: A) => string | Uint8Array) | undefined
  /**
   * What a key's `models` and `methods` restrictions judge of the decoded request: the model it
   * names, the JSON-RPC methods it calls. Judged before any credit is held.
   */
  readonly subject?: ((input: A) => KeyRestrictions.Subject) | undefined
  readonly execute: (
    input: A,
    quote: PricingEngine.Quote,
    context: Metered.CallContext
  ) => Effect.Effect<Metered.Outcome | Metered.StreamingOutcome | Metered.DeferredOutcome, Errors.ApiError>
}

/**
 * The declaration. `serve` is built once, when the application is; `docs` is what the OpenAPI
 * document says (its security is the metered one, and an endpoint that takes an `Idempotency-Key`
 * documents the header).
 *
 * @category models
 */
export interface Declaration<A, R> {
  readonly method: Route.Method
  readonly path: `/${string}`
  /** The rate limits the calls count against: a built-in kind, or an operator's own with its rates. */
  readonly kind: Metered.Kind | RateLimitPolicy.CustomKind
  /** Opt in to `Idempotency-Key`: a repeated key replays the first response and charges once. */
  readonly idempotency?: boolean | undefined
  /**
   * The charge is known only from the call's outcome (tokens, seconds): the 402 and the OpenAPI
   * document offer an x402 `upto` permit for the quote, and the actual charge is what is settled.
   */
  readonly settlesActual?: boolean | undefined
  readonly serve: Effect.Effect<Serve<A>, never, R>
  readonly docs: Omit<Route.Docs, "security" | "x402SettlesActual">
  /** How failures are rendered (`Route.Route.errorShape`); by default the spec's bodies. */
  readonly errorShape?: Route.Route["errorShape"]
}

/**
 * The 400 of a request the price tables have no price for, naming the field.
 *
 * @category errors
 */
export const unpriced = (problem: PricingEngine.Unpriced): Errors.InvalidRequest =>
  Errors.invalidParameters([{ path: [problem.field], message: problem.message }])

// Made once: a request without a key (most) or with a malformed one allocates nothing for the check.
const noKey: Result.Result<undefined, never> = Result.succeed(undefined)
const keyRefused = Result.fail(new Errors.InvalidRequest({ message: "Idempotency-Key must match [A-Za-z0-9_-]{1,255}" }))

/**
 * The request's `Idempotency-Key`, absent or well-formed; a malformed one is a 400. Synchronous,
 * for routes that check it on a short chain of steps (the RPC proxy).
 *
 * @category decoding
 */
export const idempotencyKey = (request: HttpServerRequest.HttpServerRequest): Result.Result<string | undefined, Errors.InvalidRequest> => {
  const key = request.headers["idempotency-key"]
  if (key === undefined) return noKey
  return IdempotencyStore.KEY_PATTERN.test(key) ? Result.succeed(key) : keyRefused
}

const idempotencyHeader = {
  name: "Idempotency-Key",
  description: "Optional, [A-Za-z0-9_-]{1,255}: the response is stored for 24 hours keyed on (account, key) and " +
    "replayed with `Idempotent-Replayed: true`; a duplicate still in progress gets 409"
}

const fingerprintOf = (path: string, data: string | Uint8Array) =>
  Crypto.createHash("sha256").update(path).update("\n").update(data).digest("base64url")

/**
 * The route of a declaration.
 *
 * @category constructors
 */
export const make = <A, R>(declaration: Declaration<A, R>): Route.Route<R | Metered.Metered> => {
  const { idempotency = false, method, path, settlesActual = false } = declaration
  // A custom kind's rates replace the table of the kind it is counted as.
  const { custom, kind } = typeof declaration.kind === "string"
    ? { custom: undefined, kind: declaration.kind }
    : { custom: declaration.kind, kind: "text" as const }
  const docs: Route.Docs = {
    ...declaration.docs,
    security: "metered",
    ...(settlesActual ? { x402SettlesActual: true } : {}),
    ...(idempotency ? { headers: [...(declaration.docs.headers ?? []), idempotencyHeader] } : {})
  }
  const handler = Effect.gen(function*() {
    const metered = yield* Metered.Metered
    const serve = yield* declaration.serve
    const { decode, execute, quote: quoteOf, shape: shapeOf, subject: subjectOf } = serve
    const fingerprint = serve.fingerprint ?? ((input: A) => JSON.stringify(input))
    // Every paid call runs what follows: plain steps, no generator, one call object.
    const call = (input: A, key: string | undefined) => {
      const quote = quoteOf(input)
      if (PricingEngine.isUnpriced(quote)) return Effect.fail(unpriced(quote))
      const shape = shapeOf?.(input, quote)
      return metered.run({
        sku: quote.sku,
        kind,
        custom,
        quote,
        modelTier: shape?.modelTier,
        reserveTokens: shape?.reserveTokens,
        reserveCredits: shape?.reserveCredits,
        holdTtlMs: shape?.holdTtlMs,
        subject: subjectOf?.(input),
        settlesActual,
        idempotency: key === undefined ? undefined : { key, fingerprint: fingerprintOf(path, fingerprint(input)) },
        execute: (context) => execute(input, quote, context)
      })
    }
    const answer: Route.Handler = idempotency
      ? Effect.withFiber((fiber) => {
        const key = idempotencyKey(Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest))
        if (Result.isFailure(key)) return Effect.fail(key.failure)
        return Effect.flatMap(decode, (input) => call(input, key.success))
      })
      : Effect.flatMap(decode, (input) => call(input, undefined))
    return answer
  })
  const route = { ...Route.make(method, path, handler, docs), metered: true }
  return declaration.errorShape === undefined ? route : { ...route, errorShape: declaration.errorShape }
}

/**
 * A streamed answer charged for what was sent: `produced` reads how many bytes left by the time
 * the stream ended, failed or the client went away (a chunk counts once the response has taken it).
 *
 * @category constructors
 */
export const streaming = (options: {
  readonly stream: Stream.Stream<Uint8Array, Errors.ApiError>
  readonly contentType: string
  readonly status?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly produced: (bytesSent: number) => Metered.Produced
}): Metered.StreamingOutcome => {
  let bytes = 0
  return {
    _tag: "Streaming",
    stream: Stream.tap(options.stream, (chunk) => Effect.sync(() => void (bytes += chunk.length))),
    contentType: options.contentType,
    status: options.status,
    headers: options.headers,
    produced: Effect.sync(() => options.produced(bytes))
  }
}

/**
 * The charge of `units` at `quote`'s price per unit, never more than the quote.
 *
 * @category pricing
 */
export const chargeOf = (quote: PricingEngine.Quote, units: number): Money.Nano =>
  Math.min(quote.amount, Math.ceil(units * quote.pricePerUnit)) as Money.Nano

/**
 * The outcome of a call at a flat price: charged its whole quote, as one unit.
 *
 * @category pricing
 */
export const flat = (quote: PricingEngine.Quote, response: Metered.Outcome["response"], notes: string): Metered.Outcome => ({
  response,
  charge: quote.amount,
  usage: { units: 1, pricePerUnit: quote.pricePerUnit, notes }
})
