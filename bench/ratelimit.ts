/**
 * Rate-limit admissions per second, each checking a request limit AND a token limit: tollgate's
 * RateLimiter (memory; Redis, one Lua round trip, all or nothing) against rate-limiter-flexible
 * (RateLimiterMemory; RateLimiterRedis on the same Redis through the same node-redis package),
 * which needs one limiter per dimension, so two consumes per admission (sent in parallel, and
 * not all or nothing). A requests-only row of rate-limiter-flexible is shown for reference, and
 * every row shows this process's CPU time and Redis's script time per admission.
 * Target: tollgate Redis >= 1.0x rate-limiter-flexible Redis.
 */
import { NodeRedis } from "@effect/platform-node"
import { RateLimiter } from "@tollgate/core"
import { RateLimiterRedis } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { RateLimiterMemory, RateLimiterRedis as FlexibleRedis } from "rate-limiter-flexible"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { createClient } from "redis"
import { table } from "./Harness.ts"

const OPS = Number(process.env["RATELIMIT_OPS"] ?? 40_000)
const CONCURRENCY = 64
const KEYS = 256
const TOKENS = 100

const server = await RedisServer.start()
const client = createClient({ url: server.url })
await client.connect()

const limits = (i: number): ReadonlyArray<RateLimiter.Limit> => [{
  type: "user",
  key: `bench:${i % KEYS}`,
  hashTag: `acct_${i % KEYS}`,
  requests: { limit: 1_000_000_000, windowMs: 60_000 },
  tokens: { limit: 1_000_000_000_000, windowMs: 60_000, reserve: TOKENS }
}]

const tollgate = async (layer: Layer.Layer<RateLimiter.RateLimiter>) => {
  const runtime = ManagedRuntime.make(layer)
  const limiter = await runtime.runPromise(Effect.service(RateLimiter.RateLimiter))
  // CONCURRENCY workers, each admitting one call after the other, like the promise pool below.
  const batch = (n: number) => {
    let next = 0
    const worker: Effect.Effect<void, unknown> = Effect.suspend(() =>
      next < n ? Effect.flatMap(limiter.admit(limits(next++)), () => worker) : Effect.void
    )
    return runtime.runPromise(Effect.forEach(Array.from({ length: CONCURRENCY }), () => worker, {
      concurrency: CONCURRENCY,
      discard: true
    }))
  }
  return { batch, dispose: () => runtime.dispose() }
}

const pool = async (n: number, op: (i: number) => Promise<unknown>) => {
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < n) await op(next++)
  }))
}

const flexible = (make: (points: number, keyPrefix: string) => { consume: (key: string, points: number) => Promise<unknown> }, tokens: boolean) => {
  const requests = make(1_000_000_000, "rlf-req")
  const tokenLimiter = make(1_000_000_000_000, "rlf-tok")
  return {
    batch: (n: number) =>
      pool(n, (i) => {
        const key = `bench:${i % KEYS}`
        return tokens ? Promise.all([requests.consume(key, 1), tokenLimiter.consume(key, TOKENS)]) : requests.consume(key, 1)
      }),
    dispose: () => Promise.resolve()
  }
}

// The machine is shared and noisy: every subject runs ROUNDS times, interleaved with the others,
// and its median counts.
const ROUNDS = Number(process.env["RATELIMIT_ROUNDS"] ?? 5)

type Subject = { readonly batch: (n: number) => Promise<unknown>; readonly dispose: () => Promise<void> }

// Redis CPU spent in scripts so far, in microseconds (INFO commandstats). With this process's own
// CPU time per admission, it shows what each admission costs, which a busy machine blurs less than
// the admissions per second. Both limiters only send scripts; the commands a script calls are
// counted in its own time and again under their names, so only EVAL and EVALSHA are summed.
const redisMicros = async () => {
  const info = await client.sendCommand(["INFO", "commandstats"])
  let total = 0
  for (const match of String(info).matchAll(/cmdstat_(?:eval|evalsha):calls=\d+,usec=(\d+),/g)) total += Number(match[1])
  return total
}

