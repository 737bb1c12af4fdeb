/**
 * The Redis layer of `RateLimiter`: the counters of every limit in Redis, so every instance shares
 * them. An admission is one take in one call of one Lua script that checks every counter and keeps
 * the take's additions only when each has room: all or nothing, one round trip.
 *
 * **Details**
 *
 * The takes that start in one turn of the event loop share one call (`StoreOptions.batch`), each
 * still all or nothing: under load, the per-command costs of node-redis and Redis are paid once per
 * turn instead of once per admission. A fixed window of a limit is one hash naming its window
 * (requests and tokens are two fields of it) that expires when the window ends; a rolling window is
 * a hash of buckets expiring a window after its newest bucket's first use, when every bucket in it
 * has left the window. The keys of one account share the hash tag `{accountId}`, so on a Redis
 * Cluster (with `batch: false`) one admission touches one slot.
 *
 * The time is the caller's clock (Effect's `Clock`), passed into the script rather than read with
 * `TIME` in it: both layers then pass the same contract suite under `TestClock`, and the script
 * saves a command. Instances must keep their clocks in sync (NTP), as the windows are only as
 * aligned as the clocks; expiries are relative (`PEXPIRE` by the time left in the window), so a
 * skew between an instance and Redis never drops a live window.
 *
 * The scripts run as Redis Functions (`FCALL`), or as `EVALSHA` where Redis refuses them, straight
 * on the client of `RedisConnection` (the client behind `effect/persistence`'s `Redis` service),
 * reloading a library or a script Redis lost (`Scripts`), so the limiter recovers by itself. Going
 * around `Redis.eval` and `Effect.timeout` is a measured choice: the script cache lookup and the
 * fiber race of a timeout per admission halved the admissions per second (see
 * `bench/ratelimit.ts`); one watchdog timer for every call in flight does the same job.
 *
 * @since 0.1.0
 */
import { RateLimiter } from "@tollgate/core"
import { Effect, Layer } from "effect"
import * as Lua from "./Lua.ts"
import type { RedisConnection } from "./RedisConnection.ts"
import * as Scripts from "./Scripts.ts"

/**
 * What an unchecked take adds to its number of groups, so that the one argument says the mode (a
 * take has far fewer groups than this).
 *
 * @category internals
 */
export const UNCHECKED = 65_536

// One call carries one or more takes (see `StoreOptions.batch`), each all or nothing on its own.
// ARGV: per take the number of its groups (negative for a dry run, `UNCHECKED` more for an
// unchecked take), then its groups, one per KEYS entry in order. A fixed group (the counters of
// one limit's window, fields of one hash) is `fields, ttlMs, limit 1..m, amount 1..m`, where
// `fields` names the m fields one letter each (`rt`: requests and tokens); a rolling group is
// `"", now, windowMs, limit, amount, bucketMs`.
// Reply, per take: admitted, then per fixed counter its use with this take's amount added (its use
// for a dry run), per rolling counter its use before this take, resetMs and retryMs; the reset and
// retry of a fixed window follow from its use, so the caller computes them. Every argument costs
// a parse in Redis and a string in Lua, hence the terse layout.
//
// A fixed counter is added to first and checked after (HINCRBY answers the sum), and every addition
// of a take is taken back when any of its counters refuses (a field the take created is deleted, so
// a refusal leaves no key behind): the script is atomic, so nobody sees the difference, and the
// admitted path (the common one) costs one HINCRBY per counter plus a PEXPIRE when the window (of
// a rolling window, its newest bucket) is new. A take sees the takes before it in the same call, as
// if they had been separate calls. An unchecked take skips the checks, so it is always admitted.
// Amounts go to Redis as the strings they arrived as: a Lua number passed to `redis.call` is
// formatted with `sprintf`, which costs as much as the command. Arguments and counts are read as
// numbers by arithmetic (`x + 0`), which parses a string once where `tonumber` parses it twice.
export const takeLibrary = `${Lua.locals({ UNCHECKED })}${Lua.read("take")}`

