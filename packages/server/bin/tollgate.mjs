#!/usr/bin/env node
/**
 * The `tollgate` bin and `pnpm start`: refuses an older Node with one line, then runs the server
 * (`src/main.ts`). Node strips TypeScript types only outside node_modules, so an installed copy
 * runs the compiled `dist/main.js` instead.
 */
import * as CompileCache from "./compile-cache.mjs"
import { exitIfRefused } from "./node-version.mjs"

exitIfRefused()
CompileCache.enable()
await import(import.meta.url.includes("/node_modules/") ? "../dist/main.js" : "../src/main.ts")
