/**
 * Tollgate with only the RPC proxy route, for `bench/rpc.ts`: `node bench/servers/rpc-tollgate.ts
 * <port>` with `RPC_UPSTREAM` (the node) and `STORE=memory|redis` (`REDIS_URL`). Auth, rate limits
 * and billing all run; the limits are the spec's shape (per-minute requests, rolling 24 h
 * credits) with ceilings no benchmark reaches; on Redis, admissions and settlements are grouped per
 * account as the reference server groups them by default. Request logs go out as batched JSON
 * lines through the reference server's `logging` layer (`LOG_LEVEL=none` turns them off); tracing
 * is as in the reference server (off unless an OTLP endpoint is set). Prints the API key, then
 * "listening". Exits on SIGTERM, so a `--cpu-prof` run writes its profile.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { RpcUpstream } from "@tollgate/backends"
import { Admission, Auth, AuthStore, CreditLedger, IdempotencyStore, Jwt, PricingEngine, RateLimiter, RpcCache, X402 } from "@tollgate/core"
import { App, ServiceInfo } from "@tollgate/http"
import * as Metered from "@tollgate/http/Metered"
import * as X402Bodies from "@tollgate/http/payment/PaymentRequiredBodies"
import * as Rpc from "@tollgate/http/routes/Rpc"
import {
  AdmissionStoreRedis,
  AuthStoreRedis,
  CreditLedgerRedis,
  IdempotencyStoreRedis,
  RateLimiterRedis,
  RedisConnection,
  RpcCacheRedis
} from "@tollgate/redis"
import * as Config from "@tollgate/server/Config"
import * as Server from "@tollgate/server/Server"
import * as Telemetry from "@tollgate/server/Telemetry"
import { Effect, Layer, Scope } from "effect"
import { HttpServer } from "effect/http"
import * as Http from "node:http"
import { seedKey } from "./Seed.ts"

process.on("SIGTERM", () => process.exit(0))

const port = Number(process.argv[2] ?? 0)
const upstream = process.env["RPC_UPSTREAM"] ?? "http://127.0.0.1:8545"
const redisUrl = process.env["STORE"] === "redis" ? process.env["REDIS_URL"] : undefined

const unreachable = 1_000_000_000
const limits = Layer.succeed(Metered.LimitPolicy, {
  limitsFor: (principal) => [
    {
      type: "user",
      key: `${principal.accountId}:rpc:minute`,
      hashTag: principal.accountId,
      requests: { limit: unreachable, windowMs: 60_000 }
    },
    {
      type: "user",
      key: `${principal.accountId}:rpc:day`,
      hashTag: principal.accountId,
      credits: { limit: unreachable, windowMs: 86_400_000, reserve: 20 }
    }
  ]
})

const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const stores = redisUrl === undefined
  ? Admission.layerMemory.pipe(
    Layer.provideMerge(
      Layer.mergeAll(AuthStore.layerMemory, RateLimiter.layerMemory(), CreditLedger.layerMemory, IdempotencyStore.layerMemory)
    )
  )
  : Layer.mergeAll(
    AuthStoreRedis.layerRedis,
    RateLimiterRedis.layerRedis(),
    CreditLedgerRedis.layerRedis(),
    IdempotencyStoreRedis.layerRedis,
    AdmissionStoreRedis.layerRedis({
      admissionGroupMs: Config.DEFAULT_ADMISSION_GROUP_MS,
      settlementGroupMs: Config.DEFAULT_SETTLEMENT_GROUP_MS
    })
  ).pipe(Layer.provide(RedisConnection.layer({ url: redisUrl })))
const services = Layer.mergeAll(
  Metered.layer(),
  PricingEngine.layer(),
  RpcUpstream.layer({ upstreams: { "ethereum-mainnet": [upstream] } }),
  redisUrl === undefined
    ? RpcCache.layerMemory()
    : RpcCacheRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url: redisUrl }))),
  ServiceInfo.layer({ version: "bench", hostName: "bench" })
).pipe(
  Layer.provideMerge(Layer.mergeAll(
    X402Bodies.layer.pipe(
      Layer.provide(X402.layer(X402.makeConfig({ publicOrigin: "http://localhost" }))),
      Layer.provideMerge(Auth.layer({ signingKey, publicOrigin: "http://localhost" }))
    ),
    limits
  )),
  Layer.provideMerge(stores)
)

const context = await Effect.runPromise(Layer.build(services).pipe(Scope.provide(Effect.runSync(Scope.make()))))
const key = await seedKey(context)

const logging = Server.logging({ logLevel: process.env["LOG_LEVEL"] === "none" ? "none" : "info" })
// Served as the reference server serves it (`Server.layer`): `App.layer` provides the application's
// own dispatch, not routes of Effect's `HttpRouter`, whose `serve` would answer every request 404.
const server = Layer.unwrap(Effect.map(App.Application, (app) => HttpServer.serve(app.handle))).pipe(
  Layer.provide(App.layer([Rpc.route]).pipe(Layer.provide(Layer.succeedContext(context)))),
  Layer.provide(NodeHttpServer.layer(Http.createServer, { host: "127.0.0.1", port })),
  Layer.provide(Telemetry.layer()),
  Layer.provide(logging)
)
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  yield* Layer.build(server)
  console.log(`key ${key}\nlistening`)
  yield* Effect.never
})))