const takeScript = Scripts.make("take", takeLibrary, "takeAll(keys, args, 0, 1, #args)")

// ARGV per KEYS[i]: field (a fixed window's dimension, a rolling window's bucket), delta.
export const adjustLibrary = Lua.read("adjust")

const adjustScript = Scripts.make("adjust", `${adjustLibrary}${Lua.read("adjust-script")}`, "adjust(keys, args)")

type Taken = Effect.Success<ReturnType<RateLimiter.RateLimiterStore["Service"]["take"]>>

/**
 * One take of counters, as `takeAll` reads it.
 *
 * @category internals
 */
export interface TakeInput {
  readonly now: number
  readonly counters: ReadonlyArray<RateLimiter.Counter>
  readonly mode: RateLimiter.TakeMode
}

interface Take extends TakeInput {
  readonly resume: (result: Effect.Effect<Taken, RateLimiter.RateLimiterStoreError>) => void
}

const storeError = (cause: unknown) => new RateLimiter.RateLimiterStoreError({ cause })

/** @category options */
export interface StoreOptions {
  /** How long Redis may take to answer before the call counts as a store failure. Default 1000. */
  readonly timeoutMs?: number
  /**
   * Whether the admissions that start in one turn of the event loop go to Redis in one script call
   * (each still all or nothing, in the order they started). Default `true`. The keys of one call
   * then span accounts: on a Redis Cluster, or behind a proxy that routes a script by its keys, set
   * it to `false` for one call per admission.
   */
  readonly batch?: boolean
}

// A bound on the work of one script call: Redis serves nobody else while a script runs.
const maxBatch = 256

/**
 * Appends a take's keys and arguments (see `takeLibrary`) to those of its call.
 *
 * @category internals
 */
export const encode = (take: TakeInput, keys: Array<string>, args: Array<string>) => {
  const { counters, now } = take
  const n = counters.length
  const at = args.length
  args.push("")
  let groups = 0
  let i = 0
  while (i < n) {
    const counter = counters[i]!
    groups++
    keys.push(counter.key)
    if (counter.rolling) {
      args.push("", String(now), String(counter.windowMs), String(counter.limit), String(counter.amount), String(counter.bucketMs))
      i++
      continue
    }
    // Adjacent fixed counters of one window (a limit's requests and tokens) form one group.
    const next = i + 1 < n ? counters[i + 1]! : undefined
    if (next === undefined || next.rolling || next.key !== counter.key) {
      args.push(counter.field, String(counter.windowMs - now % counter.windowMs), String(counter.limit), String(counter.amount))
      i++
    } else {
      const ttl = Math.max(counter.windowMs - now % counter.windowMs, next.windowMs - now % next.windowMs)
      args.push(
        counter.field === "r" && next.field === "t" ? "rt" : counter.field + next.field,
        String(ttl),
        String(counter.limit),
        String(next.limit),
        String(counter.amount),
        String(next.amount)
      )
      i += 2
    }
  }
  args[at] = String(take.mode === "dryRun" ? -groups : take.mode === "unchecked" ? UNCHECKED + groups : groups)
}

/**
 * Reads a take's answer from `reply` at `r` into `states`; returns whether it was admitted.
 *
 * @category internals
 */
export const decode = (
  take: TakeInput,
  reply: ReadonlyArray<number>,
  r: number,
  states: Array<RateLimiter.CounterState>
): boolean => {
  const { counters, now } = take
  const n = counters.length
  const admitted = reply[r++] === 1
  for (let c = 0; c < n; c++) {
    const counter = counters[c]!
    if (counter.rolling) {
      const used = reply[r]! + (admitted ? counter.amount : 0)
      states[c] = { used, resetMs: reply[r + 1]!, retryMs: reply[r + 2]! }
      r += 3
    } else {
      const resetMs = counter.windowMs - now % counter.windowMs
      const sum = reply[r]!
      const retryMs = counter.amount > 0 && sum > counter.limit ? resetMs : 0
      states[c] = { used: admitted ? sum : sum - counter.amount, resetMs, retryMs }
      r += 1
    }
  }
  return admitted
}

