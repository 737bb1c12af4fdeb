/**
 * Request and token limits. One admission checks every limit that applies to a call (requests and
 * tokens; per key, per account, global) all or nothing: a rejected call consumes nothing. Tokens
 * are reserved at admission and settled to the actual count afterwards. The answer carries the
 * exact `x-ratelimit-*` headers of the limit that applied.
 *
 * **Details**
 *
 * The rules live here once; the counters live in a `RateLimiterStore` whose one atomic primitive
 * (`take`: check every counter, then add to every counter, or to none; or add without checking, for
 * a use that already happened) has a memory layer here and a Redis layer (one Lua script) in
 * `@tollgate/redis`. Requests and tokens count in fixed windows aligned to the epoch, so
 * `remaining` and `reset` are exact; credits count in a rolling window made of buckets.
 *
 * @since 0.1.0
 */
import { Clock, Context, Data, Duration, Effect, Layer, Metric, Option } from "effect"
import { RateLimited, ServiceUnavailable } from "./Errors.ts"
import * as RateLimitLog from "./RateLimitLog.ts"

/**
 * Which limit applied, as `x-ratelimit-type` says it (defined in `RateLimitLog`, which records it).
 *
 * @category models
 */
export type LimitType = RateLimitLog.LimitType

/**
 * One limit to check. `key` identifies the counter (e.g. `acct_1:text:M`); `hashTag` groups the
 * counters of one account on one Redis Cluster slot.
 *
 * @category models
 */
export interface Limit {
  readonly type: LimitType
  readonly key: string
  readonly hashTag: string
  readonly requests?: { readonly limit: number; readonly windowMs: number }
  readonly tokens?: { readonly limit: number; readonly windowMs: number; readonly reserve: number }
  /** Credits per rolling window (the RPC proxy's 24 h cap). */
  readonly credits?: { readonly limit: number; readonly windowMs: number; readonly reserve: number }
  /** Named in the 429 `customMessage` when this limit trips (RPC caps). */
  readonly customMessage?: string
  /** Who is limited and for what: a rejection by this limit goes into the `RateLimitLog`. */
  readonly subject?: RateLimitLog.Subject
}

/**
 * What an admission took from the counters: the requests counted and the tokens and credits
 * reserved, to be settled to what the call used or cancelled. (The paid call's admission as a
 * whole, with its credit hold, is the `Admission` module's.)
 *
 * @category models
 */
export interface Reservation {
  /** `x-ratelimit-*` headers, exact, of the limit that applied. */
  readonly headers: Readonly<Record<string, string>>
  /** Settles reserved tokens (and credits) to what was actually used; releases the rest. */
  readonly settle: (actual: { readonly tokens?: number; readonly credits?: number }) => Effect.Effect<void>
  /**
   * Gives back everything the admission took, its requests included: for a call refused by a
   * check made together with the admission (the credit hold), which must leave no trace. An
   * admission is settled or cancelled once; later calls do nothing.
   */
  readonly cancel: Effect.Effect<void>
  /**
   * `settle` as data: the counter adjustments that bring the reservations to `actual`, for a
   * caller that writes them in its own store step (see `Admission`). Claims the admission like
   * `settle` does: afterwards `settle` and `cancel` do nothing, and a second claim is empty.
   */
  readonly settlement: (
    actual: { readonly tokens?: number | undefined; readonly credits?: number | undefined }
  ) => ReadonlyArray<Adjustment>
  /** `cancel` as data, claimed the same way. */
  readonly cancellation: () => ReadonlyArray<Adjustment>
}

/**
 * What one dimension of a limit stands at: `resetAt` is when the window ends (fixed) or when the
 * oldest use leaves it (rolling), in epoch milliseconds.
 *
 * @category models
 */
export interface DimensionStatus {
  readonly limit: number
  readonly used: number
  readonly remaining: number
  readonly resetAt: number
}

