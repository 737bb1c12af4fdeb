/**
 * The HTTP application: the routes of the public API behind one set of global middleware. Every
 * response, 404s and errors included, carries `x-request-id`, `x-service-version` and
 * `x-service-timestamp` (plus `x-service-host-name` on errors); JSON bodies are compressed by
 * `Accept-Encoding`; request bodies are capped unless a route raises its own cap; an unknown path
 * is a 404 and a known path with the wrong method a 405, both as StandardError JSON.
 *
 * @since 0.1.0
 */
import { AbuseGuard, Errors } from "@tollgate/core"
import { ByteSize, Context, Effect, Layer, Option, type Schema } from "effect"
import { HttpEffect, HttpPlatform, HttpServerError, HttpIncomingMessage, HttpMiddleware, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Documentation from "./Documentation.ts"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as Observability from "./Observability.ts"
import * as RequestContext from "./RequestContext.ts"
import * as RequestLog from "./RequestLog.ts"
import * as Route from "./Route.ts"
import { ServiceInfo } from "./ServiceInfo.ts"
import * as Timestamp from "./Timestamp.ts"

/** @category options */
export interface Options {
  /** Default cap of request bodies; routes that take uploads raise it for themselves. */
  readonly maxBodyBytes?: number
  /** Schemas of the 402 bodies of metered routes, for the OpenAPI document. */
  readonly paymentRequiredSchemas?: ReadonlyArray<Schema.Top>
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const compress = HttpMiddleware.compression({ minSize: 256 })

const ROUTE_MEMORY = 1_000

/**
 * The route pattern of a request, for metrics and logs. Remembered per method and URL (the same
 * few URLs make up most traffic), dropped whole when full so arbitrary URLs cannot grow it.
 */
const routeOf = (routes: ReadonlyArray<Route.Route<any>>) => {
  const known = new Map<string, string>()
  return (method: string, url: string) => {
    const key = `${method} ${url}`
    let pattern = known.get(key)
    if (pattern === undefined) {
      const path = new URL(url, "http://localhost").pathname
      pattern = routes.find((route) => route.method === method && Route.matchesPath(route.path, path))?.path ?? "unmatched"
      if (known.size >= ROUTE_MEMORY) known.clear()
      known.set(key, pattern)
    }
    return pattern
  }
}

/**
 * The middleware every request goes through. It runs on each request, so it builds as few Effects
 * as it can: the request's services (its context, the abuse guard's caller scope) are provided in
 * one context change, a caller in good standing passes the guard without an Effect, and the
 * metrics, the log entry and the guard's failure count are taken in the pre-response handler.
 * Each service added to a request's context deepens it, and past a few levels Effect copies the
 * whole context, so the request adds as few as it can.
 */
const globalMiddleware = (
  routes: ReadonlyArray<Route.Route<any>>,
  info: ServiceInfo["Service"],
  platform: HttpPlatform.HttpPlatform["Service"],
  guard: Option.Option<AbuseGuard.AbuseGuard["Service"]>,
  log: Option.Option<RequestLog.RequestLog["Service"]>
) =>
  HttpRouter.middleware<{ handles: HttpServerError.HttpServerError }>()(
    (httpEffect) => {
      const patternOf = routeOf(routes)
      const handled = httpEffect.pipe(
        Effect.catchIf(HttpServerError.isHttpServerError, ErrorResponse.fromServerError),
        Effect.catchDefect(ErrorResponse.fromDefect)
      )
      const compressed = compress(httpEffect).pipe(
        Effect.provideService(HttpPlatform.HttpPlatform, platform),
        Effect.catchIf(HttpServerError.isHttpServerError, ErrorResponse.fromServerError),
        Effect.catchDefect(ErrorResponse.fromDefect)
      )
      return Effect.withFiber((fiber) => {
        const fiberContext = fiber.context
        const request = Context.getUnsafe(fiberContext, HttpServerRequest.HttpServerRequest)
        const sent = request.headers["x-request-id"]
        const context: RequestContext.RequestContext = {
          requestId: sent !== undefined && REQUEST_ID.test(sent) ? sent : crypto.randomUUID(),
          startedAt: performance.now(),
          principalId: undefined
        }
        const tracking = Option.isSome(guard)
          ? AbuseGuard.track(guard.value, Option.getOrElse(request.remoteAddress, () => "unknown"))
          : undefined
        HttpEffect.appendPreResponseHandlerUnsafe(fiberContext, (_request, response) => {
          const headers: Array<readonly [string, string]> = [
            ["x-request-id", context.requestId],
            ["x-service-version", info.version],
            ["x-service-timestamp", Timestamp.now()]
          ]
          if (response.status >= 400) headers.push(["x-service-host-name", info.hostName])
          const entry = {
            requestId: context.requestId,
            principalId: context.principalId,
            method: request.method,
            route: patternOf(request.method, request.url),
            status: response.status,
            latencyMs: performance.now() - context.startedAt
          }
          if (Option.isSome(log)) log.value.record(entry)
          Observability.recordRequest(entry, fiberContext)
          const withHeaders = HttpServerResponse.setHeaders(response, headers)
          const settle = tracking?.settle(response.status)
          return settle === undefined ? Effect.succeed(withHeaders) : Effect.as(settle, withHeaders)
        })
        // Set on the fiber directly, as the router sets its own: the enclosing request restores the
        // fiber's context when it ends, so wrapping the rest in `updateContext` would only add steps.
        const withRequest = Context.add(fiberContext, RequestContext.CurrentRequest, context)
        fiber.setContext(tracking === undefined ? withRequest : Context.add(withRequest, AbuseGuard.CurrentCaller, tracking.caller))
        const run = request.headers["accept-encoding"] === undefined ? handled : compressed
        if (tracking?.admit === undefined) return run
        return Effect.matchEffect(tracking.admit, {
          onFailure: (error) =>
            Effect.as(Observability.count(Observability.admissions, { outcome: "abuse_guard" }), ErrorResponse.render(error)),
          onSuccess: () => run
        })
      })
    },
    { global: true }
  )

const notFound = (routes: ReadonlyArray<Route.Route<any>>) =>
  HttpRouter.use((router) =>
    router.add("*", "*", (request) => {
      const path = new URL(request.url, "http://localhost").pathname
      const allow = routes.filter((route) => Route.matchesPath(route.path, path)).map((route) => route.method)
      return Effect.succeed(ErrorResponse.render(
        allow.length > 0
          ? new Errors.MethodNotAllowed({ message: `Method ${request.method} is not allowed here`, allow })
          : new Errors.NotFound({ message: `No route for ${request.method} ${path}` })
      ))
    })
  )

/** Methods whose requests carry no body the route reads, so they need no body cap in context. */
const bodiless = new Set(["GET", "HEAD"])

/**
 * The routes as router layers, each handler's failures rendered by `ErrorResponse`, and request
 * bodies capped at `maxBodyBytes`.
 *
 * @category layers
 */
export const routesLayer = <R>(routes: ReadonlyArray<Route.Route<R>>, options: Options = {}) => {
  const maxBodySize = ByteSize.bytes(options.maxBodyBytes ?? 1_048_576)
  return HttpRouter.use((router) =>
    Effect.gen(function*() {
      for (const route of routes) {
        const handler: Route.Handler = yield* route.handler
        const capped = bodiless.has(route.method) ? handler : Effect.provideService(handler, HttpIncomingMessage.MaxBodySize, maxBodySize)
        yield* router.add(
          route.method,
          route.path,
          Effect.catch(capped, (error) => Effect.succeed(ErrorResponse.render(error)))
        )
      }
    })
  )
}

/**
 * The whole application as a router layer: routes, 404/405, service headers, compression.
 *
 * @category layers
 */
export const layer = <R>(routes: ReadonlyArray<Route.Route<R>>, options: Options = {}) => {
  const all = [...routes, ...Documentation.routes(routes, options)]
  return Layer.mergeAll(
    routesLayer(all, options),
    notFound(all),
    Layer.unwrap(Effect.map(
      Effect.all([
        ServiceInfo,
        HttpPlatform.HttpPlatform,
        Effect.serviceOption(AbuseGuard.AbuseGuard),
        Effect.serviceOption(RequestLog.RequestLog)
      ]),
      ([info, platform, guard, log]) => globalMiddleware(all, info, platform, guard, log)
    ))
  )
}
