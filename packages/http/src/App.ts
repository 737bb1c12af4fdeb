/**
 * The HTTP application: the routes of the public API behind one global middleware, as one Effect
 * that answers every request. Every response, 404s and errors included, carries `x-request-id` (a
 * fresh id of the server's; a well-formed id the client sent comes back as `x-client-request-id`),
 * `x-service-version` and `x-service-timestamp` (plus `x-service-host-name` on errors); JSON bodies
 * are compressed by `Accept-Encoding`; request bodies are capped unless a route raises its own cap;
 * an unknown path is a 404 and a known path with the wrong method a 405, both as StandardError
 * JSON; a node request naming an HTTP version other than 1.0 and 1.1 (node's parser lets `HTTP/2.0`
 * through on a plain connection) is a 505.
 *
 * **Details**
 *
 * The dispatch is tollgate's own rather than `HttpRouter`'s: the route table is built once at
 * startup (`RouteTable`), each request is matched once, and the middleware's work (request id,
 * service headers, request log, metrics, abuse guard, compression, body cap, error rendering) is
 * done in that one step, with one change of the fiber's context and no Effect layer per concern.
 * The platform stays Effect's: `NodeHttpServer` serves the Effect, and the embedding handlers of
 * `Handlers` run it on fetch or node requests.
 *
 * @since 0.1.0
 */
