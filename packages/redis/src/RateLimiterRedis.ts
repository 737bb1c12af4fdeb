/**
 * The Redis layer of `RateLimiter`: the counters of every limit in Redis, so every instance shares
 * them. One admission is one `EVALSHA` of one Lua script that checks every counter and keeps its
 * additions only when each has room: all or nothing, one round trip. A fixed window of a limit is
 * one hash naming its window (requests and tokens are two fields of it) that expires when the
 * window ends; a rolling window is a hash of buckets expiring a window after its last use. The keys
 * of one account share the hash tag `{accountId}`, so on a Redis Cluster one admission touches one
 * slot.
 *
 * The time is the caller's clock (Effect's `Clock`), passed into the script rather than read with
 * `TIME` in it: both layers then pass the same contract suite under `TestClock`, and the script
 * saves a command. Instances must keep their clocks in sync (NTP), as the windows are only as
 * aligned as the clocks; expiries are relative (`PEXPIRE` by the time left in the window), so a
 * skew between an instance and Redis never drops a live window.
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

// ARGV: now, dryRun, then one group per KEYS[i]. A fixed group (the counters of one limit's window,
// fields of one hash) is `m, ttlMs, field 1..m, limit 1..m, amount 1..m`; a rolling group is
// `0, windowMs, limit, amount, bucketMs`. Reply: admitted, then per fixed counter its use with this
// call's amount added (its use for a dry run), per rolling counter its use before this call, resetMs
// and retryMs; the reset and retry of a fixed window follow from its use, so the caller computes
// them.
//
// A fixed counter is added to first and checked after (HINCRBY answers the sum), and every addition
// is taken back when any counter refuses (a field the call created is deleted, so a refusal leaves
// no key behind): the script is atomic, so nobody sees the difference, and the admitted path (the
// common one) costs one HINCRBY per counter plus a PEXPIRE when the window is new. Amounts go to
// Redis as the strings they arrived as: a Lua number passed to `redis.call` is formatted with
// `sprintf`, which costs as much as the command.
const takeScript = script(`
local now = tonumber(ARGV[1])
local dry = ARGV[2] == "1"
local out = { 1 }
local o = 1
local a = 3
local stale
for i = 1, #KEYS do
  local key = KEYS[i]
  local m = tonumber(ARGV[a])
  if m > 0 then
    local p = a + 1
    if dry then
      local values = redis.call("HMGET", key, unpack(ARGV, p + 1, p + m))
      for f = 1, m do
        o = o + 1
        out[o] = tonumber(values[f]) or 0
      end
    else
      local fresh = false
      for f = 1, m do
        local amount = ARGV[p + 2 * m + f]
        local used
        if amount == "0" then
          used = tonumber(redis.call("HGET", key, ARGV[p + f])) or 0
        else
          used = redis.call("HINCRBY", key, ARGV[p + f], amount)
          if used == tonumber(amount) then fresh = true end
          if used > tonumber(ARGV[p + m + f]) then out[1] = 0 end
        end
        o = o + 1
        out[o] = used
      end
      if fresh then redis.call("PEXPIRE", key, ARGV[p]) end
    end
    a = p + 1 + 3 * m
  else
    stale = stale or {}
    local window = tonumber(ARGV[a + 1])
    local limit = tonumber(ARGV[a + 2])
    local amount = tonumber(ARGV[a + 3])
    local bucket = tonumber(ARGV[a + 4])
    local span = math.floor(window / bucket)
    local oldest = math.floor(now / bucket) - span + 1
    local flat = redis.call("HGETALL", key)
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
    out[o + 1] = used
    out[o + 2] = reset
    out[o + 3] = retry
    o = o + 3
    a = a + 5
  end
end
if dry or (out[1] == 1 and not stale) then return out end
local admitted = out[1] == 1
a = 3
o = 2
for i = 1, #KEYS do
  local key = KEYS[i]
  local m = tonumber(ARGV[a])
  if m > 0 then
    if not admitted then
      for f = 1, m do
        local amount = ARGV[a + 1 + 2 * m + f]
        if amount ~= "0" then
          if out[o] == tonumber(amount) then
            redis.call("HDEL", key, ARGV[a + 1 + f])
          else
            redis.call("HINCRBY", key, ARGV[a + 1 + f], "-" .. amount)
          end
        end
        o = o + 1
      end
    else
      o = o + m
    end
    a = a + 2 + 3 * m
  else
    local amount = ARGV[a + 3]
    if admitted and amount ~= "0" then
      local bucket = tonumber(ARGV[a + 4])
      redis.call("HINCRBY", key, math.floor(now / bucket), amount)
      if #stale[i] > 0 then redis.call("HDEL", key, unpack(stale[i])) end
      redis.call("PEXPIRE", key, ARGV[a + 1])
    end
    o = o + 3
    a = a + 5
  end
end
return out
`)

// ARGV per KEYS[i]: field (a fixed window's dimension, a rolling window's bucket), delta.
const adjustScript = script(`
for i = 1, #KEYS do
  local field = ARGV[2 * i - 1]
  if redis.call("HEXISTS", KEYS[i], field) == 1 then
    local next = redis.call("HINCRBY", KEYS[i], field, ARGV[2 * i])
    if next < 0 then redis.call("HSET", KEYS[i], field, 0) end
  end
end
return 1
`)

/**
 * Where a fixed counter lives: `RateLimiter.counterKey` names it `<limit>:<dimension>:<window>`;
 * the counters of one limit's window share the hash `<limit>:<window>`, one field per dimension, so
 * one key (and one expiry) serves both requests and tokens.
 */
