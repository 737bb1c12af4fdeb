/**
 * Embedding adapters: the same application as a fetch-style handler `(Request) => Promise<Response>`
 * (Hono, Bun, Deno, workers, tests) and as a node-style handler `(req, res)` (node:http, Express,
 * Fastify's raw request). Both build the layers once and release them on `dispose`.
 *
 * @since 0.1.0
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, type FileSystem, Layer, type Path, Scope } from "effect"
import { HttpEffect, type HttpPlatform, type HttpServerRequest } from "effect/http"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Application } from "./App.ts"

/**
 * What an application layer may need from the platform: the platform services (file system,
 * compression) that `NodeHttpServer.layerHttpServices` provides.
 *
 * @category models
 */
export type AppRequirements = HttpPlatform.HttpPlatform | FileSystem.FileSystem | Path.Path

/** @category models */
export interface WebHandler {
  readonly handler: (request: Request) => Promise<Response>
  readonly dispose: () => Promise<void>
}

/** @category models */
export interface NodeHandler {
  readonly handler: (request: IncomingMessage, response: ServerResponse) => void
  readonly dispose: () => Promise<void>
}

/**
 * A fetch-style handler over an application layer (see `App.layer`).
 *
 * @category constructors
 */
export const toWebHandler = <A, E>(app: Layer.Layer<A | Application, E, AppRequirements>): WebHandler => {
  const { dispose, handler } = HttpEffect.toWebHandlerLayerWith<
    never,
    A | Application,
    E,
    HttpServerRequest.HttpServerRequest | Scope.Scope,
    never
  >(app.pipe(Layer.provide(NodeHttpServer.layerHttpServices)), {
    toHandler: (context) => Effect.succeed(Context.get(context, Application).handle)
  })
  return { handler: (request) => handler(request), dispose }
}

/**
 * A node-style handler over an application layer. Resolves once the layers are built.
 *
 * @category constructors
 */
export const toNodeHandler = async <A, E>(app: Layer.Layer<A | Application, E, AppRequirements>): Promise<NodeHandler> => {
  const scope = Effect.runSync(Scope.make())
  const handler = await Effect.runPromise(
    Effect.gen(function*() {
      const { handle } = yield* Application
      return yield* NodeHttpServer.makeHandler(handle, { scope })
    }).pipe(Effect.provide(app.pipe(Layer.provide(NodeHttpServer.layerHttpServices))), Scope.provide(scope))
  )
  return {
    handler: (request, response) => handler(request, response),
    dispose: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/**
 * Both handlers over one build of an application layer, so a host that serves some paths through
 * node:http and others through fetch shares one set of services.
 *
 * @category models
 */
export interface Handlers {
  readonly fetch: (request: Request) => Promise<Response>
  readonly nodeHandler: (request: IncomingMessage, response: ServerResponse) => void
  /**
   * Whether tollgate serves a path the client sent (under `basePath`, if any), with any method: the
   * one test a host needs to send tollgate everything it serves (the API, the pages and the
   * portal's files, `/mcp`, the host's declared endpoints) and keep the rest.
   */
  readonly serves: (path: string) => boolean
  /** Every path tollgate serves (`:name` for a parameter), under `basePath`. */
  readonly paths: ReadonlyArray<string>
  readonly dispose: () => Promise<void>
}

/** @category options */
export interface MountOptions {
  /**
   * The path the host mounts tollgate under, e.g. `/payments` to serve `/payments/api/v1/...`. It is
   * removed from each request's path before routing. Absent: tollgate routes on the full path the
   * client sent, so mounting at `/api` (Express `app.use("/api", ...)`) serves `/api/v1/...` as is.
   */
  readonly basePath?: string | undefined
}

/**
 * A `basePath` as tollgate mounts it: with a leading slash and no trailing one; absent for the root.
 *
 * @category options
 */
export const normalizeBasePath = (basePath: string | undefined): string | undefined => {
  const trimmed = basePath?.replace(/\/+$/u, "")
  return trimmed === undefined || trimmed === "" ? undefined : trimmed.startsWith("/") ? trimmed : `/${trimmed}`
}

/** The path without the base path; a path outside it is routed as sent (a 404). */
const strip = (basePath: string, pathAndQuery: string): string =>
  pathAndQuery === basePath || pathAndQuery.startsWith(`${basePath}/`) || pathAndQuery.startsWith(`${basePath}?`)
    ? pathAndQuery.slice(basePath.length).replace(/^(?=\?|$)/u, "/")
    : pathAndQuery

/**
 * The fetch-style and node-style handlers of an application layer, built once. The node handler
 * routes on the full path the client sent (`originalUrl` when a framework such as Express has
 * rewritten `url` for its mount point), minus `basePath`; so does the fetch handler.
 *
 * @category constructors
 */
export const make = async <A, E>(
  app: Layer.Layer<A | Application, E, AppRequirements>,
  options: MountOptions = {}
): Promise<Handlers> => {
  const basePath = normalizeBasePath(options.basePath)
  const scope = Effect.runSync(Scope.make())
  const dispose = () => Effect.runPromise(Scope.close(scope, Exit.void))
  const built = await Effect.runPromise(
    Effect.gen(function*() {
      const context = yield* Layer.buildWithScope(app.pipe(Layer.provideMerge(NodeHttpServer.layerHttpServices)), scope)
      const { handle, paths, serves } = Context.get(context, Application)
      const node = yield* NodeHttpServer.makeHandler(handle, { scope }).pipe(Effect.provideContext(context))
      return {
        node,
        web: HttpEffect.toWebHandlerWith<never, HttpServerRequest.HttpServerRequest | Scope.Scope, never>(
          context as Context.Context<never>
        )(handle),
        paths,
        serves
      }
    })
  ).catch(async (error: unknown) => {
    await dispose()
    throw error
  })
  return {
    fetch: (request) => {
      if (basePath === undefined) return built.web(request)
      const url = new URL(request.url)
      const path = strip(basePath, url.pathname)
      if (path === url.pathname) return built.web(request)
      url.pathname = path
      return built.web(new Request(url, request))
    },
    nodeHandler: (request, response) => {
      const full = (request as IncomingMessage & { readonly originalUrl?: string }).originalUrl ?? request.url ?? "/"
      request.url = basePath === undefined ? full : strip(basePath, full)
      built.node(request, response)
    },
    serves: (path) => {
      if (basePath === undefined) return built.serves(path)
      const inside = strip(basePath, path)
      return inside !== path && built.serves(inside)
    },
    paths: basePath === undefined ? built.paths : built.paths.map((path) => `${basePath}${path}`),
    dispose
  }
}
