/**
 * Imported first by the library's entries: on an older Node it throws one line naming the version
 * needed, before a dependency fails with an error that names nothing (undici's
 * `Cannot read properties of undefined (reading 'bind')`).
 */
import { refusal } from "./node-version.mjs"

const refused = refusal(process.versions.node)
if (refused !== undefined) throw new Error(refused)
