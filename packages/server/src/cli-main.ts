#!/usr/bin/env node
/**
 * The `tollgate-cli` bin (`pnpm exec tollgate-cli …` in this repository): the operator CLI over the
 * configuration of the environment, the same one the server reads.
 *
 * @since 0.1.0
 */
// First: run directly (not through bin/), an older Node still gets the line naming the version.
import "../bin/require-node.mjs"
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer } from "effect"
import { CliError } from "effect/cli"
import * as Cli from "./Cli.ts"
import * as Config from "./Config.ts"

/**
 * The configuration is read only when a command needs the store: `signing-key` and `--help` work
 * without one. A store command needs a store chosen on purpose (`Cli.requireChosenStore`).
 */
const services = Layer.unwrap(Cli.requireChosenStore(process.env).pipe(Effect.andThen(Config.load()), Effect.map(Cli.layer)))

const main = Cli.run(process.argv.slice(2), services).pipe(Effect.provide(NodeServices.layer))

/** The one line an error prints: the user message of a command, the parse errors of a bad invocation. */
const describe = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null || !("_tag" in error)) return String(error)
  switch (error._tag) {
    case "ShowHelp": {
      const { errors } = error as CliError.ShowHelp
      return errors.length === 0 ? undefined : `${errors.map((each) => each.message).join("; ")} (see --help)`
    }
    case "ConfigError":
      return `invalid configuration: ${(error as Config.ConfigError).message}`
    default:
      return CliError.getUserMessage(error) ?? (error instanceof Error ? error.message : String(error))
  }
}

/** Each error is printed once, on stderr, as `tollgate-cli: <message>`, and the process exits 1. */
NodeRuntime.runMain(
  main.pipe(
    Effect.catchCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
      const message = describe(Cause.squash(cause))
      return message === undefined ? Effect.void : Console.error(`tollgate-cli: ${message}`).pipe(Effect.andThen(Effect.failCause(cause)))
    })
  ),
  {
    disableErrorReporting: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? 0 : 1)
  }
)
