/**
 * The first step of `pnpm test`: the suite starts its own Redis servers, so without `redis-server`
 * (or `redis-cli`) on the PATH it stops here with one line naming it, where it would otherwise fail
 * file by file.
 *
 * @since 0.1.0
 */
import * as RedisServer from "./RedisServer.ts"

try {
  RedisServer.requireRedisServer()
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
  process.exitCode = 1
}