/** @category models */
export interface LimitStatus {
  readonly type: LimitType
  readonly key: string
  readonly requests?: DimensionStatus
  readonly tokens?: DimensionStatus
  readonly credits?: DimensionStatus
}

/**
 * An admission planned but not taken: the counters a store must take, all or nothing, and what the
 * states the store answers mean. For a caller that takes them in its own store step together with
 * other checks (see `Admission`); `RateLimiter.admit` is the same plan taken by the limiter's store.
 *
 * @category models
 */
export interface Plan {
  readonly now: number
  readonly counters: ReadonlyArray<Counter>
  /** The admission of counters that were taken, with the states the store answered. */
  readonly admitted: (states: ReadonlyArray<CounterState>) => Reservation
  /** The 429 of counters that were refused (recorded in the `RateLimitLog` when one is provided). */
  readonly rejected: (states: ReadonlyArray<CounterState>) => Effect.Effect<never, RateLimited>
}

/** @category services */
export class RateLimiter extends Context.Service<RateLimiter, {
  readonly admit: (limits: ReadonlyArray<Limit>) => Effect.Effect<Reservation, RateLimited | ServiceUnavailable>
  /**
   * Counts a call against `limits` without refusing it: every counter is added to, past its limit
   * if need be. For a call already under way that belongs under other limits than those it was
   * admitted under (a chat call served by a fallback model counts under that model's tier). Its
   * admission settles and cancels like `admit`'s. It fails only when the store cannot be reached,
   * whatever the failure policy, so the caller can keep what it counted before.
   */
  readonly count: (limits: ReadonlyArray<Limit>) => Effect.Effect<Reservation, ServiceUnavailable>
  /** The plan of an admission of `limits` at `now`, taking nothing. */
  readonly plan: (limits: ReadonlyArray<Limit>, now: number) => Plan
  /** Where each limit stands, consuming nothing. */
  readonly inspect: (limits: ReadonlyArray<Limit>) => Effect.Effect<ReadonlyArray<LimitStatus>, ServiceUnavailable>
}>()("@tollgate/core/RateLimiter") {}

/**
 * One counter of the store. A fixed counter is the field `field` (`r` requests, `t` tokens) of the
 * window `key` (which names its window) until the window ends; a rolling counter is a set of buckets
 * of `bucketMs` in `key`, summed over the last `windowMs`.
 *
 * @category store
 */
export interface Counter {
  readonly key: string
  readonly field: "r" | "t" | "c"
  readonly rolling: boolean
  readonly limit: number
  readonly amount: number
  readonly windowMs: number
  readonly bucketMs: number
}

/**
 * A counter after `take`: `used` includes `amount` when the take was admitted; `resetMs` is the
 * time until the window ends (fixed) or the oldest bucket leaves (rolling); `retryMs` the time until
 * `amount` would fit, 0 when it fits now.
 *
 * @category store
 */
export interface CounterState {
  readonly used: number
  readonly resetMs: number
  readonly retryMs: number
}

/** @category store */
export interface Adjustment {
  readonly key: string
  readonly field: "r" | "t" | "c"
  readonly rolling: boolean
  /** The bucket of a rolling counter the reservation went into. */
  readonly bucket: number
  readonly delta: number
}

/**
 * The store could not be reached or answered badly. Never seen by a client: the limiter turns it
 * into a 503 or lets the call through, by its failure policy.
 *
 * @category errors
 */
export class RateLimiterStoreError extends Data.TaggedError("RateLimiterStoreError")<{ readonly cause: unknown }> {}

/**
 * How a store's `take` treats its counters: `checked`, every counter is checked and only if each
 * one has room for its `amount` are all of them increased; `dryRun`, checked and nothing written;
 * `unchecked`, every counter is increased whatever its room, and the take is admitted (the states
 * still say which counters are past their limit).
 *
 * @category store
 */
export type TakeMode = "checked" | "dryRun" | "unchecked"