import { AbuseGuard, Errors } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import { ByteSize, Cause, Context, Effect, Exit, Layer, Option, type Schema, type Scope, Tracer } from "effect"
import {
  HttpEffect,
  HttpIncomingMessage,
  HttpMiddleware,
  HttpPlatform,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import * as Bazaar from "./Bazaar.ts"
import * as ClientAddress from "./ClientAddress.ts"
import * as Documentation from "./Documentation.ts"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as Metered from "./Metered.ts"
import * as Observability from "./Observability.ts"
import * as RequestContext from "./RequestContext.ts"
import * as RequestLog from "./RequestLog.ts"
import type * as Route from "./Route.ts"
import * as RouteTable from "./RouteTable.ts"
import { ServiceInfo } from "./ServiceInfo.ts"
import * as Timestamp from "./Timestamp.ts"
import * as UploadBudget from "./UploadBudget.ts"

/** @category options */
export interface Options {
  /** Default cap of request bodies; routes that take uploads raise it for themselves. */
  readonly maxBodyBytes?: number
  /** Schemas of the 402 bodies of metered routes, for the OpenAPI document. */
  readonly paymentRequiredSchemas?: ReadonlyArray<Schema.Top>
  /** Proxies whose `X-Forwarded-For`/`Forwarded` name the client (see `ClientAddress`); default none. */
  readonly trustedProxies?: ClientAddress.TrustedProxies
  /** Bytes of upload bodies held in memory at once (`UploadBudget`); default `UploadBudget.DEFAULT_MAX_BYTES`. */
  readonly uploadMemoryBytes?: number
  /**
   * Paid resources served outside these routes (MCP tools), listed at `GET /.well-known/x402`
   * after the paid routes.
   */
  readonly paidResources?: ReadonlyArray<Bazaar.Resource>
}

/**
 * The Effect that answers a request: it never fails, every error is rendered.
 *
 * @category models
 */
export type Handle = Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | Scope.Scope>

/**
 * The built application, as the server and the embedding handlers take it.
 *
 * @category services
 */
export class Application extends Context.Service<Application, {
  readonly handle: Handle
  /**
   * The name of a request's server span: the method and the route pattern
   * (`POST /api/v1/crypto/rpc/:network`), the method alone when no route matches. Servers provide
   * it as `HttpMiddleware.SpanNameGenerator`.
   */
  readonly spanName: (request: HttpServerRequest.HttpServerRequest) => string
  /** Whether a path (a query is ignored) is one the application serves, with any method. */
  readonly serves: (path: string) => boolean
  /** The path of every route, `:name` for a parameter: what a host routes to the application. */
  readonly paths: ReadonlyArray<string>
}>()("@tollgate/http/App/Application") {}

/**
 * Who makes an in-process request: the remote address of the request that made it, which the
 * abuse guard and the logs see, and the MCP tool it runs, which its usage entry names.
 *
 * @category models
 */
export interface Caller {
  readonly remoteAddress: Option.Option<string>
  readonly tool: string
}

/**
 * The application as its routes may call it in process (`Mcp`, whose tool calls are requests to
 * the paid routes): every route, and a fetch-style handler over the same dispatch and middleware
 * a request from the network goes through.
 *
 * @category services
 */
export class Dispatch extends Context.Service<Dispatch, {
  readonly routes: ReadonlyArray<Route.Route<any>>
  readonly fetch: (request: Request, caller: Caller) => Promise<Response>
}>()("@tollgate/http/App/Dispatch") {}

/** The caller of an in-process request (`Dispatch.fetch`); none for a request from the network. */
const DispatchedBy = Context.Reference<Caller | undefined>("@tollgate/http/App/DispatchedBy", {
  defaultValue: () => undefined
})

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const compress = HttpMiddleware.compression({ minSize: 256 })

/** Methods whose requests carry no body the route reads, so they need no body cap in context. */
const bodiless = new Set(["GET", "HEAD"])

/** A route as the table holds it: its handler with every failure rendered, and whether it reads a body. */
interface Entry {
  readonly handler: Handle
  readonly readsBody: boolean
  /** A paid route's bazaar extension, for its 402s. */
  readonly bazaar: Bazaar.Extension | undefined
}

/**
 * The response of a failed handler: a tagged error through `ErrorResponse.render`, an unreadable
 * body through `fromServerError`, a defect as a 500. An interruption (the client went away) stays
 * one, so the server answers it as such.
 */
const recoverWith =
  (render: (error: Errors.ApiError) => HttpServerResponse.HttpServerResponse) =>
  (cause: Cause.Cause<unknown>): Effect.Effect<HttpServerResponse.HttpServerResponse, never> => {
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
    const error = Cause.findErrorOption(cause)
    if (Option.isNone(error)) return ErrorResponse.fromDefect(Cause.squash(cause))
    if (HttpServerError.isHttpServerError(error.value)) return ErrorResponse.fromServerError(error.value)
    return Effect.succeed(render(error.value as Errors.ApiError))
  }

const recover = recoverWith(ErrorResponse.render)
const recoverAnthropic = recoverWith(ErrorResponse.renderAnthropic)

const unmatched = "unmatched"

/**
 * Builds the application once: every route's handler, the route table, and the Effect that
 * dispatches a request through the global middleware.
 *
 * @category constructors
 */
export const make = <R>(routes: ReadonlyArray<Route.Route<R>>, options: Options = {}) =>
  Effect.gen(function*() {
    const discovery = Bazaar.routes(routes, options.paidResources)
    const all = [...routes, ...discovery, ...Documentation.routes([...routes, ...discovery], options)]
    yield* Observability.initialize
    const info = yield* ServiceInfo
    const platform = yield* HttpPlatform.HttpPlatform
    const guard = Option.getOrUndefined(yield* Effect.serviceOption(AbuseGuard.AbuseGuard))
    const log = Option.getOrUndefined(yield* Effect.serviceOption(RequestLog.RequestLog))
    const metered = Option.getOrUndefined(yield* Effect.serviceOption(Metered.Metered))
    const auth = Option.getOrUndefined(yield* Effect.serviceOption(Auth.Auth))
    const uploadBudget = options.uploadMemoryBytes === undefined
      ? yield* UploadBudget.UploadBudget
      : UploadBudget.make({ maxBytes: options.uploadMemoryBytes })
    const maxBodySize = ByteSize.bytes(options.maxBodyBytes ?? 1_048_576)
    const trusted = options.trustedProxies ?? ClientAddress.none

    // Set once `handle` exists: routes may call the application in process only while serving.
    const self: { web?: (request: Request, context?: Context.Context<never>) => Promise<Response> } = {}
    const dispatch = Dispatch.of({
      routes: all,
      fetch: (request, caller) => self.web!(request, Context.make(DispatchedBy, caller) as Context.Context<never>)
    })
    const services = yield* Effect.context<never>()

    const entries: Array<readonly [string, string, Entry]> = []
    for (const route of all) {
      const built: Route.Handler = yield* Effect.provideService(route.handler, Dispatch, dispatch)
      // A metered route answers a caller without credentials before it reads or counts the body.
      const handler = route.metered === true && metered !== undefined
        ? Effect.andThen(metered.requireCredentials, built)
        : built
      // Interruptible as a route under `HttpRouter` was: a client that goes away stops its route.
      // A constant answer (an exit, such as the network list's) has nothing to interrupt or recover.
      const constant = Exit.isExit(handler) && Exit.isSuccess(handler)
        ? Effect.succeed(handler.value as HttpServerResponse.HttpServerResponse)
        : undefined
      entries.push([route.method, route.path, {
        handler: constant ??
          Effect.catchCause(Effect.interruptible(handler), route.errorShape === "anthropic" ? recoverAnthropic : recover),
        readsBody: !bodiless.has(route.method),
        bazaar: Bazaar.extension(route)
      }])
    }
    const table = RouteTable.make(entries)

    /**
     * The 404 or 405 of a request no route takes. One that carries credentials has them checked
     * first, so the abuse guard counts the failure against the key or wallet when they are valid,
     * not against the address every anonymous caller behind it shares.
     */
    const unmatchedAnswer = (request: HttpServerRequest.HttpServerRequest, allow: ReadonlyArray<string> | undefined): Handle => {
      const refusal = Effect.succeed(ErrorResponse.render(
        allow !== undefined
          ? new Errors.MethodNotAllowed({ message: `Method ${request.method} is not allowed here`, allow })
          : new Errors.NotFound({ message: `No route for ${request.method} ${pathOf(request.url)}` })
      ))
      if (auth === undefined || guard === undefined || !Auth.hasCredentials(request.headers)) return refusal
      return Effect.andThen(Effect.ignore(auth.authenticate(request.headers)), refusal)
    }

    /** What every response gets just before it is sent: the service headers, the log line, the metrics. */
    const finish = (
      fiberContext: Context.Context<never>,
      request: HttpServerRequest.HttpServerRequest,
      context: RequestContext.RequestContext,
      response: HttpServerResponse.HttpServerResponse
    ) => {
      const headers: Array<readonly [string, string]> = [
        ["x-request-id", context.requestId],
        ["x-service-version", info.version],
        ["x-service-timestamp", Timestamp.now()]
      ]
      if (context.clientRequestId !== undefined) headers.push(["x-client-request-id", context.clientRequestId])
      if (response.status >= 400) headers.push(["x-service-host-name", info.hostName])
      const entry = {
        requestId: context.requestId,
        clientRequestId: context.clientRequestId,
        traceId: traceIdOf(fiberContext),
        principalId: context.principalId,
        method: request.method,
        route: context.route,
        status: response.status,
        latencyMs: performance.now() - context.startedAt
      }
      log?.record(entry)
      Observability.recordRequest(entry, fiberContext)
      return HttpServerResponse.setHeaders(response, headers)
    }

    const handle: Handle = Effect.withFiber((fiber) => {
      const fiberContext = fiber.context
      const request = Context.getUnsafe(fiberContext, HttpServerRequest.HttpServerRequest)
      const match = table.lookup(request.method, request.url)
      const found = match._tag === "Found" ? match : undefined
      const sent = request.headers["x-request-id"]
      const clientAddress = Option.isSome(request.remoteAddress)
        ? ClientAddress.resolve(request.remoteAddress.value, request.headers, trusted)
        : "unknown"
      const context: RequestContext.RequestContext = {
        requestId: crypto.randomUUID(),
        clientRequestId: sent !== undefined && REQUEST_ID.test(sent) ? sent : undefined,
        startedAt: performance.now(),
        route: found === undefined ? unmatched : found.pattern,
        params: found === undefined ? {} : found.params,
        clientAddress,
        bazaar: found?.value.bazaar,
        tool: Context.get(fiberContext, DispatchedBy)?.tool,
        principalId: undefined
      }
      const tracking = guard === undefined
        ? undefined
        : AbuseGuard.track(
          guard,
          clientAddress,
          Auth.hasCredentials(request.headers)
        )
      HttpEffect.appendPreResponseHandlerUnsafe(fiberContext, (_request, response) => {
        // The guard counts a failed attempt; one of a caller blocked meanwhile is answered with the block.
        const settle = tracking?.settle(response.status)
        if (settle === undefined) return Effect.succeed(finish(fiberContext, request, context, response))
        return Effect.map(settle, (refused) => {
          if (Option.isNone(refused)) return finish(fiberContext, request, context, response)
          Observability.countUnsafe(Observability.admissions, { outcome: "abuse_guard" }, fiberContext)
          return finish(fiberContext, request, context, ErrorResponse.render(refused.value))
        })
      })

      // One change of the fiber's context for everything the request adds to it; the enclosing
      // request (`HttpEffect.toHandled`) restores the fiber's context when it ends.
      let requestContext = Context.add(fiberContext, RequestContext.CurrentRequest, context)
      if (tracking !== undefined) requestContext = Context.add(requestContext, AbuseGuard.CurrentCaller, tracking.caller)
      if (found !== undefined && found.value.readsBody) {
        requestContext = Context.add(
          Context.add(requestContext, HttpIncomingMessage.MaxBodySize, maxBodySize),
          UploadBudget.UploadBudget,
          uploadBudget
        )
      }
      const compressed = request.headers["accept-encoding"] !== undefined
      if (compressed) requestContext = Context.add(requestContext, HttpPlatform.HttpPlatform, platform)
      fiber.setContext(requestContext)

      if (found !== undefined && fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer) {
        const span = Context.getOrUndefined(fiberContext, Tracer.ParentSpan)
        if (span !== undefined && span._tag === "Span" && span.sampled) span.attribute("http.route", found.pattern)
      }

      const version = unsupportedVersion(request)
      const answer: Handle = version !== undefined
        ? Effect.succeed(ErrorResponse.render(
          new Errors.HttpVersionNotSupported({ message: `HTTP/${version} is not supported; use HTTP/1.1` })
        ))
        : found !== undefined
        ? found.value.handler
        : unmatchedAnswer(request, match._tag === "MethodNotAllowed" ? match.allow : undefined)
      // The compression middleware reads `HttpPlatform` from the context set above.
      const run = compressed ? compress(answer) as Handle : answer
      if (tracking?.admit === undefined) return run
      return Effect.matchEffect(tracking.admit, {
        onFailure: (error) =>
          Effect.as(Observability.count(Observability.admissions, { outcome: "abuse_guard" }), ErrorResponse.render(error)),
        onSuccess: () => run
      })
    })
    const spanName = (request: HttpServerRequest.HttpServerRequest): string => {
      const match = table.lookup(request.method, request.url)
      return match._tag === "Found" ? `${request.method} ${match.pattern}` : request.method
    }
    // An in-process request carries the address of the request that made it.
    const dispatched: Handle = Effect.withFiber((fiber) => {
      const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
      const remoteAddress = Context.get(fiber.context, DispatchedBy)?.remoteAddress ?? Option.none()
      fiber.setContext(Context.add(fiber.context, HttpServerRequest.HttpServerRequest, request.modify({ remoteAddress })))
      return handle
    })
    self.web = HttpEffect.toWebHandlerWith<never, HttpServerRequest.HttpServerRequest | Scope.Scope>(services)(dispatched)
    const serves = (path: string) => table.lookup("GET", path)._tag !== "NotFound"
    return { handle, spanName, serves, paths: [...new Set(all.map((route) => route.path))] }
  })

/** The trace id of the request's server span, when an OpenTelemetry tracer (not Effect's own) records it. */
const traceIdOf = (fiberContext: Context.Context<never>): string | undefined => {
  const span = Context.getOrUndefined(fiberContext, Tracer.ParentSpan)
  if (span === undefined || span._tag !== "Span" || !span.sampled) return undefined
  return Context.get(fiberContext, Tracer.Tracer) === Tracer.nativeTracer ? undefined : span.traceId
}

/**
 * The HTTP version a node request names when it is neither 1.0 nor 1.1; a fetch request, which
 * names none, is served.
 */
const unsupportedVersion = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const source = request.source as { readonly httpVersionMajor?: number; readonly httpVersionMinor?: number; readonly httpVersion?: string }
  if (source.httpVersionMajor === undefined || (source.httpVersionMajor === 1 && source.httpVersionMinor! <= 1)) return undefined
  return source.httpVersion
}

const pathOf = (url: string): string => {
  const query = url.indexOf("?")
  return query === -1 ? url : url.slice(0, query)
}

/**
 * The whole application as a layer providing `Application`: routes, 404/405, service headers,
 * compression.
 *
 * @category layers
 */
export const layer = <R>(routes: ReadonlyArray<Route.Route<R>>, options: Options = {}) =>
  Layer.effectContext(Effect.map(make(routes, options), (app) =>
    // The span name generator goes into the context the servers run requests in (HttpServer.serve,
    // Handlers), where the tracer middleware reads it before the request reaches `handle`.
    Context.make(Application, app).pipe(Context.add(HttpMiddleware.SpanNameGenerator, app.spanName)) as Context.Context<Application>))
