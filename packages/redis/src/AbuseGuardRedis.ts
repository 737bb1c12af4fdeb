/**
 * The Redis layer of `AbuseGuard`: every instance counts a caller's failures against the same
 * window, on the Redis server's clock, and concurrent failures cannot slip past the limit between a
 * count and a block.
 *
 * **Details**
 *
 * Per caller, a sorted set of failure times (a sliding window) and a block key that expires by
 * itself. Recording a failure is one Lua script (`lua/abuse-record.lua`) that judges and counts at
 * once: a blocked caller's failure is not counted and the block's time left is returned; otherwise
 * it trims the window, adds the failure and starts the block when the count passes the limit. A
 * key's block is read with its standing (`blockKey`, `AuthStoreRedis` `keyStanding`), so the block
 * costs the paid path no round trip of its own.
 *
 * @since 0.1.0
 */
import { AbuseGuard, Errors } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

// A principal's caller name carries its account as a hash tag (`AbuseGuard.principalCaller`), so
// its records sit in the account's slot; an address is a hash tag of its own.
const tagged = (caller: string) => caller.includes("{") ? caller : `{${caller}}`
const failuresKey = (caller: string) => `tollgate:abuse:${tagged(caller)}:failures`

/**
 * The key of a caller's block, which expires by itself; the admission script of a paid call reads
 * it (`AdmissionStoreRedis`).
 *
 * @category keys
 */
export const blockKey = (caller: string) => `tollgate:abuse:${tagged(caller)}:block`

const recordScript = Redis.script(
  (failures: string, block: string, windowMs: number, maxFailures: number, blockMs: number) => [
    failures,
    block,
    windowMs,
    maxFailures,
    blockMs
  ],
  {
    numberOfKeys: 2,
    lua: Lua.read("abuse-record")
  }
).withReturnType<number>()

const unavailable = () => Errors.storeUnavailable("The abuse guard store")

/**
 * `AbuseGuard` over the `Redis` service in context.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<AbuseGuard.AbuseGuard, never, Redis.Redis> = Layer.effect(
  AbuseGuard.AbuseGuard,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const record = redis.eval(recordScript)
    return AbuseGuard.AbuseGuard.of({
      blockKey,
      blockedFor: (caller) =>
        redis.send<number>("PTTL", blockKey(caller)).pipe(
          Effect.map((ms) => Math.max(0, ms)),
          Effect.mapError(unavailable)
        ),
      recordFailure: (caller) =>
        record(failuresKey(caller), blockKey(caller), AbuseGuard.windowMs, AbuseGuard.maxFailures, AbuseGuard.blockMs).pipe(
          Effect.map(Number),
          Effect.mapError(unavailable)
        )
    })
  })
)