/**
 * The counters. `take` is atomic, in every `TakeMode`.
 *
 * @category store
 */
export class RateLimiterStore extends Context.Service<RateLimiterStore, {
  readonly take: (
    now: number,
    counters: ReadonlyArray<Counter>,
    mode: TakeMode
  ) => Effect.Effect<{ readonly admitted: boolean; readonly states: ReadonlyArray<CounterState> }, RateLimiterStoreError>
  /** Adds `delta` to counters that still exist (a window that ended is left alone). */
  readonly adjust: (adjustments: ReadonlyArray<Adjustment>) => Effect.Effect<void, RateLimiterStoreError>
}>()("@tollgate/core/RateLimiterStore") {}

/**
 * Buckets of a rolling window: 144 makes the 24 h credit cap roll in 10-minute steps.
 *
 * @category store
 */
export const rollingBuckets = 144

/**
 * The storage key of a limit's fixed window at `now`, which holds its requests and tokens: it names
 * the window's index, so a new window starts from zero and the old key expires by itself.
 *
 * @category store
 */
export const windowKey = (limit: Limit, now: number, windowMs: number): string =>
  `rl:{${limit.hashTag}}:${limit.key}:${Math.floor(now / windowMs)}`

/**
 * The storage key of a limit's rolling credit window.
 *
 * @category store
 */
export const rollingKey = (limit: Limit): string => `rl:{${limit.hashTag}}:${limit.key}:c`

/**
 * What the store must do when the Redis behind it cannot be reached: refuse with a 503
 * (`fail-closed`, the default) or let the call through unlimited, logged and counted
 * (`fail-open`).
 *
 * @category options
 */
export type FailurePolicy = "fail-closed" | "fail-open"

/** @category options */
export interface Options {
  readonly onStoreFailure?: FailurePolicy
  /**
   * How long a store call may take before it counts as a failure, enforced by racing a fiber per
   * call. Default: none. The Redis layer has its own, cheaper `timeoutMs`; prefer that one.
   */
  readonly storeTimeout?: Duration.Input
}

/**
 * Calls let through because the store was down and the policy is `fail-open`: the
 * `{service="rate_limiter",policy="fail-open"}` series of `tollgate_redis_errors_total`, beside the
 * store errors the metered pipeline counts (`@tollgate/http` `Observability.redisErrors`).
 *
 * @category metrics
 */
export const failOpenCounter = Metric.counter("tollgate_redis_errors_total", {
  description: "Redis errors by service and the failure policy applied",
  incremental: true,
  attributes: { service: "rate_limiter", policy: "fail-open" }
})

interface Planned {
  readonly limit: Limit
  readonly dimension: "requests" | "tokens" | "credits"
  readonly counter: Counter
}

// One counter per dimension of each limit. The counters also go, in the same order, into
// `counters`, which the store takes as they are.
const plan = (limits: ReadonlyArray<Limit>, now: number, dryRun: boolean, counters: Array<Counter>): Array<Planned> => {
  const planned: Array<Planned> = []
  const add = (limit: Limit, dimension: Planned["dimension"], counter: Counter) => {
    planned.push({ limit, dimension, counter })
    counters.push(counter)
  }
  for (const limit of limits) {
    const { credits, requests, tokens } = limit
    // Requests and tokens of one window share its key; the store keeps them side by side.
    let key: string | undefined
    if (requests !== undefined) {
      const { limit: max, windowMs } = requests
      key = windowKey(limit, now, windowMs)
      add(limit, "requests", { key, field: "r", rolling: false, limit: max, amount: dryRun ? 0 : 1, windowMs, bucketMs: windowMs })
    }
    if (tokens !== undefined) {
      const { limit: max, reserve, windowMs } = tokens
      if (key === undefined || requests!.windowMs !== windowMs) key = windowKey(limit, now, windowMs)
      add(limit, "tokens", { key, field: "t", rolling: false, limit: max, amount: dryRun ? 0 : reserve, windowMs, bucketMs: windowMs })
    }
    if (credits !== undefined) {
      const { limit: max, reserve, windowMs } = credits
      add(limit, "credits", {
        key: rollingKey(limit),
        field: "c",
        rolling: true,
        limit: max,
        amount: dryRun ? 0 : reserve,
        windowMs,
        bucketMs: Math.max(1, Math.floor(windowMs / rollingBuckets))
      })
    }
  }
  return planned
}

