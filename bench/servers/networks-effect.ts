/**
 * Effect's `HttpRouter` serving tollgate's networks route alone, with none of tollgate's global
 * middleware (no service headers, request id, abuse guard, metrics or request log): what Effect's
 * HTTP server costs by itself, so `bench/networks.ts` shows how much of the distance to node:http
 * is Effect's and how much is tollgate's own per-request work.
 */
import { App } from "@tollgate/http"
import * as Networks from "@tollgate/http/routes/Networks"
import { serve } from "./EffectOnly.ts"

await serve(App.routesLayer([Networks.route]))
