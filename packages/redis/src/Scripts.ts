/**
 * Lua scripts sent straight on the node-redis client of `NodeRedis`: `EVALSHA` with the SHA
 * computed once when the script is defined, and `EVAL` after a `NOSCRIPT` (a restarted or flushed
 * Redis), so a store recovers by itself. The stores on the paid path (`RateLimiterRedis`,
 * `AdmissionStoreRedis`) use it instead of `Redis.eval` of `effect/persistence`: its script-cache
 * lookup and a fiber racing a timeout on every call halved the rate limiter's admissions per second
 * (see `bench/ratelimit.ts`). One watchdog timer for every call in flight enforces the timeout.
 *
 * @since 0.1.0
 */
import { NodeRedis } from "@effect/platform-node"
import { Effect } from "effect"
import { createHash } from "node:crypto"

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
 * The sender of the `NodeRedis` client in context, with a watchdog that fails a call Redis has not
 * answered within `timeoutMs`. The watchdog reads the wall clock, not Effect's: a timeout is about
 * real waiting, also under TestClock. It stops when the scope closes.
 *
 * @category constructors
 */
export const sender = (timeoutMs: number) =>
  Effect.gen(function*() {
    const { client } = yield* NodeRedis.NodeRedis
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
      client.sendCommand(command).then(answered, (error: unknown) => {
        if (!String(error).includes("NOSCRIPT")) return failed(error)
        command[0] = "EVAL"
        command[1] = script.source
        client.sendCommand(command).then(answered, failed)
      })
    }
    return send
  })
