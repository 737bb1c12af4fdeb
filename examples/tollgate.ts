/**
 * The tollgate application every example mounts: the reference server's app layer (all routes,
 * in-memory services) with its default configuration. A real host passes its own configuration.
 */
import * as Config from "@tollgate/server/Config"
import * as Server from "@tollgate/server/Server"
import { Effect } from "effect"

export const app = Server.appLayer(Effect.runSync(Config.load({})))