/**
 * How many reply entries a take's answer spans.
 *
 * @category internals
 */
export const replyLength = (take: TakeInput): number => {
  let length = 1
  for (const counter of take.counters) length += counter.rolling ? 3 : 1
  return length
}

/**
 * The store over a node-redis client.
 *
 * @category constructors
 */
export const makeStore = (options: StoreOptions = {}) =>
  Effect.gen(function*() {
    const send = yield* Scripts.sender(options.timeoutMs ?? 1000, [takeScript, adjustScript])
    const sendTakes = (takes: ReadonlyArray<Take>) => {
      const keys: Array<string> = []
      const args: Array<string> = []
      for (const take of takes) encode(take, keys, args)
      const command = ["", "", String(keys.length)]
      for (const key of keys) command.push(key)
      for (const arg of args) command.push(arg)
      // A take already answered is not answered again when a later one fails to decode.
      let answered = 0
      send(takeScript, command, (value) => {
        const reply = value as ReadonlyArray<number>
        let r = 0
        for (; answered < takes.length; answered++) {
          const take = takes[answered]!
          const states: Array<RateLimiter.CounterState> = new Array(take.counters.length)
          const admitted = decode(take, reply, r, states)
          r += replyLength(take)
          take.resume(Effect.succeed({ admitted, states }))
        }
      }, (cause) => {
        const error = Effect.fail(storeError(cause))
        for (; answered < takes.length; answered++) takes[answered]!.resume(error)
      })
    }
    const batch = options.batch ?? true
    // The takes waiting for the end of this turn of the event loop (the check phase, where node-redis
    // writes its commands too), so that every admission started in the turn shares one call.
    let queue: Array<Take> = []
    const flush = () => {
      const takes = queue
      queue = []
      if (takes.length <= maxBatch) return sendTakes(takes)
      for (let i = 0; i < takes.length; i += maxBatch) sendTakes(takes.slice(i, i + maxBatch))
    }
    return RateLimiter.RateLimiterStore.of({
      take: (now, counters, mode) =>
        Effect.callback<Taken, RateLimiter.RateLimiterStoreError>((resume) => {
          const take: Take = { now, counters, mode, resume }
          if (!batch) return sendTakes([take])
          if (queue.push(take) === 1) setImmediate(flush)
        }),
      adjust: (adjustments) => {
        const command = ["", "", String(adjustments.length)]
        const args: Array<string> = []
        for (const a of adjustments) {
          command.push(a.key)
          args.push(a.rolling ? String(a.bucket) : a.field, String(a.delta))
        }
        for (const arg of args) command.push(arg)
        return Effect.callback<void, RateLimiter.RateLimiterStoreError>((resume) =>
          send(adjustScript, command, () => resume(Effect.void), (cause) => resume(Effect.fail(storeError(cause))))
        )
      }
    })
  })

/**
 * The counters in Redis.
 *
 * @category layers
 */
export const layerStoreRedis = (options: StoreOptions = {}): Layer.Layer<RateLimiter.RateLimiterStore, never, RedisConnection> =>
  Layer.effect(RateLimiter.RateLimiterStore, makeStore(options))

/**
 * The limiter over Redis, with its failure policy (default `fail-closed`: 503 while Redis cannot
 * be reached) and the time Redis may take to answer (default 1 second).
 *
 * @category layers
 */
export const layerRedis = (
  options: RateLimiter.Options & StoreOptions = {}
): Layer.Layer<RateLimiter.RateLimiter, never, RedisConnection> => RateLimiter.layer(options).pipe(Layer.provide(layerStoreRedis(options)))
