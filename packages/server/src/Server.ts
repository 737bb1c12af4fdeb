/**
 * The reference server: every route of `@tollgate/http` over the service layers the configuration
 * picks (memory or Redis), served on a port with graceful shutdown (in-flight requests finish,
 * then the process exits 0).
 *
 * @since 0.1.0
 */
import { NodeHttpServer } from "@effect/platform-node"
import { App, Mcp, type Metered, RequestLog, type Route, ServiceInfo } from "@tollgate/http"
import * as Billing from "@tollgate/http/routes/Billing"
import * as Routes from "@tollgate/http/routes/index"
import * as Metrics from "@tollgate/http/routes/Metrics"
import { Effect, Layer, Logger, References } from "effect"
import { HttpServer } from "effect/http"
import * as Http from "node:http"
import * as Config from "./Config.ts"
import * as DevCredentials from "./DevCredentials.ts"
import * as DevMode from "./DevMode.ts"
import * as HttpParserErrors from "./HttpParserErrors.ts"
import * as LowerCaseHeaders from "./LowerCaseHeaders.ts"
import * as Services from "./Services.ts"
import * as Telemetry from "./Telemetry.ts"

/** The accounts whose ADMIN keys may grant credit and read the metrics: dev mode's demo account there. */
const operatorAccountIds = (config: Config.ServerConfig): ReadonlyArray<string> =>
  Config.isDevMode(config) ? [DevCredentials.demoAccountId] : config.operatorAccountIds

/** What the routes of the server need. */
type RouteRequirements = (typeof Routes.all)[number] extends Route.Route<infer R>
  ? R | (typeof Mcp.route extends Route.Route<infer M> ? M : never)
  : never

/**
 * The application layer (routes, middleware and services) for a configuration. `services` defaults
 * to `Services.layer(config)`; passing the same layer value elsewhere in one build shares its
 * instances (tests seed accounts through it). `endpoints` are an embedder's own paid endpoints
 * (`OwnEndpoint.make`), served beside tollgate's routes on the same services.
 *
 * @category layers
 */
export const appLayer = (
  config: Config.ServerConfig,
  services: ReturnType<typeof Services.layer> = Services.layer(config),
  options: DevMode.Options = { announce: false },
  endpoints: ReadonlyArray<Route.Route<Metered.Metered>> = []
) =>
  Layer.mergeAll(
    App.layer<RouteRequirements>([
      ...Routes.all,
      ...Metrics.routes(config.metrics, operatorAccountIds(config)),
      ...(config.mcp ? [Mcp.route] : []),
      ...endpoints
    ], {
      maxBodyBytes: config.maxBodyBytes,
      trustedProxies: config.trustedProxies,
      uploadMemoryBytes: config.uploadMemoryBytes
    }),
    Config.isDevMode(config) ? DevMode.layer(config, options, startupNotice(config.logLevel)) : Layer.empty
  ).pipe(
    Layer.provide(services),
    Layer.provide(Layer.succeed(Billing.BillingOptions, { ...Billing.defaultOptions, operatorAccountIds: operatorAccountIds(config) })),
    Layer.provide(ServiceInfo.layer({
      publicOrigin: config.publicOrigin,
      ...(config.serviceVersion === undefined ? {} : { version: config.serviceVersion })
    }))
  )

/**
 * The application served on `config.port`.
 *
 * @category layers
 */
export const layer = (config: Config.ServerConfig) =>
  Layer.unwrap(Effect.map(App.Application, (app) =>
    HttpServer.serve(app.handle).pipe(
      // Inside, so that the port is opened only once the whole app is built: a connection accepted
      // earlier would wait for a handler that is seconds away (the Redis connection, the
      // extraction workers).
      Layer.provide(NodeHttpServer.layerServer(nodeServer, { port: config.port, gracefulShutdownTimeout: "20 seconds" }))
    ))).pipe(
      Layer.provide(appLayer(config, Services.layer(config), { announce: true })),
      Layer.provide(NodeHttpServer.layerHttpServices),
      Layer.tap(() => listening(config)),
      Layer.provide(Telemetry.layer()),
      Layer.provide(logging(config))
    )

/**
 * The node server: its parser's refusals answered as JSON (`HttpParserErrors`), header names lower
 * case on the wire (`LowerCaseHeaders`). `NodeHttpServer` listens first and attaches the app's
 * handler a moment later; a request that lands in between is answered 503 with `Retry-After: 1`
 * here, never left waiting. Once the handler is attached this listener sees a second one and
 * leaves the request to it.
 */
const nodeServer = () => {
  const server = Http.createServer({ ServerResponse: LowerCaseHeaders.ServerResponse }).on("clientError", HttpParserErrors.answer)
  server.on("request", (_request, response) => {
    if (server.listenerCount("request") > 1) return
    response.writeHead(503, { "content-type": "application/json", "retry-after": "1" })
    response.end(JSON.stringify({ error: "The server is starting; retry in a second" }))
  })
  return server
}

const listening = (config: Config.ServerConfig) => {
  const url = `http://localhost:${config.port}`
  const mode = Config.isDevMode(config) ? "dev" : "production"
  return Effect.logInfo(`tollgate listening on ${url} (${config.store} store, ${mode} mode)`).pipe(
    Effect.annotateLogs({ url, store: config.store, mode }),
    startupNotice(config.logLevel)
  )
}

/**
 * The startup lines (the listening line, the dev keys) are printed at every log level but `none`:
 * scripts wait for the listening line even when the request log is quieted to errors.
 *
 * @category logging
 */
export const startupNotice = (level: Config.ServerConfig["logLevel"]) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  level === "none" ? effect : Effect.provideService(effect, References.MinimumLogLevel, "Info")

const levels = { trace: "Trace", debug: "Debug", info: "Info", warn: "Warn", error: "Error", none: "None" } as const

/**
 * Structured JSON log lines on stdout, at the configured level. Lines are written in batches every
 * 50 ms: one write per batch instead of one console call per request keeps logging off the hot
 * path, and the batch is flushed when the server stops.
 *
 * @category layers
 */
export const logging = (config: Pick<Config.ServerConfig, "logLevel">) =>
  Layer.mergeAll(
    Logger.layer([Logger.batched(Logger.formatJson, {
      window: "50 millis",
      flush: (lines) => Effect.sync(() => process.stdout.write(`${lines.join("\n")}\n`))
    })]),
    Layer.succeed(References.MinimumLogLevel, levels[config.logLevel]),
    requestLog(config.logLevel)
  )

/**
 * The per-request lines are INFO (ERROR for a 5xx): all of them from `info` down, the 5xx ones at
 * `warn` and `error`, none at `none`.
 */
const requestLog = (level: Config.ServerConfig["logLevel"]) => {
  switch (level) {
    case "none":
      return Layer.empty
    case "warn":
    case "error":
      return RequestLog.layerJson({ errorsOnly: true })
    default:
      return RequestLog.layerJson()
  }
}
