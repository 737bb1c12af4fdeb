/**
 * An operator's own paid endpoint, declared without Effect: a path, a sku, a price and an async
 * handler that reports what the call used. It is the same declaration as tollgate's own paid
 * routes (`Endpoint.make`), so the endpoint gets everything they have: API keys and sign-in-with-x
 * wallets, the 402 forms with `PAYMENT-REQUIRED`, the rate limits of its kind with their
 * `x-ratelimit-*` headers, the balance headers, the abuse guard, an opt-in `Idempotency-Key`,
 * usage entries under its sku, metrics and the request log; and it runs on the same ledger as
 * tollgate's API when both are mounted (`Tollgate.make({ endpoints })`).
 *
 * The price is held before the handler runs (the worst case) and at most that is captured: the
 * usage the handler reports, priced, or for a stream the usage of the chunks sent, also when the
 * client disconnects. A handler that throws is a 500 and charges nothing.
 *
 * @since 0.1.0
 */
import { Errors, Money, type PricingEngine, type Principal, type RateLimitPolicy } from "@tollgate/core"
import { Effect, Result, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Endpoint from "./Endpoint.ts"
import type * as Metered from "./Metered.ts"
import * as RequestBody from "./RequestBody.ts"
import * as RequestQuery from "./RequestQuery.ts"
import type * as Route from "./Route.ts"
import * as ToolPrice from "./ToolPrice.ts"

/**
 * A validator of the Standard Schema spec (zod, valibot, ArkType and Effect's
 * `Schema.toStandardSchemaV1` all are one), as far as the body's check needs it.
 *
 * @category models
 */
export interface StandardSchema<Out> {
  readonly "~standard": {
    readonly validate: (value: unknown) => StandardResult<Out> | Promise<StandardResult<Out>>
    /**
     * Standard JSON Schema (zod 4.2 and later, Effect's `Schema.toStandardJSONSchemaV1`): the
     * input's JSON Schema, which the endpoint's MCP tool lists as its input schema.
     */
    readonly jsonSchema?: { readonly input: (options: { readonly target: string }) => Record<string, unknown> } | undefined
  }
}

/** @category models */
export type StandardResult<Out> =
  | { readonly value: Out; readonly issues?: undefined }
  | {
    readonly issues: ReadonlyArray<{
      readonly message: string
      readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
    }>
  }

/**
 * The price of a call:
 * - `{ usd }`: a flat amount per call;
 * - `{ usdPerUnit, maxUnits }`: per unit (a token, a second, a page), `maxUnits(body)` the most a
 *   request may use, which is held;
 * - `{ quote }`: any worst case in USD, computed from the body; the handler reports the actual
 *   amount as `usage.usd`.
 *
 * Amounts are decimal USD strings (`"0.002"`), exact to the nano-USD.
 *
 * @category models
 */
export type Price<Body> =
  | { readonly usd: string }
  | { readonly usdPerUnit: string; readonly maxUnits: (body: Body) => number }
  | { readonly quote: (body: Body) => string }

/**
 * What a call used. Units are priced at `usdPerUnit`, up to the quote's; prompt and completion
 * tokens, when given, are the units (their sum) and are recorded on the usage entry; `usd` is the
 * amount of a `quote`-priced call. Nothing reported: the call is charged its quote.
 *
 * @category models
 */
export interface Usage {
  readonly units?: number | undefined
  readonly promptTokens?: number | undefined
  readonly completionTokens?: number | undefined
  readonly usd?: string | undefined
  /** Recorded on the usage entry (never the request's content). */
  readonly notes?: string | undefined
}

/** A chunk of a streamed reply, with the usage it is worth once sent. @category models */
export type Chunk = string | Uint8Array | { readonly data: string | Uint8Array; readonly usage: Usage }

/**
 * What a handler answers: a JSON body and its usage, or a stream whose chunks carry theirs.
 *
 * @category models
 */
export type Reply =
  | {
    readonly json: unknown
    readonly status?: number | undefined
    readonly headers?: Readonly<Record<string, string>> | undefined
    readonly usage?: Usage | undefined
  }
  | {
    readonly stream: AsyncIterable<Chunk>
    readonly contentType?: string | undefined
    readonly status?: number | undefined
    readonly headers?: Readonly<Record<string, string>> | undefined
  }

/**
 * Who is paying for the call, as the handler sees it.
 *
 * @category models
 */
export interface Caller {
  readonly accountId: string
  readonly type: "api_key" | "wallet"
  /** The wallet's address, for a wallet. */
  readonly address?: string | undefined
}

/** @category models */
export interface Call<Body> {
  readonly body: Body
  readonly caller: Caller
  readonly requestId: string
  /** Aborted when the client goes away: stop the work, what was sent is charged. */
  readonly signal: AbortSignal
}

/** @category options */
export interface Options<Body> {
  /** Default `POST`. */
  readonly method?: Route.Method | undefined
  readonly path: `/${string}`
  /** Names the usage entries, in `/billing/usage-history` and the CSV report. */
  readonly sku: string
  /**
   * The rate limits the calls count against: a built-in kind (default `text`, tier `M`), or the
   * endpoint's own, `{ name, rates: { default: { requests: 30 }, partner: { requests: 120 } } }`
   * (requests and tokens per minute per tier; the config file's `rateLimits.kinds.<name>` sets
   * them over these).
   */
  readonly kind?: Metered.Kind | RateLimitPolicy.CustomKind | undefined
  readonly modelTier?: Metered.ModelTier | undefined
  readonly price: Price<Body>
  /**
   * Checks the JSON body (of a `GET` or `DELETE`: the query parameters, as an object of strings);
   * every issue is named in one 400. Absent: any JSON value.
   */
  readonly body?: StandardSchema<Body> | undefined
  /** Opt in to `Idempotency-Key`. */
  readonly idempotency?: boolean | undefined
  readonly handle: (call: Call<Body>) => Promise<Reply>
  /**
   * The endpoint's name as an MCP tool at `/mcp` (default: the sku, with characters other than
   * letters, digits, `_` and `-` as `_`).
   */
  readonly toolName?: string | undefined
  /** What the OpenAPI document (and the MCP tool's description) says of the endpoint. */
  readonly summary?: string | undefined
  readonly description?: string | undefined
}

/** Why a price or usage an operator wrote is not one: their mistake, so a defect (500). */
const usdOf = (usd: string): Money.Nano => Result.getOrThrow(Money.parseUsd(usd))

const unitsOf = (usage: Usage): number | undefined =>
  usage.promptTokens !== undefined || usage.completionTokens !== undefined
    ? (usage.promptTokens ?? 0) + (usage.completionTokens ?? 0)
    : usage.units

const sum = (a: Usage, b: Usage): Usage => ({
  units: (a.units ?? 0) + (b.units ?? 0),
  ...(a.promptTokens === undefined && b.promptTokens === undefined ? {} : { promptTokens: (a.promptTokens ?? 0) + (b.promptTokens ?? 0) }),
  ...(a.completionTokens === undefined && b.completionTokens === undefined
    ? {}
    : { completionTokens: (a.completionTokens ?? 0) + (b.completionTokens ?? 0) }),
  ...(a.usd === undefined && b.usd === undefined ? {} : { usd: Money.formatUsd(Money.add(usdOf(a.usd ?? "0"), usdOf(b.usd ?? "0"))) })
})

const pathOf = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined): Array<PropertyKey> =>
  (path ?? []).map((segment) => typeof segment === "object" ? segment.key : segment)

