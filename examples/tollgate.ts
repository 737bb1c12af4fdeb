/**
 * What every example embeds: tollgate built by `Tollgate.make` from the environment, the same
 * `TOLLGATE_*` variables and `TOLLGATE_CONFIG` file the reference server reads. With no signing key
 * it runs in dev mode and logs the demo keys (one JSON line) when it is built.
 */
import { Tollgate } from "@tollgate/server"

export type { Tollgate } from "@tollgate/server/Tollgate"

/** tollgate for a host that mounts it under `basePath` (absent: at the root). */
export const make = (basePath?: string) => Tollgate.make({ basePath })
