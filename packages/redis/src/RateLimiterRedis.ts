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
 * the admissions per second (see `bench/ratelimit.ts`); a plain timer per call does the same job.
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

// ARGV: now, dryRun, then per counter: rolling, limit, amount, windowMs, bucketMs.
// Reply: admitted, then per counter: used, resetMs, retryMs.
const takeScript = script(`
local now = tonumber(ARGV[1])
local n = #KEYS
local out = { 1 }
local stale = {}
for i = 1, n do
  local a = 2 + (i - 1) * 5
  local limit = tonumber(ARGV[a + 2])
  local amount = tonumber(ARGV[a + 3])
  local window = tonumber(ARGV[a + 4])
  local used, reset, retry = 0, 0, 0
  if ARGV[a + 1] == "0" then
    used = tonumber(redis.call("GET", KEYS[i]) or "0")
    reset = window - now % window
    if amount > 0 and used + amount > limit then retry = reset end
  else
    local bucket = tonumber(ARGV[a + 5])
    local span = math.floor(window / bucket)
    local oldest = math.floor(now / bucket) - span + 1
    local flat = redis.call("HGETALL", KEYS[i])
    local live = {}
    local old = {}
    for j = 1, #flat, 2 do
      local b = tonumber(flat[j])
      if b >= oldest then
        local v = tonumber(flat[j + 1])
        used = used + v
        live[#live + 1] = { b, v }
      else
        old[#old + 1] = flat[j]
      end
    end
    stale[i] = old
    table.sort(live, function(x, y) return x[1] < y[1] end)
    if #live > 0 then reset = (live[1][1] + span) * bucket - now end
    local need = used + amount - limit
    if amount > 0 and need > 0 then
      retry = window
      local freed = 0
      for j = 1, #live do
        freed = freed + live[j][2]
        if freed >= need then
          retry = (live[j][1] + span) * bucket - now
          break
        end
      end
    end
  end
  if retry > 0 then out[1] = 0 end
  out[#out + 1] = used
  out[#out + 1] = reset
  out[#out + 1] = retry
end
if out[1] == 1 and ARGV[2] == "0" then
  for i = 1, n do
    local a = 2 + (i - 1) * 5
    local amount = tonumber(ARGV[a + 3])
    if amount > 0 then
      local j = 2 + (i - 1) * 3
      if ARGV[a + 1] == "0" then
        redis.call("SET", KEYS[i], out[j] + amount, "PX", out[j + 1])
      else
        local bucket = tonumber(ARGV[a + 5])
        redis.call("HINCRBY", KEYS[i], math.floor(now / bucket), amount)
        if #stale[i] > 0 then redis.call("HDEL", KEYS[i], unpack(stale[i])) end
        redis.call("PEXPIRE", KEYS[i], ARGV[a + 4])
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
    // One watchdog for every call in flight instead of a timer (or a racing fiber) per call.
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
    const run = (lua: Script, keys: ReadonlyArray<string>, args: ReadonlyArray<string>) =>
      Effect.callback<unknown, RateLimiter.RateLimiterStoreError>((resume) => {
        const call = {
          deadline: Date.now() + timeoutMs,
          expire: () => finish(Effect.fail(storeError(`Redis did not answer within ${timeoutMs} ms`)))
        }
        const finish = (result: Effect.Effect<unknown, RateLimiter.RateLimiterStoreError>) => {
          if (!inFlight.delete(call)) return
          resume(result)
        }
        inFlight.add(call)
        const send = (command: "EVALSHA" | "EVAL", body: string) =>
          client.sendCommand([command, body, String(keys.length), ...keys, ...args])
        send("EVALSHA", lua.sha)
          .catch((error: unknown) => String(error).includes("NOSCRIPT") ? send("EVAL", lua.source) : Promise.reject(error))
          .then((reply) => finish(Effect.succeed(reply)), (error: unknown) => finish(Effect.fail(storeError(error))))
      })
    return RateLimiter.RateLimiterStore.of({
      take: (now, counters, dryRun) => {
        const args = [String(now), dryRun ? "1" : "0"]
        for (const c of counters) {
          args.push(c.rolling ? "1" : "0", String(c.limit), String(c.amount), String(c.windowMs), String(c.bucketMs))
        }
        return run(takeScript, counters.map((c) => c.key), args).pipe(
          Effect.map((value) => {
            const reply = value as ReadonlyArray<number>
            return {
              admitted: reply[0] === 1,
              states: counters.map((_, i) => ({
                used: Number(reply[1 + i * 3]),
                resetMs: Number(reply[2 + i * 3]),
                retryMs: Number(reply[3 + i * 3])
              }))
            }
          })
        )
      },
      adjust: (adjustments) => {
        const args: Array<string> = []
        for (const a of adjustments) args.push(a.rolling ? "1" : "0", String(a.bucket), String(a.delta))
        return run(adjustScript, adjustments.map((a) => a.key), args).pipe(Effect.asVoid)
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
