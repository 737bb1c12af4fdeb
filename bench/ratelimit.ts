/**
 * Rate-limit admissions per second, each checking a request limit AND a token limit: tollgate's
 * RateLimiter (memory; Redis, one Lua round trip, all or nothing) against rate-limiter-flexible
 * (RateLimiterMemory; RateLimiterRedis on the same Redis through the same node-redis package),
 * which needs one limiter per dimension, so two consumes per admission (sent in parallel, and
 * not all or nothing). A requests-only row of rate-limiter-flexible is shown for reference.
 * Target: tollgate Redis >= 1.0x rate-limiter-flexible Redis.
 */
import { NodeRedis } from "@effect/platform-node"
import { RateLimiter } from "@tollgate/core"
import { RateLimiterRedis } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { RateLimiterMemory, RateLimiterRedis as FlexibleRedis } from "rate-limiter-flexible"
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

const measureAll = async <K extends string>(subjects: Record<K, Subject>): Promise<Record<K, number>> => {
  const names = Object.keys(subjects) as Array<K>
  const samples = new Map<K, Array<number>>(names.map((name) => [name, []]))
  for (const name of names) await subjects[name].batch(OPS)
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) {
      const start = performance.now()
      await subjects[name].batch(OPS)
      samples.get(name)!.push(OPS / ((performance.now() - start) / 1000))
    }
  }
  for (const name of names) await subjects[name].dispose()
  return Object.fromEntries(names.map((name) => {
    const sorted = samples.get(name)!.sort((a, b) => a - b)
    return [name, sorted[Math.floor(sorted.length / 2)]!]
  })) as Record<K, number>
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

const row = (name: string, checks: string, perSecond: number, baseline: number | undefined) => ({
  limiter: name,
  checks,
  "admissions/s": Math.round(perSecond),
  ratio: baseline === undefined ? "-" : (perSecond / baseline).toFixed(2)
})
table([
  row("rate-limiter-flexible RateLimiterMemory (baseline)", "requests + tokens", results.flexibleMemory, undefined),
  row("tollgate memory", "requests + tokens", results.tollgateMemory, results.flexibleMemory),
  row("rate-limiter-flexible RateLimiterRedis (baseline)", "requests + tokens", results.flexibleRedis, undefined),
  row("rate-limiter-flexible RateLimiterRedis", "requests only", results.flexibleRedisRequestsOnly, results.flexibleRedis),
  row("tollgate Redis", "requests + tokens", results.tollgateRedis, results.flexibleRedis)
])
console.log(
  `\ntollgate Redis / rate-limiter-flexible Redis (requests + tokens) = ${(results.tollgateRedis / results.flexibleRedis).toFixed(2)}x (target >= 1.00x)`
)
process.exit(0)