const windowName = (ms: number) =>
  ms === 60_000 ? "minute" : ms === 86_400_000 ? "24 hours" : ms % 1000 === 0 ? `${ms / 1000} seconds` : `${ms} ms`

const describe = ({ counter, dimension }: Planned) =>
  `${counter.limit} ${dimension} per ${counter.rolling ? "rolling " : ""}${windowName(counter.windowMs)}`

const statusOf = (counter: Counter, state: CounterState, now: number): DimensionStatus => ({
  limit: counter.limit,
  used: state.used,
  remaining: Math.max(0, counter.limit - state.used),
  resetAt: now + state.resetMs
})

const statuses = (limits: ReadonlyArray<Limit>, planned: ReadonlyArray<Planned>, states: ReadonlyArray<CounterState>, now: number) =>
  limits.map((limit): LimitStatus => {
    const status: { -readonly [K in keyof LimitStatus]: LimitStatus[K] } = { type: limit.type, key: limit.key }
    planned.forEach((p, i) => {
      const state = states[i]
      if (p.limit === limit && state !== undefined) status[p.dimension] = statusOf(p.counter, state, now)
    })
    return status
  })

const room = (limit: number, used: number) => limit === 0 ? 0 : Math.max(0, limit - used) / limit

/**
 * The `x-ratelimit-*` headers of the planned counters (of every limit, or of those `only` keeps):
 * request headers from the limit with the least room for requests, token headers from the one with
 * the least room for tokens, and `x-ratelimit-type` from the limit closest to tripping overall.
 * Admissions go through here, so it reads the counters as planned (a limit's counters are adjacent)
 * instead of building a status per limit first.
 */
const headersOf = (
  limits: ReadonlyArray<Limit>,
  planned: ReadonlyArray<Planned>,
  states: ReadonlyArray<CounterState>,
  now: number,
  only?: (limit: Limit) => boolean
): Record<string, string> => {
  const headers: Record<string, string> = {}
  let requests = -1
  let requestsRoom = 0
  let tokens = -1
  let tokensRoom = 0
  let applied: Limit | undefined
  let appliedRoom = 0
  let current: Limit | undefined
  let currentRoom = 0
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i]!
    if (only !== undefined && !only(p.limit)) continue
    const left = room(p.counter.limit, states[i]!.used)
    if (p.limit !== current) {
      if (current !== undefined && (applied === undefined || currentRoom < appliedRoom)) {
        applied = current
        appliedRoom = currentRoom
      }
      current = p.limit
      currentRoom = left
    } else if (left < currentRoom) {
      currentRoom = left
    }
    if (p.dimension === "requests") {
      if (requests < 0 || left < requestsRoom) {
        requests = i
        requestsRoom = left
      }
    } else if (p.dimension === "tokens" && (tokens < 0 || left < tokensRoom)) {
      tokens = i
      tokensRoom = left
    }
  }
  if (current !== undefined && (applied === undefined || currentRoom < appliedRoom)) applied = current
  if (requests >= 0) {
    const { limit } = planned[requests]!.counter
    const state = states[requests]!
    headers["x-ratelimit-limit-requests"] = String(limit)
    headers["x-ratelimit-remaining-requests"] = String(Math.max(0, limit - state.used))
    headers["x-ratelimit-reset-requests"] = String(Math.ceil((now + state.resetMs) / 1000))
  }
  if (tokens >= 0) {
    const { limit } = planned[tokens]!.counter
    const state = states[tokens]!
    headers["x-ratelimit-limit-tokens"] = String(limit)
    headers["x-ratelimit-remaining-tokens"] = String(Math.max(0, limit - state.used))
    headers["x-ratelimit-reset-tokens"] = String(Math.ceil(Math.max(0, state.resetMs) / 1000))
  }
  // A limit without any counter still names the type when it is the only one.
  applied ??= only === undefined ? limits[0] : limits.find(only)
  if (applied !== undefined) headers["x-ratelimit-type"] = applied.type
  return headers
}

