/**
 * Lua scripts sent straight on the client of `RedisConnection` (one server or a Redis Cluster,
 * routed by the script's first key): `EVALSHA` with the SHA
 * computed once when the script is defined, and `EVAL` after a `NOSCRIPT` (a restarted or flushed
 * Redis), so a store recovers by itself. The stores on the paid path (`RateLimiterRedis`,
 * `AdmissionStoreRedis`) use it instead of `Redis.eval` of `effect/persistence`: its script-cache
 * lookup and a fiber racing a timeout on every call halved the rate limiter's admissions per second
 * (see `bench/ratelimit.ts`). One watchdog timer for every call in flight enforces the timeout.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { RedisConnection } from "./RedisConnection.ts"

/** @category models */
export interface Script {
  readonly source: string
  readonly sha: string
}

/**
 * A script with its SHA1, computed once.
 *
 * @category constructors
 */
export const make = (source: string): Script => ({ source, sha: createHash("sha1").update(source).digest("hex") })

/**
 * Sends a prepared `command` (`["", "", numkeys, ...keys, ...args]`; the first two are filled in
 * here). Exactly one of `onReply` and `onError` is called, once.
 *
 * @category models
 */
export type Send = (
  script: Script,
  command: Array<string>,
  onReply: (reply: unknown) => void,
  onError: (cause: unknown) => void
) => void

interface Call {
  readonly deadline: number
  readonly expire: () => void
}

/**
 * The sender of the `RedisConnection` in context, with a watchdog that fails a call Redis has not
 * answered within `timeoutMs`. The watchdog reads the wall clock, not Effect's: a timeout is about
 * real waiting, also under TestClock. It stops when the scope closes.
 *
 * @category constructors
 */
export const sender = (timeoutMs: number) =>
  Effect.gen(function*() {
    const { sendCommand } = yield* RedisConnection
    const inFlight = new Set<Call>()
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        setInterval(() => {
          const now = Date.now()
          for (const call of inFlight) if (call.deadline <= now) call.expire()
        }, Math.max(10, Math.min(250, Math.floor(timeoutMs / 4)))).unref()
      ),
      (timer) => Effect.sync(() => clearInterval(timer))
    )
    const timedOut = `Redis did not answer within ${timeoutMs} ms`
    const send: Send = (script, command, onReply, onError) => {
      const call: Call = {
        deadline: Date.now() + timeoutMs,
        expire: () => {
          if (inFlight.delete(call)) onError(timedOut)
        }
      }
      inFlight.add(call)
      const failed = (error: unknown) => {
        if (inFlight.delete(call)) onError(error)
      }
      const answered = (reply: unknown) => {
        if (!inFlight.delete(call)) return
        try {
          onReply(reply)
        } catch (error) {
          onError(error)
        }
      }
      command[0] = "EVALSHA"
      command[1] = script.sha
      const firstKey = command[3]
      sendCommand(command, firstKey).then(answered, (error: unknown) => {
        if (!String(error).includes("NOSCRIPT")) return failed(error)
        command[0] = "EVAL"
        command[1] = script.source
        sendCommand(command, firstKey).then(answered, failed)
      })
    }
    return send
  })
