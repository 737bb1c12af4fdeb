/**
 * A route of the public API: method, path and a handler built once from the services it needs.
 * Handlers fail with the tagged errors of `@tollgate/core`; `App` renders them through
 * `ErrorResponse`, so no route writes an error body itself. The list of routes is data, which is
 * how `App` builds its route table (and answers 405 for a known path) and how the OpenAPI document
 * and its coverage test are made.
 *
 * @since 0.1.0
 */
import type { Errors, Money, PricingEngine } from "@tollgate/core"
import { Effect, type Schema, type Scope } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentRequest } from "./RequestContext.ts"
import type * as ToolPrice from "./ToolPrice.ts"

/** @category models */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

/**
 * What a handler may use per request, provided by the server and `App` (the path parameters are
 * read with `params`).
 *
 * @category models
 */
export type RequestServices = HttpServerRequest.HttpServerRequest | Scope.Scope

/** @category models */
export type Handler = Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError, RequestServices>

/**
 * A response of a route as the OpenAPI document shows it.
 *
 * @category models
 */
export interface ResponseDoc {
  readonly description: string
  /** Defaults to `application/json`. */
  readonly contentType?: string
  readonly schema?: Schema.Top
  readonly headers?: ReadonlyArray<string>
  /** An answer as the schema describes it: a paid route's bazaar entry shows it (`Bazaar`). */
  readonly example?: unknown
}

/**
 * What the OpenAPI document says about a route. The schemas are the ones the route decodes with,
 * so the document cannot drift from what is validated.
 *
 * @category models
 */
export interface Docs {
  readonly summary: string
  readonly description?: string
  readonly tags: ReadonlyArray<string>
  /** `public`: no credentials; `key`: bearer API key; `metered`: key or SIWX wallet (or pay). */
  readonly security: "public" | "key" | "admin" | "metered"
  /** A `key` or `admin` route a wallet signed in with SIGN-IN-WITH-X may call too, for its own account. */
  readonly wallets?: true | undefined
  readonly request?: {
    readonly contentType: string
    readonly schema: Schema.Top
    /** A valid request: a paid route's bazaar entry shows it to agents (`Bazaar`). */
    readonly example?: unknown
  }
  readonly query?: Schema.Top
  readonly headers?: ReadonlyArray<{ readonly name: string; readonly description: string; readonly required?: boolean }>
  readonly responses: Readonly<Record<number, ResponseDoc>>
  readonly deprecated?: boolean
  /**
   * A metered route's price when it is the same for every call (the text parser): the OpenAPI
   * document offers it as the operation's x402 payment. Without it the price is quoted per request.
   */
  readonly x402Price?: (tables: PricingEngine.Tables) => Money.Nano
  /** Set by `Endpoint.make` from its declaration's `settlesActual`: the document offers `upto` too. */
  readonly x402SettlesActual?: boolean
}

/**
 * A declared endpoint as an MCP tool (`McpTools`): its name, what it does, the JSON Schema of its
 * input and its price. Set by `OwnEndpoint.make`; tollgate's own routes are listed by `McpTools`.
 *
 * @category models
 */
export interface ToolDoc {
  readonly name: string
  readonly description: string
  readonly inputSchema: { readonly type: "object" } & Readonly<Record<string, unknown>>
  readonly price: ToolPrice.ToolPrice
}

/** @category models */
export interface Route<R = never> {
  readonly method: Method
  /** Path under the API root, e.g. `/api/v1/crypto/rpc/:network` (`:name` matches one segment). */
  readonly path: `/${string}`
  readonly handler: Effect.Effect<Handler, never, R>
  readonly docs?: Docs
  /**
   * A paid route: `App` answers a caller without credentials (the discovery 402, or a 413 for a
   * body over the default cap) before the handler reads the body. Set by `Endpoint.make`, never by
   * what the docs say.
   */
  readonly metered?: boolean
  /** The route as an MCP tool, when it is an embedder's declared endpoint. */
  readonly tool?: ToolDoc
  /**
   * How the route's failures are rendered: `anthropic` for Anthropic's Messages API
   * (`ErrorResponse.renderAnthropic`); by default the spec's bodies.
   */
  readonly errorShape?: "anthropic" | undefined
}

/** @category constructors */
export const make = <R>(
  method: Method,
  path: `/${string}`,
  handler: Effect.Effect<Handler, never, R>,
  docs?: Docs
): Route<R> => docs === undefined ? { method, path, handler } : { method, path, handler, docs }

/**
 * The path parameters of the request being served, by name (`network` for
 * `/api/v1/crypto/rpc/:network`), decoded.
 *
 * @category accessors
 */
export const params: Effect.Effect<Readonly<Record<string, string>>> = Effect.map(CurrentRequest, (current) => current.params)