const unlimited: Reservation = {
  headers: {},
  settle: () => Effect.void,
  cancel: Effect.void,
  settlement: () => [],
  cancellation: () => []
}

/**
 * The limiter over a store: the rules, written once for every store.
 *
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* RateLimiterStore
    const log = Option.getOrUndefined(yield* Effect.serviceOption(RateLimitLog.RateLimitLog))
    const policy = options.onStoreFailure ?? "fail-closed"
    const timeout = options.storeTimeout === undefined ? undefined : Duration.fromInputUnsafe(options.storeTimeout)
    const guarded = <A>(self: Effect.Effect<A, RateLimiterStoreError>) =>
      timeout === undefined ? self : self.pipe(
        Effect.timeoutOrElse({
          duration: timeout,
          orElse: () => Effect.fail(new RateLimiterStoreError({ cause: "timed out" }))
        })
      )
    const unavailable = new ServiceUnavailable({ message: "Rate limiting is temporarily unavailable", retryAfterSeconds: 1 })

    const storeFailure = (error: RateLimiterStoreError): Effect.Effect<Reservation, ServiceUnavailable> =>
      policy === "fail-open"
        ? Effect.logWarning("rate-limit store unreachable; admitting without limits (fail-open)", error.cause).pipe(
          Effect.andThen(Metric.update(failOpenCounter, 1)),
          Effect.as(unlimited)
        )
        : Effect.logError("rate-limit store unreachable; refusing (fail-closed)", error.cause).pipe(
          Effect.andThen(Effect.fail(unavailable))
        )

    const rejected = Effect.fnUntraced(function*(
      limits: ReadonlyArray<Limit>,
      planned: ReadonlyArray<Planned>,
      states: ReadonlyArray<CounterState>,
      now: number
    ) {
      const tripped = planned.flatMap((p, i) => {
        const state = states[i]
        return state !== undefined && state.retryMs > 0 && p.counter.amount > 0 ? [{ p, state }] : []
      })
      const retryMs = Math.max(1, ...tripped.map(({ state }) => state.retryMs))
      const culprit = tripped[0]?.p ?? planned[0]!
      const first = culprit.limit
      const headers = headersOf(limits, planned, states, now, (l) => l.key === first.key && l.type === first.type)
      headers["x-ratelimit-reset-requests"] = String(Math.ceil((now + retryMs) / 1000))
      const description = describe(culprit)
      if (log !== undefined && first.subject !== undefined) {
        yield* log.record({ ...first.subject, timestamp: now, limitType: first.type, limit: description })
      }
      return yield* new RateLimited({
        message: `Rate limit exceeded: ${description} (${first.type} limit)`,
        retryAfterSeconds: Math.ceil(retryMs / 1000),
        headers,
        ...(first.customMessage === undefined ? {} : { customMessage: first.customMessage })
      })
    })

    const admitted = (
      limits: ReadonlyArray<Limit>,
      planned: ReadonlyArray<Planned>,
      states: ReadonlyArray<CounterState>,
      now: number
    ): Reservation => {
      let settled = false
      const claim = (deltaOf: (counter: Counter, dimension: Planned["dimension"]) => number | undefined) => {
        if (settled) return []
        settled = true
        const adjustments: Array<Adjustment> = []
        for (const { counter, dimension } of planned) {
          if (counter.amount === 0) continue
          const delta = deltaOf(counter, dimension)
          if (delta === undefined || delta === 0) continue
          adjustments.push({
            key: counter.key,
            field: counter.field,
            rolling: counter.rolling,
            bucket: Math.floor(now / counter.bucketMs),
            delta
          })
        }
        return adjustments
      }
      const write = (adjustments: ReadonlyArray<Adjustment>) =>
        adjustments.length === 0 ? Effect.void : Effect.withSpan(
          // Data-first: the data-last `withSpan` captures a call-site stack on every settlement.
          guarded(store.adjust(adjustments)).pipe(Effect.catchTag("RateLimiterStoreError", (error) =>
            Effect.logWarning("rate-limit settlement lost: store unreachable", error.cause))),
          "RateLimiter.settle",
          { captureStackTrace: false }
        )
      const settlement: Reservation["settlement"] = (actual) =>
        claim((counter, dimension) => {
          if (dimension === "requests")
            return undefined
          const used = dimension === "tokens" ? actual.tokens : actual.credits
          return used === undefined ? undefined : Math.max(0, Math.floor(used)) - counter.amount
        })
      const cancellation = () =>
        claim((counter) =>
          -counter.amount
        )
      return {
        headers: headersOf(limits, planned, states, now),
        settle: (actual) => Effect.suspend(() => write(settlement(actual))),
        cancel: Effect.suspend(() => write(cancellation())),
        settlement,
        cancellation
      }
    }

    /**
     * The counters of limits that are found again (`RateLimitPolicy.policy` keeps a key's limits), kept
     * while their fixed windows are the same ones: a counter's key names its window.
     */
    const kept = new WeakMap<
      ReadonlyArray<Limit>,
      { readonly windows: ReadonlyArray<number>; readonly counters: Array<Counter>; readonly planned: Array<Planned> }
    >()
    const windowsOf = (counters: ReadonlyArray<Counter>, now: number) =>
      counters.map((counter) => counter.rolling ? 0 : Math.floor(now / counter.windowMs))
    const sameWindows = (counters: ReadonlyArray<Counter>, windows: ReadonlyArray<number>, now: number) => {
      for (let i = 0; i < counters.length; i++) {
        const counter = counters[i]!
        if (!counter.rolling && Math.floor(now / counter.windowMs) !== windows[i]) return false
      }
      return true
    }

    const planOf = (limits: ReadonlyArray<Limit>, now: number): Plan => {
      let found = kept.get(limits)
      if (found === undefined || !sameWindows(found.counters, found.windows, now)) {
        const counters: Array<Counter> = []
        const planned = plan(limits, now, false, counters)
        found = { windows: windowsOf(counters, now), counters, planned }
        kept.set(limits, found)
      }
      const { counters, planned } = found
      return {
        now,
        counters,
        admitted: (states) => admitted(limits, planned, states, now),
        rejected: (states) => rejected(limits, planned, states, now)
      }
    }

    // The hot path has no span and no generator: either costs more than the memory store's whole
    // step. Rejections and store failures, the rare paths, are logged instead.
    const admit = (limits: ReadonlyArray<Limit>): Effect.Effect<Reservation, RateLimited | ServiceUnavailable> =>
      limits.length === 0 ? Effect.succeed(unlimited) : Clock.clockWith((clock) => {
        const planned = planOf(limits, clock.currentTimeMillisUnsafe())
        return guarded(store.take(planned.now, planned.counters, "checked")).pipe(
          Effect.matchEffect({
            onFailure: storeFailure,
            onSuccess: (result) => result.admitted ? Effect.succeed(planned.admitted(result.states)) : planned.rejected(result.states)
          })
        )
      })

    const inspect = Effect.fn("RateLimiter.inspect")(function*(limits: ReadonlyArray<Limit>) {
      const now = yield* Clock.currentTimeMillis
      const counters: Array<Counter> = []
      const planned = plan(limits, now, true, counters)
      const { states } = yield* guarded(store.take(now, counters, "dryRun")).pipe(
        Effect.catchTag("RateLimiterStoreError", () => Effect.fail(unavailable))
      )
      return statuses(limits, planned, states, now)
    })

    const count = (limits: ReadonlyArray<Limit>): Effect.Effect<Reservation, ServiceUnavailable> =>
      limits.length === 0 ? Effect.succeed(unlimited) : Clock.clockWith((clock) => {
        const planned = planOf(limits, clock.currentTimeMillisUnsafe())
        return guarded(store.take(planned.now, planned.counters, "unchecked")).pipe(
          Effect.matchEffect({
            onFailure: (error) =>
              Effect.andThen(Effect.logWarning("rate-limit store unreachable; nothing counted", error.cause), Effect.fail(unavailable)),
            onSuccess: (result) => Effect.succeed(planned.admitted(result.states))
          })
        )
      })

    return RateLimiter.of({ admit, count, plan: planOf, inspect })
  })

