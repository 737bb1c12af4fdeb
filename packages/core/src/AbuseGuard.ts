/**
 * Abuse protection: a caller with more than 20 failed attempts within 30 seconds is refused with a
 * 429 for the next 30 seconds. It blocks abusers and never the innocent, so two things are written
 * down once here:
 *
 * - What counts as a failed attempt (`countsAsFailure`): the caller's own mistakes and failed
 *   authentication, that is the 4xx a caller causes. An honest balance answer (402), a duplicate
 *   still in flight (409), a limit (429, the guard's own included), a request the client abandoned
 *   (499) and every 5xx are not its fault and are not counted. A body sent too slowly (408) is
 *   counted: it held upload memory that others were waiting for.
 * - Who the caller is (`track`): a request with valid credentials is judged by its credential, the
 *   API key (`key:<id>`) or the wallet (`wallet:<account>`), never by its address, so one key's
 *   failures block that key and not its account's other keys (nor the ADMIN key that would revoke
 *   it). A request without valid credentials is judged by its client address (`address:<ip>`);
 *   that block applies only to such requests, so a valid key from a blocked address still works.
 *
 * **Details**
 *
 * A request that carries no credentials is refused up front when its address is blocked. One whose
 * credentials turn out not to be valid is answered 429 instead of its failure once it ends: it cost
 * no more than the check of its credentials. Counting and blocking are one store operation
 * (`recordFailure`), so the 21st failure blocks at once even among concurrent requests and
 * instances. A store outage lets requests through: the guard must never be the reason the API is
 * down.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { RateLimited, type ServiceUnavailable } from "./Errors.ts"
import type { Principal } from "./Principal.ts"

/** @category constants */
export const maxFailures = 20

/** @category constants */
export const windowMs = 30_000

/** @category constants */
export const blockMs = 30_000

/** @category constants */
export const message = "Too many failed attempts (over 20). Please wait 30s."

/**
 * The statuses of the 4xx range that are not the caller's failure: 402 (a balance or payment
 * answer), 499 (the client gave up: nothing it did was wrong), 409 (the same `Idempotency-Key`
 * still in flight; the client is told to retry) and 429 (a limit, the guard's own included, so a
 * blocked caller that keeps retrying is released on time). A 408 is a body sent slower than the
 * server's minimum rate while it held upload memory, which is how a slow-upload attack looks, so it
 * counts.
 */
const NOT_FAILURES: ReadonlySet<number> = new Set([402, 409, 429, 499])

/**
 * Whether a response counts as a failed attempt of its caller: a 4xx other than those in
 * `NOT_FAILURES`. Successes, redirects and every 5xx (the service's fault) never count.
 *
 * @category predicates
 */
export const countsAsFailure = (status: number): boolean => status >= 400 && status < 500 && !NOT_FAILURES.has(status)

/**
 * The guard's name for a principal: its key, or its wallet account.
 *
 * @category callers
 */
export const principalCaller = (principal: Principal): string =>
  // The account in braces is a Redis hash tag: a store keeps a principal's records in its
  // account's slot, where the admission script of a paid call can read its block.
  principal._tag === "ApiKey" ? `key:{${principal.accountId}}:${principal.keyId}` : `wallet:{${principal.accountId}}`

/**
 * The guard's name for a client address, for requests without valid credentials.
 *
 * @category callers
 */
export const addressCaller = (address: string): string => `address:${address}`

/** @category services */
export class AbuseGuard extends Context.Service<AbuseGuard, {
  /** Milliseconds left of the caller's block; 0 when it is not blocked. */
  readonly blockedFor: (caller: string) => Effect.Effect<number, ServiceUnavailable>
  /**
   * One failed attempt, counted and judged in one step: a blocked caller's attempt is not counted
   * and the milliseconds left of its block are returned; otherwise the failure is counted, the one
   * over `maxFailures` within `windowMs` starts a block, and 0 is returned (that attempt itself
   * keeps its own answer).
   */
  readonly recordFailure: (caller: string) => Effect.Effect<number, ServiceUnavailable>
  /**
   * True when the store knows, without I/O, that the caller is not blocked; lets a request of a
   * caller in good standing pass without building an Effect. Stores that must ask (Redis) leave it
   * out.
   */
  readonly isKnownClear?: (caller: string) => boolean
  /**
   * The store key of a caller's block, for a store step that reads it together with its own checks
   * (`AuthStore.keyStanding`, which reads a key's standing and block in one round trip). Only a
   * store whose blocks another store can read (Redis) has it.
   */
  readonly blockKey?: (caller: string) => string
}>()("@tollgate/core/AbuseGuard") {}

/**
 * The caller of the request being served, as `track` follows it.
 *
 * @category models
 */
