/**
 * `pnpm cli …` (the `tollgate-cli` of the docs): the operator CLI over the configuration of the
 * environment, the same one the server reads.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Jwt } from "@tollgate/core"
import { Console, Effect } from "effect"
import * as Cli from "./Cli.ts"
import * as Config from "./Config.ts"

const argv = process.argv.slice(2)

const fail = (message: string) => Console.error(`tollgate-cli: ${message}`).pipe(Effect.andThen(Effect.sync(() => process.exit(1))))

/** `signing-key` needs no configuration: it prints a fresh key for `TOLLGATE_SIGNING_KEY`. */
const printSigningKey = Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey), Effect.flatMap(Console.log))

const main = Effect.gen(function*() {
  if (argv[0] === "signing-key") return yield* printSigningKey
  const config = yield* Config.load()
  return yield* Cli.run(argv).pipe(Effect.provide(Cli.layer(config)))
}).pipe(
  Effect.catchTag("ConfigError", (error) => fail(`invalid configuration: ${error.message}`)),
  Effect.catchTag("UserError", (error) => fail(error.message)),
  Effect.provide(NodeServices.layer)
)

NodeRuntime.runMain(main)
