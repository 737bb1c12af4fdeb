/**
 * The reference server: every route of `@tollgate/http` over the service layers the configuration
 * picks (memory or Redis), served on a port with graceful shutdown (in-flight requests finish,
 * then the process exits 0).
 *
 * @since 0.1.0
 */
import { NodeHttpServer } from "@effect/platform-node"
import { App, ServiceInfo } from "@tollgate/http"
import * as Routes from "@tollgate/http/routes/index"
import { Effect, Layer, Logger, References } from "effect"
import { HttpRouter } from "effect/http"
import { createServer } from "node:http"
import type { ServerConfig } from "./Config.ts"
import * as Services from "./Services.ts"
import * as Telemetry from "./Telemetry.ts"

/**
 * The application layer (routes, middleware and services) for a configuration.
 *
 * @category layers
 */
export const appLayer = (config: ServerConfig) =>
  App.layer(Routes.all, { maxBodyBytes: config.maxBodyBytes }).pipe(
    Layer.provide(Services.layer(config)),
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
export const layer = (config: ServerConfig) =>
  HttpRouter.serve(appLayer(config), { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provide(NodeHttpServer.layer(createServer, { port: config.port, gracefulShutdownTimeout: "20 seconds" })),
    Layer.provide(Telemetry.layer()),
    Layer.provide(logging(config))
  )

const levels = { trace: "Trace", debug: "Debug", info: "Info", warn: "Warn", error: "Error", none: "None" } as const

/**
 * Structured JSON log lines on stdout, at the configured level. Lines are written in batches every
 * 50 ms: one write per batch instead of one console call per request keeps logging off the hot
 * path, and the batch is flushed when the server stops.
 *
 * @category layers
 */
export const logging = (config: Pick<ServerConfig, "logLevel">) =>
  Layer.mergeAll(
    Logger.layer([Logger.batched(Logger.formatJson, {
      window: "50 millis",
      flush: (lines) => Effect.sync(() => process.stdout.write(`${lines.join("\n")}\n`))
    })]),
    Layer.succeed(References.MinimumLogLevel, levels[config.logLevel])
  )
