/**
 * @tollgate/server: the reference server's parts and the embedding entry. `Tollgate.make()` is
 * what a host needs; `Config`, `Services` and `Server` are the pieces it is made of.
 *
 * @since 0.1.0
 */
export * as Cli from "./Cli.ts"
export * as Config from "./Config.ts"
export * as DevCredentials from "./DevCredentials.ts"
export * as Server from "./Server.ts"
export * as Services from "./Services.ts"
export * as Telemetry from "./Telemetry.ts"
export * as Tollgate from "./Tollgate.ts"
