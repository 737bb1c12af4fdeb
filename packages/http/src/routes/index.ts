/**
 * Every route of the public API, in one list: `App.layer` registers them, answers 405 for their
 * paths, and the OpenAPI test checks each is documented.
 *
 * @since 0.1.0
 */
import * as Networks from "./Networks.ts"

/** @category routes */
export const all = [Networks.route] as const