/**
 * The limiter over whatever `RateLimiterStore` is provided. When a `RateLimitLog` is provided as
 * well, every rejection of a limit that names its `subject` is recorded there.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<RateLimiter, never, RateLimiterStore> => Layer.effect(RateLimiter, make(options))

interface Entry {
  expiresAt: number
  value: number
  buckets?: Map<number, number>
}

const sweepEvery = 4096

/**
 * The in-memory store's primitives as plain functions, for a caller that runs them inside its own
 * synchronous step with other stores' (see `Admission.layerMemory`). `take` and `adjust` of the
 * store are these, wrapped in an Effect.
 *
 * @category store
 */
export class StoreMemory extends Context.Service<StoreMemory, {
  readonly take: (now: number, counters: ReadonlyArray<Counter>, mode: TakeMode) => {
    readonly admitted: boolean
    readonly states: ReadonlyArray<CounterState>
  }
  readonly adjust: (adjustments: ReadonlyArray<Adjustment>, now: number) => void
}>()("@tollgate/core/RateLimiter/StoreMemory") {}

/**
 * One process's counters in a map. `take` runs synchronously, so it is atomic; expired windows
 * are swept out every few thousand operations, so memory stays bounded by the live windows. Its
 * twin on Redis is the limiter's Lua (`@tollgate/redis` `src/lua/take.lua` and `adjust.lua`).
 *
 * @category store
 */