const hashOf = (key: string): string => {
  const cut = key.lastIndexOf(":")
  return key.slice(0, cut - 2) + key.slice(cut)
}

const fieldOf = (key: string): string => key.charAt(key.lastIndexOf(":") - 1)

interface Call {
  readonly deadline: number
  readonly expire: () => void
}

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
    // `command` is `[_, _, numkeys, ...keys, ...args]`; the first two are filled in here.
    const run = <A>(lua: Script, command: Array<string>, decode: (reply: unknown) => A) =>
      Effect.callback<A, RateLimiter.RateLimiterStoreError>((resume) => {
        const finish = (result: Effect.Effect<A, RateLimiter.RateLimiterStoreError>) => {
          if (inFlight.delete(call)) resume(result)
        }
        const call: Call = { deadline: Date.now() + timeoutMs, expire: () => finish(Effect.fail(storeError(timedOut))) }
        inFlight.add(call)
        const failed = (error: unknown) => finish(Effect.fail(storeError(error)))
        const answered = (reply: unknown) => finish(Effect.succeed(decode(reply)))
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
        const n = counters.length
        const command = ["", "", ""]
        const args = [String(now), dryRun ? "1" : "0"]
        let groups = 0
        let i = 0
        while (i < n) {
          const counter = counters[i]!
          groups++
          if (counter.rolling) {
            command.push(counter.key)
            args.push("0", String(counter.windowMs), String(counter.limit), String(counter.amount), String(counter.bucketMs))
            i++
            continue
          }
          // Adjacent fixed counters of one window (a limit's requests and tokens) form one group.
          const hash = hashOf(counter.key)
          const next = i + 1 < n && !counters[i + 1]!.rolling ? counters[i + 1]! : undefined
          command.push(hash)
          if (next === undefined || hashOf(next.key) !== hash) {
            args.push("1", String(counter.windowMs - now % counter.windowMs), fieldOf(counter.key), String(counter.limit), String(counter.amount))
            i++
          } else {
            const ttl = Math.max(counter.windowMs - now % counter.windowMs, next.windowMs - now % next.windowMs)
            args.push(
              "2",
              String(ttl),
              fieldOf(counter.key),
              fieldOf(next.key),
              String(counter.limit),
              String(next.limit),
              String(counter.amount),
              String(next.amount)
            )
            i += 2
          }
        }
        command[2] = String(groups)
        for (const arg of args) command.push(arg)
        return run(takeScript, command, (value) => {
          const reply = value as ReadonlyArray<number>
          const admitted = reply[0] === 1
          const states: Array<RateLimiter.CounterState> = new Array(n)
          let r = 1
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
          return { admitted, states }
        })
      },
      adjust: (adjustments) => {
        const command = ["", "", String(adjustments.length)]
        const args: Array<string> = []
        for (const a of adjustments) {
          if (a.rolling) {
            command.push(a.key)
            args.push(String(a.bucket), String(a.delta))
          } else {
            command.push(hashOf(a.key))
            args.push(fieldOf(a.key), String(a.delta))
          }
        }
        for (const arg of args) command.push(arg)
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
