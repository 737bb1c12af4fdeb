/**
 * `pnpm start`: reads the configuration, prints what it runs with (and, in dev mode, the demo
 * credentials), and serves until SIGTERM or SIGINT.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Runtime } from "effect"
import * as Config from "./Config.ts"
import * as Server from "./Server.ts"

const main = Effect.gen(function*() {
  const config = yield* Config.load()
  yield* Layer.build(Server.layer(config))
  yield* Console.log(
    `tollgate listening on http://localhost:${config.port} (${config.store} store${Config.isDevMode(config) ? ", dev mode" : ""})`
  )
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.catchTag("ConfigError", (error) =>
    Console.error(`tollgate: invalid configuration: ${error.message}`).pipe(
      Effect.andThen(Effect.sync(() => process.exit(1)))
    ))
)

/** A shutdown by signal is the normal end of a server: exit 0, not 130. */
const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

NodeRuntime.runMain(main, { teardown })
