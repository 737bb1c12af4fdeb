#!/usr/bin/env node
/**
 * `pnpm start` (the `tollgate` bin): reads the configuration and serves until SIGTERM or SIGINT.
 * Every line it prints is one JSON object on stdout: the dev-mode keys, the listening line, the
 * request log and a startup failure, which is a single FATAL line naming what to fix (exit 1).
 *
 * @since 0.1.0
 */
// First: run directly (not through bin/), an older Node still gets the line naming the version.
import "../bin/require-node.mjs"
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Logger, type Runtime } from "effect"
import * as Module from "node:module"
import * as Config from "./Config.ts"
import * as Workers from "./Workers.ts"

/** The one line a failed start prints: the configuration's message, or the failure's own. */
const startupFailure = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "ConfigError") {
    return `invalid configuration: ${(error as Config.ConfigError).message}`
  }
  const message = error instanceof Error ? error.message || String(error.cause ?? error.name) : String(error)
  return `cannot start: ${message.split("\n")[0]}`
}

/** The supervisor's lines, in the one shape of every line: `message` a string, the fields as annotations. */
const log = (message: string, fields: Record<string, unknown>) =>
  Effect.logInfo(message).pipe(Effect.annotateLogs(fields), Effect.provide(Logger.layer([Logger.consoleJson])))

const main = Effect.gen(function*() {
  const config = yield* Config.load()
  if (config.workers > 1 && !Workers.isWorker()) {
    yield* log("tollgate supervising workers", { workers: config.workers, port: config.port })
    return yield* Workers.supervise({ workers: config.workers, log })
  }
  // Loaded here, not at the top: a supervisor never serves, and the server's module graph is most
  // of a start's time.
  const Server = yield* Effect.promise(() => import("./Server.ts"))
  yield* Layer.build(Server.layer(config))
  // Every module of a start is loaded by now: written to the compile cache here, not only at a
  // clean exit, so that a server that is killed still leaves a cache for the next start.
  Module.flushCompileCache()
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.tapCause((cause) =>
    Cause.hasInterruptsOnly(cause) || Cause.squash(cause) instanceof Workers.WorkerStartFailed
      ? Effect.void
      : Effect.logFatal(startupFailure(cause)).pipe(Effect.provide(Logger.layer([Logger.consoleJson])))
  )
)

/** A shutdown by signal is the normal end of a server: exit 0, not 130. A failed start exits 1. */
const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : onExit(Exit.isSuccess(exit) ? 0 : 1)

NodeRuntime.runMain(main, { teardown, disableErrorReporting: true })