export interface CallerScope {
  readonly identify: (principal: Principal) => Effect.Effect<void, RateLimited>
  /** `identify` for a principal whose block was read already (`blockedMs`, 0 when not blocked). */
  readonly identifyRead: (principal: Principal, blockedMs: number) => Effect.Effect<void, RateLimited>
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
 * Names the principal of the current request (called by `Auth` once its credentials are valid:
 * signature, account and key standing); fails with RateLimited when that principal is blocked.
 *
 * @category tracking
 */
export const identify = (principal: Principal): Effect.Effect<void, RateLimited> =>
  Effect.withFiber((fiber) => {
    const caller = fiber.getRef(CurrentCaller)
    return Option.isSome(caller) ? caller.value.identify(principal) : Effect.void
  })

/**
 * `identify` for a principal whose block a store step has read already (`AuthStore.keyStanding`,
 * through `blockKey`): names the principal and refuses when `blockedMs` is above 0,
 * without asking the store again.
 *
 * @category tracking
 */
export const identifyRead = (principal: Principal, blockedMs: number): Effect.Effect<void, RateLimited> =>
  Effect.withFiber((fiber) => {
    const caller = fiber.getRef(CurrentCaller)
    return Option.isSome(caller)
      ? caller.value.identifyRead(principal, blockedMs)
      : blockedMs > 0
      ? Effect.fail(blocked(blockedMs))
      : Effect.void
  })

/**
 * The guard's refusal for a block with `ms` left.
 *
 * @category errors
 */
export const blocked = (ms: number): RateLimited => new RateLimited({ message, retryAfterSeconds: Math.max(1, Math.ceil(ms / 1000)) })

const failOpen = <A>(effect: Effect.Effect<A, ServiceUnavailable>, fallback: A): Effect.Effect<A> =>
  effect.pipe(
    Effect.catchTag("ServiceUnavailable", (error) => Effect.as(Effect.logWarning("abuse guard store unavailable", error.message), fallback))
  )

/**
 * The guard of one request, in parts: the HTTP middleware runs the request itself, providing
 * `caller` in the same context change as its own services, and settles in its pre-response
 * handler.
 *
 * @category models
 */
export interface Tracking {
  /**
   * Refuses a request without credentials from a blocked address; `undefined` when there is
   * nothing to check (credentials to judge later, or an address the store knows is clear).
   */
  readonly admit: Effect.Effect<void, RateLimited> | undefined
  /** The value of `CurrentCaller` while the request runs. */
  readonly caller: Option.Option<CallerScope>
  /**
   * Counts the response when it is a failed attempt. Succeeds with the refusal to answer instead
   * when the caller was already blocked (a request whose credentials were not valid, from a blocked
   * address); `undefined` when there is nothing to count.
   */
  readonly settle: (status: number) => Effect.Effect<Option.Option<RateLimited>> | undefined
}

const isKnownClear = (service: AbuseGuard["Service"], caller: string) => service.isKnownClear !== undefined && service.isKnownClear(caller)

/**
 * One request's caller and what the guard decided of it: the `Tracking` of `track` and its
 * `CallerScope` in one object, since every request of the service makes one.
 */
class Tracked implements Tracking, CallerScope {
  readonly service: AbuseGuard["Service"]
  caller: Option.Option<CallerScope>
  admit: Effect.Effect<void, RateLimited> | undefined
  name: string
  refused = false

  constructor(service: AbuseGuard["Service"], address: string, hasCredentials: boolean) {
    this.service = service
    this.name = addressCaller(address)
    this.caller = Option.some(this)
    this.admit = hasCredentials || isKnownClear(service, this.name) ? undefined : this.refuseIfBlocked()
  }

  refuseIfBlocked(): Effect.Effect<void, RateLimited> {
    return Effect.flatMap(failOpen(this.service.blockedFor(this.name), 0), (ms) => {
      if (ms === 0) return Effect.void
      this.refused = true
      return Effect.fail(blocked(ms))
    })
  }

  identify(principal: Principal): Effect.Effect<void, RateLimited> {
    this.name = principalCaller(principal)
    return isKnownClear(this.service, this.name) ? Effect.void : this.refuseIfBlocked()
  }

  identifyRead(principal: Principal, blockedMs: number): Effect.Effect<void, RateLimited> {
    this.name = principalCaller(principal)
    if (blockedMs === 0) return Effect.void
    this.refused = true
    return Effect.fail(blocked(blockedMs))
  }

  settle(status: number): Effect.Effect<Option.Option<RateLimited>> | undefined {
    if (this.refused || !countsAsFailure(status)) return undefined
    return Effect.map(failOpen(this.service.recordFailure(this.name), 0), (ms) => ms === 0 ? Option.none() : Option.some(blocked(ms)))
  }
}

/**
 * Starts tracking one request from the client `address`; `hasCredentials` says whether it carries
 * credentials at all (`Auth.hasCredentials`), valid or not.
 *
 * @category tracking
 */
export const track = (service: AbuseGuard["Service"], address: string, hasCredentials: boolean): Tracking =>
  new Tracked(service, address, hasCredentials)

/** How many callers the memory guard follows before it sweeps out the stale ones. */
const SWEEP_AT = 10_000

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
  const left = (caller: string, now: number) => Math.max(0, (blocks.get(caller) ?? 0) - now)
  return AbuseGuard.of({
    isKnownClear: (caller) => !blocks.has(caller),
    blockedFor: (caller) => Effect.map(Clock.currentTimeMillis, (now) => left(caller, now)),
    recordFailure: (caller) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const ms = left(caller, now)
        if (ms > 0) return ms
        blocks.delete(caller)
        if (failures.size + blocks.size > SWEEP_AT) sweep(now)
        const recent = (failures.get(caller) ?? []).filter((at) => at > now - windowMs)
        recent.push(now)
        if (recent.length > maxFailures) {
          blocks.set(caller, now + blockMs)
          failures.delete(caller)
        } else {
          failures.set(caller, recent)
        }
        return 0
      })
  })
})