// Each batch starts from a collected heap, so no subject pays for the garbage the one before it left.
V8.setFlagsFromString("--expose-gc")
const collect = Vm.runInNewContext("gc") as () => void

interface Measured {
  readonly perSecond: number
  readonly redisMicrosPerAdmission: number
  readonly nodeMicrosPerAdmission: number
}

const measureAll = async <K extends string>(subjects: Record<K, Subject>): Promise<Record<K, Measured>> => {
  const names = Object.keys(subjects) as Array<K>
  const samples = new Map<K, Array<number>>(names.map((name) => [name, []]))
  const micros = new Map<K, number>(names.map((name) => [name, 0]))
  const nodeMicros = new Map<K, number>(names.map((name) => [name, 0]))
  for (const name of names) await subjects[name].batch(OPS)
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) {
      collect()
      const before = await redisMicros()
      const cpu = process.cpuUsage()
      const start = performance.now()
      await subjects[name].batch(OPS)
      samples.get(name)!.push(OPS / ((performance.now() - start) / 1000))
      const spent = process.cpuUsage(cpu)
      nodeMicros.set(name, nodeMicros.get(name)! + spent.user + spent.system)
      micros.set(name, micros.get(name)! + (await redisMicros()) - before)
    }
  }
  for (const name of names) await subjects[name].dispose()
  return Object.fromEntries(names.map((name) => {
    const sorted = samples.get(name)!.sort((a, b) => a - b)
    return [name, {
      perSecond: sorted[Math.floor(sorted.length / 2)]!,
      redisMicrosPerAdmission: micros.get(name)! / (OPS * ROUNDS),
      nodeMicrosPerAdmission: nodeMicros.get(name)! / (OPS * ROUNDS)
    }]
  })) as Record<K, Measured>
}

const redisLayer = NodeRedis.layer({ url: server.url })
const flexibleRedis = (points: number, keyPrefix: string) =>
  new FlexibleRedis({ storeClient: client, useRedisPackage: true, points, duration: 60, keyPrefix })
const results = await measureAll({
  flexibleMemory: flexible((points, keyPrefix) => new RateLimiterMemory({ points, duration: 60, keyPrefix }), true),
  tollgateMemory: await tollgate(RateLimiter.layerMemory()),
  flexibleRedis: flexible(flexibleRedis, true),
  flexibleRedisRequestsOnly: flexible(flexibleRedis, false),
  tollgateRedis: await tollgate(RateLimiterRedis.layerRedis().pipe(Layer.provide(redisLayer), Layer.orDie))
})

await client.close()
await server.stop()

const row = (name: string, checks: string, measured: Measured, baseline: Measured | undefined, redis: boolean) => ({
  limiter: name,
  checks,
  "admissions/s": Math.round(measured.perSecond),
  ratio: baseline === undefined ? "-" : (measured.perSecond / baseline.perSecond).toFixed(2),
  "node CPU µs/admission": measured.nodeMicrosPerAdmission.toFixed(2),
  "Redis µs/admission": redis ? measured.redisMicrosPerAdmission.toFixed(2) : "-"
})
table([
  row("rate-limiter-flexible RateLimiterMemory (baseline)", "requests + tokens", results.flexibleMemory, undefined, false),
  row("tollgate memory", "requests + tokens", results.tollgateMemory, results.flexibleMemory, false),
  row("rate-limiter-flexible RateLimiterRedis (baseline)", "requests + tokens", results.flexibleRedis, undefined, true),
  row("rate-limiter-flexible RateLimiterRedis", "requests only", results.flexibleRedisRequestsOnly, results.flexibleRedis, true),
  row("tollgate Redis", "requests + tokens", results.tollgateRedis, results.flexibleRedis, true)
])
console.log(
  `\ntollgate Redis / rate-limiter-flexible Redis (requests + tokens) = ${(results.tollgateRedis.perSecond / results.flexibleRedis.perSecond).toFixed(2)}x (target >= 1.00x)`
)
process.exit(0)