export const makeStoreMemory = (): StoreMemory["Service"] => {
  // Keyed by a counter's key followed by its field.
  const entries = new Map<string, Entry>()
  // The key and field of a counter, as one string made once per counter: the limiter keeps its
  // counters (`plan`), and a string seen before has its hash already.
  const ids = new WeakMap<Counter, string>()
  const idOf = (counter: Counter) => {
    let id = ids.get(counter)
    if (id === undefined) {
      id = counter.key + counter.field
      ids.set(counter, id)
    }
    return id
  }
  let operations = 0
  const sweep = (now: number) => {
    if (++operations % sweepEvery !== 0) return
    for (const [key, entry] of entries) if (entry.expiresAt <= now) entries.delete(key)
  }
  const live = (key: string, now: number) => {
    const entry = entries.get(key)
    if (entry === undefined || entry.expiresAt > now) return entry
    entries.delete(key)
    return undefined
  }
  const read = (counter: Counter, now: number): CounterState & { readonly oldest?: number } => {
    const entry = live(idOf(counter), now)
    if (!counter.rolling) {
      const used = entry?.value ?? 0
      const resetMs = (Math.floor(now / counter.windowMs) + 1) * counter.windowMs - now
      return { used, resetMs, retryMs: counter.amount > 0 && used + counter.amount > counter.limit ? resetMs : 0 }
    }
    const span = Math.floor(counter.windowMs / counter.bucketMs)
    const oldest = Math.floor(now / counter.bucketMs) - span + 1
    const leaves = (bucket: number) => (bucket + span) * counter.bucketMs - now
    // One pass over the window's buckets for what is used and the oldest; they are sorted only
    // when a refusal must say when enough of them leave.
    let used = 0
    let first = Number.POSITIVE_INFINITY
    if (entry?.buckets !== undefined) {
      for (const [bucket, value] of entry.buckets) {
        if (bucket < oldest) continue
        used += value
        if (bucket < first) first = bucket
      }
    }
    const resetMs = first === Number.POSITIVE_INFINITY ? 0 : leaves(first)
    const need = used + counter.amount - counter.limit
    let retryMs = 0
    if (counter.amount > 0 && need > 0) {
      const buckets = [...(entry?.buckets ?? [])].filter(([b]) => b >= oldest).sort(([a], [b]) => a - b)
      retryMs = counter.windowMs
      let freed = 0
      for (const [bucket, value] of buckets) {
        freed += value
        if (freed >= need) {
          retryMs = leaves(bucket)
          break
        }
      }
    }
    return { used, resetMs, retryMs }
  }
  const add = (counter: Counter, now: number, amount: number, bucket: number) => {
    const entry = live(idOf(counter), now)
    if (!counter.rolling) {
      const expiresAt = (Math.floor(now / counter.windowMs) + 1) * counter.windowMs
      entries.set(idOf(counter), { expiresAt, value: (entry?.value ?? 0) + amount })
      return
    }
    const buckets = entry?.buckets ?? new Map<number, number>()
    const oldest = Math.floor(now / counter.bucketMs) - Math.floor(counter.windowMs / counter.bucketMs) + 1
    for (const b of buckets.keys()) if (b < oldest) buckets.delete(b)
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + amount)
    entries.set(idOf(counter), { expiresAt: now + counter.windowMs, value: 0, buckets })
  }
  return StoreMemory.of({
    take: (now, counters, mode) => {
      sweep(now)
      const states = counters.map((counter) => read(counter, now))
      const admitted = mode === "unchecked" || states.every((state) => state.retryMs === 0)
      if (!admitted || mode === "dryRun") return { admitted, states }
      return {
        admitted,
        states: counters.map((counter, i) => {
          if (counter.amount > 0) add(counter, now, counter.amount, Math.floor(now / counter.bucketMs))
          const state = states[i]!
          return { ...state, used: state.used + counter.amount }
        })
      }
    },
    adjust: (adjustments, now) => {
      for (const { bucket, delta, field, key, rolling } of adjustments) {
        const entry = live(key + field, now)
        if (entry === undefined) continue
        if (!rolling) entry.value = Math.max(0, entry.value + delta)
        else if (entry.buckets?.has(bucket)) entry.buckets.set(bucket, Math.max(0, entry.buckets.get(bucket)! + delta))
      }
    }
  })
}

/**
 * The in-memory store, one per layer build, with its primitives as `StoreMemory`.
 *
 * @category layers
 */
export const layerStoreMemory: Layer.Layer<RateLimiterStore | StoreMemory> = Layer.syncContext(() => {
  const memory = makeStoreMemory()
  return Context.make(StoreMemory, memory).pipe(Context.add(
    RateLimiterStore,
    RateLimiterStore.of({
      take: (now, counters, mode) => Effect.sync(() => memory.take(now, counters, mode)),
      adjust: (adjustments) => Effect.map(Clock.currentTimeMillis, (now) => memory.adjust(adjustments, now))
    })
  ))
})

/**
 * The limiter over the in-memory store: one process, no Redis. The store stays in the output, so
 * `Admission.layerMemory` can take its counters in the same step as the other stores.
 *
 * @category layers
 */
export const layerMemory = (options: Options = {}): Layer.Layer<RateLimiter | RateLimiterStore | StoreMemory> =>
  layer(options).pipe(Layer.provideMerge(layerStoreMemory))
