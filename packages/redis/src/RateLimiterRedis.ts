/**
 * The Redis layer of `RateLimiter`: the counters of every limit in Redis, so every instance shares
 * them. One admission is one `EVALSHA` of one Lua script that reads every counter, and only when
 * each has room adds to all of them: all or nothing, one round trip. A fixed window is a string
 * key naming its window and expiring when it ends; a rolling window is a hash of buckets expiring a
 * window after its last use. The keys of one account share the hash tag `{accountId}`, so on a
 * Redis Cluster one admission touches one slot.
 *
 * The time is the caller's clock (Effect's `Clock`), passed into the script, so both layers pass
 * the same contract suite under `TestClock`; instances must keep their clocks in sync (NTP), as
 * the windows are only as aligned as the clocks.
 *
 * The scripts run as `EVALSHA` straight on the node-redis client of `NodeRedis` (the client behind
 * `effect/persistence`'s `Redis` service), falling back to `EVAL` after a `NOSCRIPT` (a restarted
 * Redis), so the limiter recovers by itself. Going around `Redis.eval` and `Effect.timeout` is a
 * measured choice: the script cache lookup and the fiber race of a timeout per admission halved
 * the admissions per second (see `bench/ratelimit.ts`); one watchdog timer for every call in
 * flight does the same job.
 *
 * @since 0.1.0
 */
import { NodeRedis } from "@effect/platform-node"
import { RateLimiter } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { createHash } from "node:crypto"

interface Script {
  readonly source: string
  readonly sha: string
}

const script = (source: string): Script => ({ source, sha: createHash("sha1").update(source).digest("hex") })

// ARGV: now, dryRun, then per counter i (from ARGV[5i - 2]): rolling, limit, amount, windowMs,
// bucketMs. Reply: admitted, then per counter i (from index 3i - 1): used, resetMs, retryMs.
// A fixed counter costs one GET and, when admitted, one SET with its expiry.
const takeScript = script(`
local now = tonumber(ARGV[1])
local n = #KEYS
local out = { 1 }
local amounts = {}
local stale = {}
for i = 1, n do
  local k = 5 * i
  local j = 3 * i - 1
  local amount = tonumber(ARGV[k])
  local limit = tonumber(ARGV[k - 1])
  local window = tonumber(ARGV[k + 1])
  amounts[i] = amount
  if ARGV[k - 2] == "0" then
    local used = tonumber(redis.call("GET", KEYS[i]) or 0)
    local reset = window - now % window
    out[j] = used
    out[j + 1] = reset
    if amount > 0 and used + amount > limit then
      out[j + 2] = reset
      out[1] = 0
    else
      out[j + 2] = 0
    end
  else
    local bucket = tonumber(ARGV[k + 2])
    local span = math.floor(window / bucket)
    local oldest = math.floor(now / bucket) - span + 1
    local flat = redis.call("HGETALL", KEYS[i])
    local live = {}
    local old = {}
    local used = 0
    for f = 1, #flat, 2 do
      local b = tonumber(flat[f])
      if b >= oldest then
        local v = tonumber(flat[f + 1])
        used = used + v
        live[#live + 1] = { b, v }
      else
        old[#old + 1] = flat[f]
      end
    end
    stale[i] = old
    table.sort(live, function(x, y) return x[1] < y[1] end)
    local reset, retry = 0, 0
    if #live > 0 then reset = (live[1][1] + span) * bucket - now end
    local need = used + amount - limit
    if amount > 0 and need > 0 then
      retry = window
      local freed = 0
      for f = 1, #live do
        freed = freed + live[f][2]
        if freed >= need then
          retry = (live[f][1] + span) * bucket - now
          break
        end
      end
      out[1] = 0
    end
    out[j] = used
    out[j + 1] = reset
    out[j + 2] = retry
  end
end
if out[1] == 1 and ARGV[2] == "0" then
  for i = 1, n do
    local amount = amounts[i]
    if amount > 0 then
      local j = 3 * i - 1
      if ARGV[5 * i - 2] == "0" then
        redis.call("SET", KEYS[i], out[j] + amount, "PX", out[j + 1])
      else
        local bucket = tonumber(ARGV[5 * i + 2])
        redis.call("HINCRBY", KEYS[i], math.floor(now / bucket), amount)
        if #stale[i] > 0 then redis.call("HDEL", KEYS[i], unpack(stale[i])) end
        redis.call("PEXPIRE", KEYS[i], ARGV[5 * i + 1])
      end
      out[j] = out[j] + amount
    end
  end
end
return out
`)

