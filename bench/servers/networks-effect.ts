/**
 * Effect's `HttpRouter` serving tollgate's networks route alone, with none of tollgate's global
 * middleware (no service headers, request id, abuse guard, metrics or request log): what Effect's
 * HTTP server costs by itself, so `bench/networks.ts` shows how much of the distance to node:http
 * is Effect's and how much is tollgate's own per-request work.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { App } from "@tollgate/http"
import * as Networks from "@tollgate/http/routes/Networks"
import * as Telemetry from "@tollgate/server/Telemetry"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import * as Http from "node:http"

const port = Number(process.argv[2] ?? 0)
const server = HttpRouter.serve(App.routesLayer([Networks.route]), { disableLogger: true, disableListenLog: true }).pipe(
  Layer.provide(NodeHttpServer.layer(Http.createServer, { host: "127.0.0.1", port })),
  Layer.provide(Telemetry.layer())
)
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  yield* Layer.build(server)
  console.log("listening")
  yield* Effect.never
})))
