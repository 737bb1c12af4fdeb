/**
 * Effect's `HttpRouter` serving tollgate's networks route alone, with none of tollgate's global
 * middleware (no service headers, request id, abuse guard, metrics or request log): what Effect's
 * HTTP server costs by itself, so `bench/networks.ts` shows how much of the distance to node:http
 * is Effect's and how much is tollgate's own per-request work.
 */
import * as Networks from "@tollgate/http/routes/Networks"
import { Effect } from "effect"
import { HttpRouter } from "effect/http"
import { serve } from "./EffectOnly.ts"

await serve(
  HttpRouter.use((router) =>
    Effect.flatMap(Networks.route.handler, (handler) => router.add("GET", Networks.route.path, Effect.orDie(handler)))
  )
)
