/** The minimum Node version, from `engines.node`: `22.19`. */
export declare const minimum: string
/** The one line that refuses `version` (a `process.versions.node` string), or undefined when it is recent enough. */
export declare const refusal: (version: string) => string | undefined
/** The bins' guard: on an older Node, prints the refusal and exits 1. */
export declare const exitIfRefused: () => void
