/**
 * Effect's `HttpRouter` doing what tollgate's RPC route does before and after billing, and nothing
 * else: read the body, check it against the allowlist, forward it through tollgate's upstream
 * client and answer with the upstream's bytes. No auth, rate limits, billing, service headers or
 * request log. `bench/rpc.ts` runs it next to the pass-through and tollgate, so each run shows how
 * much of the distance is Effect's HTTP server and how much is tollgate's metered pipeline.
 */
import { RpcUpstream } from "@tollgate/backends"
import { Errors, JsonRpc, Networks } from "@tollgate/core"
import { ErrorResponse } from "@tollgate/http"
import * as RequestBody from "@tollgate/http/RequestBody"
import { Effect, Result, Scope } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { serve } from "./EffectOnly.ts"

const slug = "ethereum-mainnet"
// The service lives as long as the process: its scope is never closed.
const upstream = await Effect.runPromise(Effect.flatMap(
  Scope.make(),
  (scope) =>
    RpcUpstream.make({ upstreams: { [slug]: [process.env["RPC_UPSTREAM"] ?? "http://127.0.0.1:8545"] } }).pipe(Scope.provide(scope))
))
const network = Networks.findNetwork(slug)!

const parse = (body: Uint8Array) => {
  try {
    return JsonRpc.check(network, JSON.parse(Buffer.from(body).toString("utf8")))
  } catch {
    return Result.fail(new Errors.InvalidRequest({ message: "The body is not JSON" }))
  }
}

const route = HttpRouter.use((router) =>
  router.add(
    "POST",
    "/api/v1/crypto/rpc/:network",
    Effect.gen(function*() {
      const body = yield* RequestBody.bytes()
      const rpc = yield* Effect.fromResult(parse(body))
      const answer = yield* upstream.forward(slug, rpc, body)
      return answer.body === undefined
        ? HttpServerResponse.empty({ status: 204 })
        : HttpServerResponse.uint8Array(answer.body, { contentType: "application/json" })
    }).pipe(Effect.catch((error) => Effect.succeed(ErrorResponse.render(error))))
  )
)
await serve(route)
