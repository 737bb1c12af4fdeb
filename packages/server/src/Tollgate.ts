/**
 * The one entry a host needs to embed tollgate: `Tollgate.make()` builds the whole API from the
 * same configuration the reference server reads (`TOLLGATE_*` variables and the `TOLLGATE_CONFIG`
 * file, or a `ServerConfig` passed in) and returns a fetch-style handler, a node-style handler
 * and `dispose`. In dev mode the demo keys are returned (and logged, like the server does). The
 * host's own paid endpoints (`endpoint`) are served by the same handlers, on the same ledger.
 *
 * ```ts
 * const tollgate = await Tollgate.make({ endpoints: [summarize] })
 * app.use((request, response, next) => {
 *   if (tollgate.serves(request.path)) tollgate.nodeHandler(request, response)
 *   else next()
 * })
 * ```
 *
 * @since 0.1.0
 */
// First: on an older Node this throws one line naming the version needed, before a dependency fails.
import "../bin/require-node.mjs"
import { Handlers, type Metered, OwnEndpoint, type Route } from "@tollgate/http"
import { Effect, Layer } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import * as Config from "./Config.ts"
import type * as DevCredentials from "./DevCredentials.ts"
import * as Server from "./Server.ts"
import * as Services from "./Services.ts"
import * as Telemetry from "./Telemetry.ts"

/** @category options */
export interface Options extends Handlers.MountOptions {
  /** Absent: `Config.load()` over `process.env`. */
  readonly config?: Config.ServerConfig
  /** Log the dev keys as the server does (default true). */
  readonly announce?: boolean
  /** The host's own paid endpoints (`endpoint`), served beside tollgate's API. */
  readonly endpoints?: ReadonlyArray<Route.Route<Metered.Metered>>
}

/**
 * Declares a paid endpoint of the host's (see `OwnEndpoint.make`), for `make({ endpoints })`.
 *
 * @category constructors
 */
export const endpoint = OwnEndpoint.make

/** @category models */
export interface Tollgate {
  readonly fetch: (request: Request) => Promise<Response>
  readonly nodeHandler: (request: IncomingMessage, response: ServerResponse) => void
  /**
   * Whether tollgate serves a path: the one test that sends a host's requests for the API, the
   * pages and the portal's files, `/mcp` and the declared endpoints to tollgate, and keeps the rest.
   */
  readonly serves: (path: string) => boolean
  /** Every path tollgate serves, `:name` for a parameter. */
  readonly paths: ReadonlyArray<string>
  /** Releases the services (store connections, worker processes, log buffers). */
  readonly dispose: () => Promise<void>
  readonly config: Config.ServerConfig
  /** The demo account and its keys, in dev mode (no signing key). */
  readonly devCredentials: DevCredentials.DevCredentials | undefined
}

/**
 * Builds tollgate for a host. Rejects with the configuration's `ConfigError` (one line naming the
 * field) when the configuration is refused.
 *
 * @category constructors
 */
export const make = async (options: Options = {}): Promise<Tollgate> => {
  const loaded = options.config ?? await Effect.runPromise(Config.load())
  // Under a prefix the links tollgate writes (402 bodies and the top-up, the OpenAPI servers, the
  // bazaar's resources) name it, so a client that follows them reaches the host's mount.
  const basePath = Handlers.normalizeBasePath(options.basePath)
  const config = basePath === undefined ? loaded : { ...loaded, publicOrigin: `${loaded.publicOrigin.replace(/\/+$/u, "")}${basePath}` }
  let devCredentials: DevCredentials.DevCredentials | undefined
  const app = Server.appLayer(config, Services.layer(config), {
    announce: options.announce ?? true,
    onCredentials: (credentials) => {
      devCredentials = credentials
    }
  }, options.endpoints).pipe(Layer.provideMerge(Layer.mergeAll(Telemetry.layer(), Server.logging(config))))
  const handlers = await Handlers.make(app, { basePath })
  return { ...handlers, config, devCredentials }
}
