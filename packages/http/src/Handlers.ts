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
  const { dispose, handler } = HttpEffect.toWebHandlerLayerWith<never, A | Application, E, HttpServerRequest.HttpServerRequest | Scope.Scope, never>(app.pipe(Layer.provide(NodeHttpServer.layerHttpServices)), {
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
