/**
 * What the Effect-only bench servers share: routes served by Effect's `HttpRouter` on the port the
 * benchmark passes, with none of tollgate's global middleware and tracing as in the reference
 * server, announced with "listening" once the port is open.
 */
import { NodeHttpServer } from "@effect/platform-node"
import * as Telemetry from "@tollgate/server/Telemetry"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import * as Http from "node:http"

export const serve = (routes: Layer.Layer<never, never, HttpRouter.HttpRouter>): Promise<never> => {
  const port = Number(process.argv[2] ?? 0)
  const server = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provide(NodeHttpServer.layer(Http.createServer, { host: "127.0.0.1", port })),
    Layer.provide(Telemetry.layer())
  )
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    yield* Layer.build(server)
    console.log("listening")
    return yield* Effect.never
  })))
}
