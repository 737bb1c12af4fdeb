/**
 * Node's compile cache for the bins: the V8 code (and, in the workspace, the type-stripped source)
 * of every module a start loads is kept on disk, keyed by each file's content, so a later start of
 * the same files loads them without compiling again. A server's start loads about 2,500 modules;
 * importing them took 1.9 s of CPU with the cache against 2.75 s without (Node 24.21, the
 * workspace at f6e1df1). The directory is Node's default (`node-compile-cache` in the system's
 * temp directory) unless `NODE_COMPILE_CACHE` names another, and `NODE_DISABLE_COMPILE_CACHE=1`
 * turns it off. It is passed on in the environment, so the server's workers and extraction
 * processes use the same cache.
 */
import * as Module from "node:module"

/** Turns the cache on for this process and the processes it starts. */
export const enable = () => {
  const { directory, status } = Module.enableCompileCache()
  if (directory !== undefined && (status === Module.constants.compileCacheStatus.ENABLED || status === Module.constants.compileCacheStatus.ALREADY_ENABLED)) {
    process.env.NODE_COMPILE_CACHE ??= directory
  }
}