const adjustScript = script(`
for i = 1, #KEYS do
  local a = (i - 1) * 3
  local field = ARGV[a + 2]
  local delta = tonumber(ARGV[a + 3])
  if ARGV[a + 1] == "1" then
    local v = redis.call("HGET", KEYS[i], field)
    if v then redis.call("HSET", KEYS[i], field, math.max(0, tonumber(v) + delta)) end
  elseif redis.call("EXISTS", KEYS[i]) == 1 then
    local next = redis.call("INCRBY", KEYS[i], delta)
    if next < 0 then redis.call("INCRBY", KEYS[i], -next) end
  end
end
return 1
`)

const storeError = (cause: unknown) => new RateLimiter.RateLimiterStoreError({ cause })

/** @category options */
export interface StoreOptions {
  /** How long Redis may take to answer before the call counts as a store failure. Default 1000. */
  readonly timeoutMs?: number
}

/**
 * The store over a node-redis client.
 *
 * @category constructors
 */
export const makeStore = (options: StoreOptions = {}) =>
  Effect.gen(function*() {
    const { client } = yield* NodeRedis.NodeRedis
    const timeoutMs = options.timeoutMs ?? 1000
    // One watchdog for every call in flight instead of a timer (or a racing fiber) per call. It
    // reads the wall clock, not Effect's: a timeout is about real waiting, also under TestClock.
    const inFlight = new Set<{ readonly deadline: number; readonly expire: () => void }>()
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        setInterval(() => {
          const now = Date.now()
          for (const call of inFlight) if (call.deadline <= now) call.expire()
        }, Math.max(10, Math.min(250, Math.floor(timeoutMs / 4)))).unref()
      ),
      (timer) => Effect.sync(() => clearInterval(timer))
    )
    // `command` is `[_, _, numkeys, ...keys, ...args]`; the first two are filled in here.
    const run = <A>(lua: Script, command: Array<string>, decode: (reply: unknown) => A) =>
      Effect.callback<A, RateLimiter.RateLimiterStoreError>((resume) => {
        const call = {
          deadline: Date.now() + timeoutMs,
          expire: () => finish(Effect.fail(storeError(`Redis did not answer within ${timeoutMs} ms`)))
        }
        const finish = (result: Effect.Effect<A, RateLimiter.RateLimiterStoreError>) => {
          if (inFlight.delete(call)) resume(result)
        }
        const failed = (error: unknown) => finish(Effect.fail(storeError(error)))
        const answered = (reply: unknown) => finish(Effect.succeed(decode(reply)))
        inFlight.add(call)
        command[0] = "EVALSHA"
        command[1] = lua.sha
        client.sendCommand(command).then(answered, (error: unknown) => {
          if (!String(error).includes("NOSCRIPT")) return failed(error)
          command[0] = "EVAL"
          command[1] = lua.source
          client.sendCommand(command).then(answered, failed)
        })
      })
    return RateLimiter.RateLimiterStore.of({
      take: (now, counters, dryRun) => {
        const command = ["", "", String(counters.length)]
        for (const c of counters) command.push(c.key)
        command.push(String(now), dryRun ? "1" : "0")
        for (const c of counters) {
          command.push(c.rolling ? "1" : "0", String(c.limit), String(c.amount), String(c.windowMs), String(c.bucketMs))
        }
        return run(takeScript, command, (value) => {
          const reply = value as ReadonlyArray<number>
          const states: Array<RateLimiter.CounterState> = []
          for (let i = 0; i < counters.length; i++) {
            states.push({ used: reply[1 + i * 3]!, resetMs: reply[2 + i * 3]!, retryMs: reply[3 + i * 3]! })
          }
          return { admitted: reply[0] === 1, states }
        })
      },
      adjust: (adjustments) => {
        const command = ["", "", String(adjustments.length)]
        for (const a of adjustments) command.push(a.key)
        for (const a of adjustments) command.push(a.rolling ? "1" : "0", String(a.bucket), String(a.delta))
        return run(adjustScript, command, () => undefined)
      }
    })
  })

/**
 * The counters in Redis.
 *
 * @category layers
 */
export const layerStoreRedis = (options: StoreOptions = {}): Layer.Layer<RateLimiter.RateLimiterStore, never, NodeRedis.NodeRedis> =>
  Layer.effect(RateLimiter.RateLimiterStore, makeStore(options))

/**
 * The limiter over Redis, with its failure policy (default `fail-closed`: 503 while Redis cannot
 * be reached) and the time Redis may take to answer (default 1 second).
 *
 * @category layers
 */
export const layerRedis = (
  options: RateLimiter.Options & StoreOptions = {}
): Layer.Layer<RateLimiter.RateLimiter, never, NodeRedis.NodeRedis> =>
  RateLimiter.layer(options).pipe(Layer.provide(layerStoreRedis(options)))
