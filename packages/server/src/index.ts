/**
 * @tollgate/server: the reference server's parts and the embedding entry. `Tollgate.make()` is
 * what a host needs; `Config`, `Services` and `Server` are the pieces it is made of.
 *
 * @since 0.1.0
 */
// First: on an older Node this throws one line naming the version needed, before a dependency fails.
import "../bin/require-node.mjs"

export * as Cli from "./Cli.ts"
export * as Config from "./Config.ts"
export * as DevCredentials from "./DevCredentials.ts"
export * as Server from "./Server.ts"
export * as Services from "./Services.ts"
export * as Telemetry from "./Telemetry.ts"
export * as Tollgate from "./Tollgate.ts"
