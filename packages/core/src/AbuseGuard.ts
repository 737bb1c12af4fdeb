/**
 * Abuse protection: a caller with more than 20 failed requests (any non-2xx) within 30 seconds is
 * refused with a 429 for the next 30 seconds. The caller is the principal once a request has
 * authenticated, else the client address, so a wallet or an account cannot escape by changing
 * address and an address cannot lock out an account it does not hold.
 *
 * `track` follows one request: it refuses a blocked address up front, lets `Auth` name the
 * principal through `identify` (refusing a blocked principal right there), and records a failure
 * when the response is not a success. The guard's own 429s are not counted, so a blocked caller
 * that keeps retrying is released on time. A store outage lets requests through: the guard must
 * never be the reason the API is down.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { RateLimited, type ServiceUnavailable } from "./Errors.ts"

/** @category constants */
export const maxFailures = 20

/** @category constants */
export const windowMs = 30_000

/** @category constants */
export const blockMs = 30_000

/** @category constants */
export const message = "Too many failed attempts (over 20). Please wait 30s."

/** @category services */
export class AbuseGuard extends Context.Service<AbuseGuard, {
  /** Milliseconds left of the caller's block; 0 when it is not blocked. */
  readonly blockedFor: (caller: string) => Effect.Effect<number, ServiceUnavailable>
  /** Counts one failed request; the one over `maxFailures` within `windowMs` starts a block. */
  readonly recordFailure: (caller: string) => Effect.Effect<void, ServiceUnavailable>
  /**
   * True when the store knows, without I/O, that the caller is not blocked; lets a request of a
   * caller in good standing pass without building an Effect. Stores that must ask (Redis) leave it
   * out.
   */
  readonly isKnownClear?: (caller: string) => boolean
}>()("@tollgate/core/AbuseGuard") {}

/**
 * The caller of the request being served, as `track` follows it.
 *
 * @category models
 */
export interface CallerScope {
  readonly identify: (principalId: string) => Effect.Effect<void, RateLimited>
}

/**
 * Set from `track` for the duration of a request; `None` outside a guarded request.
 *
 * @category references
 */
export const CurrentCaller = Context.Reference<Option.Option<CallerScope>>("@tollgate/core/AbuseGuard/CurrentCaller", {
  defaultValue: () => Option.none()
})

/**
 * Names the principal of the current request (called by `Auth` once credentials verify); fails
 * with RateLimited when that principal is blocked.
 *
 * @category tracking
 */
export const identify = (principalId: string): Effect.Effect<void, RateLimited> =>
  Effect.flatMap(CurrentCaller, (caller) => Option.isSome(caller) ? caller.value.identify(principalId) : Effect.void)

const blocked = (ms: number) => new RateLimited({ message, retryAfterSeconds: Math.ceil(ms / 1000) })

const failOpen = <A>(effect: Effect.Effect<A, ServiceUnavailable>, fallback: A): Effect.Effect<A> =>
  effect.pipe(
    Effect.catchTag("ServiceUnavailable", (error) =>
      Effect.as(Effect.logWarning("abuse guard store unavailable", error.message), fallback))
  )

const isSuccess = (status: number) => status >= 200 && status < 300

/**
 * The guard of one request, in parts: the HTTP middleware runs the request itself, providing
 * `caller` in the same context change as its own services, and settles in its pre-response
 * handler.
 *
 * @category models
 */
export interface Tracking {
  /** Refuses a blocked address; `undefined` when the store already knows the address is clear. */
  readonly admit: Effect.Effect<void, RateLimited> | undefined
  /** The value of `CurrentCaller` while the request runs. */
  readonly caller: Option.Option<CallerScope>
  /**
   * Records a failure when the response is not a success, unless the guard refused the request
   * itself; `undefined` when there is nothing to record.
   */
  readonly settle: (status: number) => Effect.Effect<void> | undefined
}

interface CallerState {
  caller: string
  refused: boolean
}

const isKnownClear = (service: AbuseGuard["Service"], caller: string) =>
  service.isKnownClear !== undefined && service.isKnownClear(caller)

const refuseIfBlocked = (service: AbuseGuard["Service"], state: CallerState): Effect.Effect<void, RateLimited> =>
  Effect.flatMap(failOpen(service.blockedFor(state.caller), 0), (ms) => {
    if (ms === 0) return Effect.void
    state.refused = true
    return Effect.fail(blocked(ms))
  })

/**
 * Starts tracking one request from the client `address`.
 *
 * @category tracking
 */
export const track = (service: AbuseGuard["Service"], address: string): Tracking => {
  // One state object and two closures: this runs on every request of the service.
  const state = { caller: `address:${address}`, refused: false }
  return {
    admit: isKnownClear(service, state.caller) ? undefined : refuseIfBlocked(service, state),
    caller: Option.some({
      identify: (principalId) => {
        state.caller = `principal:${principalId}`
        return isKnownClear(service, state.caller) ? Effect.void : refuseIfBlocked(service, state)
      }
    }),
    settle: (status) => state.refused || isSuccess(status) ? undefined : failOpen(service.recordFailure(state.caller), undefined)
  }
}

/**
 * A process-local guard (dev mode, tests, single-instance deployments).
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<AbuseGuard> = Layer.sync(AbuseGuard, () => {
  const failures = new Map<string, Array<number>>()
  const blocks = new Map<string, number>()
  const sweep = (now: number) => {
    for (const [caller, until] of blocks) if (until <= now) blocks.delete(caller)
    for (const [caller, times] of failures) if ((times.at(-1) ?? 0) <= now - windowMs) failures.delete(caller)
  }
  return AbuseGuard.of({
    isKnownClear: (caller) => !blocks.has(caller),
    blockedFor: (caller) => Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, (blocks.get(caller) ?? 0) - now)),
    recordFailure: (caller) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (failures.size + blocks.size > 10_000) sweep(now)
        const recent = (failures.get(caller) ?? []).filter((at) => at > now - windowMs)
        recent.push(now)
        if (recent.length > maxFailures) {
          blocks.set(caller, now + blockMs)
          failures.delete(caller)
        } else {
          failures.set(caller, recent)
        }
      })
  })
})