const encoder = new TextEncoder()

const bytesOf = (data: string | Uint8Array) => typeof data === "string" ? encoder.encode(data) : data

const callerOf = (principal: Principal.Principal): Caller =>
  principal._tag === "Wallet"
    ? { accountId: principal.accountId, type: "wallet", address: principal.address }
    : { accountId: principal.accountId, type: "api_key" }

/**
 * The endpoint, as a route: pass it to `Tollgate.make({ endpoints })`, or to `App.layer` beside
 * tollgate's routes.
 *
 * @category constructors
 */
export const make = <Body = unknown>(options: Options<Body>): Route.Route<Metered.Metered> => {
  const { price, sku } = options
  // A flat or per-unit price is read once, here: one that is not a USD amount throws at startup.
  const quoteOf = ((): (body: Body) => PricingEngine.Quote => {
    if ("usd" in price) {
      const amount = usdOf(price.usd)
      const flat: PricingEngine.Quote = { sku, amount, version: "operator", units: 1, pricePerUnit: amount }
      return () => flat
    }
    if ("usdPerUnit" in price) {
      const perUnit = usdOf(price.usdPerUnit)
      return (body) => {
        const units = price.maxUnits(body)
        return { sku, amount: Money.multiply(perUnit, units), version: "operator", units, pricePerUnit: perUnit }
      }
    }
    return (body) => {
      const amount = usdOf(price.quote(body))
      return { sku, amount, version: "operator", units: 1, pricePerUnit: amount }
    }
  })()
  /**
   * What `usage` costs, never more than the quote (nothing reported: the quote), with a usage
   * entry whose units times price per unit is the charge: a flat call is one unit at its price, a
   * quote-priced one one unit at what it cost, a per-unit one its units up to the quote's.
   */
  const produced = (quote: PricingEngine.Quote, usage: Usage | undefined): Metered.Produced => {
    const recorded = { notes: usage?.notes, promptTokens: usage?.promptTokens, completionTokens: usage?.completionTokens }
    if ("usdPerUnit" in price) {
      const reported = usage === undefined ? undefined : unitsOf(usage)
      const units = Math.min(reported ?? quote.units, quote.units)
      return { charge: Endpoint.chargeOf(quote, units), usage: { units, pricePerUnit: quote.pricePerUnit, ...recorded } }
    }
    const charge = "quote" in price && usage !== undefined ? Money.min(quote.amount, usdOf(usage.usd ?? "0")) : quote.amount
    return { charge, usage: { units: 1, pricePerUnit: charge, ...recorded } }
  }
  const check = options.body
  const method = options.method ?? "POST"
  const input = method === "GET" || method === "DELETE"
    ? Effect.map(HttpServerRequest.HttpServerRequest, RequestQuery.params)
    : RequestBody.json()
  const decode = Effect.flatMap(input, (json): Effect.Effect<Body, Errors.ApiError> => {
    if (check === undefined) return Effect.succeed(json as Body)
    return Effect.flatMap(Effect.promise(async () => check["~standard"].validate(json)), (result) =>
      result.issues === undefined
        ? Effect.succeed(result.value)
        : Effect.fail(Errors.invalidParameters(result.issues.map((issue) => ({ path: pathOf(issue.path), message: issue.message })))))
  })
  const route = Endpoint.make({
    method,
    path: options.path,
    kind: options.kind ?? "text",
    idempotency: options.idempotency,
    // Priced per unit or by a quote, the charge is known from the handler's usage: x402 `upto` fits.
    settlesActual: !("usd" in price),
    serve: Effect.succeed({
      decode,
      quote: quoteOf,
      shape: () => ({ modelTier: options.modelTier }),
      execute: (body: Body, quote: PricingEngine.Quote, context: Metered.CallContext) => {
        // One signal for the whole call: aborted when the request is interrupted while the handler
        // runs, and when a streamed reply ends or its client goes away.
        const controller = new AbortController()
        const call = { body, caller: callerOf(context.principal), requestId: context.requestId, signal: controller.signal }
        const handled = Effect.promise((signal) => {
          signal.addEventListener("abort", () => controller.abort(), { once: true })
          return options.handle(call)
        })
        return Effect.map(handled, (reply): Metered.Outcome | Metered.StreamingOutcome => {
          if ("json" in reply) {
            return {
              response: HttpServerResponse.jsonUnsafe(reply.json, { status: reply.status, headers: reply.headers }),
              ...produced(quote, reply.usage)
            }
          }
          // The usage of the chunks sent; none carried any: the quote.
          let used: Usage | undefined
          const chunks = Stream.fromAsyncIterable(
            reply.stream,
            (cause) => new Errors.BadGateway({ message: `${sku}: the stream failed: ${String(cause)}` })
          )
          return Endpoint.streaming({
            stream: chunks.pipe(
              Stream.map((chunk) => {
                if (typeof chunk === "string" || chunk instanceof Uint8Array) return bytesOf(chunk)
                used = used === undefined ? chunk.usage : sum(used, chunk.usage)
                return bytesOf(chunk.data)
              }),
              Stream.ensuring(Effect.sync(() => controller.abort()))
            ),
            contentType: reply.contentType ?? "text/plain; charset=utf-8",
            status: reply.status,
            headers: reply.headers,
            // A stream that sent nothing is not charged.
            produced: (bytes) =>
              bytes === 0 ? { charge: Money.zero, usage: { units: 0, pricePerUnit: quote.pricePerUnit } } : produced(quote, used)
          })
        })
      }
    }),
    docs: {
      summary: options.summary ?? `${method} ${options.path}`,
      ...(options.description === undefined ? {} : { description: options.description }),
      tags: ["Own endpoints"],
      // A flat price is the same for every call: the OpenAPI document and the x402 discovery list show it.
      ...("usd" in price ? { x402Price: () => usdOf(price.usd) } : {}),
      responses: { 200: { description: "The endpoint's answer" } }
    }
  })
  const tool: Route.ToolDoc = {
    name: options.toolName ?? sku.replace(/[^A-Za-z0-9_-]/gu, "_"),
    description: options.description ?? options.summary ?? `${method} ${options.path}`,
    inputSchema: inputSchemaOf(check),
    price: toolPrice(price)
  }
  return { ...route, tool }
}

/** The input schema of a body's validator, when it publishes one (Standard JSON Schema); else any object. */
const inputSchemaOf = (check: StandardSchema<unknown> | undefined): Route.ToolDoc["inputSchema"] => {
  const published = check?.["~standard"].jsonSchema?.input({ target: "draft-2020-12" })
  const { $schema: _, ...schema } = published ?? {}
  return { ...schema, type: "object" }
}

/** The price in the words of the 402, for the tool listing. */
const toolPrice = (price: Price<never>): ToolPrice.ToolPrice => {
  if ("usd" in price) return ToolPrice.flat(usdOf(price.usd))
  if ("usdPerUnit" in price) return ToolPrice.perUnit(usdOf(price.usdPerUnit), "unit", "the most units the request may use")
  return ToolPrice.quoted("from the request")
}
