/**
 * The reference server for benchmarks: `node bench/servers/tollgate.ts <port>` with the default
 * (memory, dev) configuration, plus whatever `TOLLGATE_*` variables the benchmark sets.
 */
import * as Config from "@tollgate/server/Config"
import * as Server from "@tollgate/server/Server"
import { Effect, Layer } from "effect"

const port = process.argv[2] ?? "0"
const config = await Effect.runPromise(Config.load({ ...process.env, PORT: port }))
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  yield* Layer.build(Server.layer(config))
  console.log("listening")
  yield* Effect.never
})))
