#!/usr/bin/env node
/**
 * The `tollgate-cli` bin: refuses an older Node with one line, then runs the operator CLI
 * (`src/cli-main.ts`; the compiled `dist/cli-main.js` in an installed copy, where Node does not
 * strip types).
 */
import * as CompileCache from "./compile-cache.mjs"
import { exitIfRefused } from "./node-version.mjs"

exitIfRefused()
CompileCache.enable()
await import(import.meta.url.includes("/node_modules/") ? "../dist/cli-main.js" : "../src/cli-main.ts")
