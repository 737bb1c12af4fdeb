import { Errors, RateLimiter } from "@tollgate/core"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime, Metric } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { createClient } from "redis"
import { afterAll, describe, expect, it } from "vitest"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

// Its own server, never a shared REDIS_URL: the tests count its script calls and kill it.
const redis = await RedisServer.start()
afterAll(() => redis.stop())
const url = redis.url

const worker = Path.join(Path.dirname(new URL(import.meta.url).pathname), "fixtures", "admit-worker.ts")

const spawnWorker = (key: string, attempts: number) => {
  const child = ChildProcess.spawn(process.execPath, [worker, url, key, String(attempts)], { stdio: ["pipe", "pipe", "inherit"] })
  const lines = Readline.createInterface({ input: child.stdout })
  const messages: Array<Record<string, number | boolean>> = []
  const waiters: Array<() => void> = []
  lines.on("line", (line) => {
    messages.push(JSON.parse(line))
    waiters.splice(0).forEach((wake) => wake())
  })
  const next = async (index: number) => {
    while (messages.length <= index) await new Promise<void>((resolve) => waiters.push(resolve))
    return messages[index]!
  }
  return { child, next }
}

describe("Two server processes on one Redis share every limit", () => {
  it("500 concurrent admissions against a limit of 100 from two processes admit exactly 100", async () => {
    const key = `shared-${Date.now()}`
    const workers = [spawnWorker(key, 250), spawnWorker(key, 250)]
    await Promise.all(workers.map((w) => w.next(0)))
    workers.forEach((w) => w.child.stdin!.write("go\n"))
    const results = await Promise.all(workers.map((w) => w.next(1)))
    expect(results.map((r) => Number(r["admitted"]) + Number(r["rejected"]))).toEqual([250, 250])
    expect(results.reduce((sum, r) => sum + Number(r["admitted"]), 0)).toBe(100)
  }, 60_000)
})

// A ten-year window: a burst cannot straddle a window boundary under the real clock.
const DECADE = 10 * 365 * 86_400_000

describe("Admissions that start together share one script call, each still all or nothing", () => {
  it("40 concurrent admissions against a limit of 5 admit exactly 5, in order, with exact headers; the refused consume nothing", async () => {
    const runtime = ManagedRuntime.make(RateLimiterRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url }))))
    const stats = createClient({ url })
    await stats.connect()
    // Script calls, whichever way they run (Functions, or EVALSHA).
    const evalCalls = async () => {
      const text = String(await stats.sendCommand(["INFO", "commandstats"]))
      return [...text.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0)
    }
    try {
      const key = `batch-${Date.now()}`
      const wide: RateLimiter.Limit = {
        type: "api_key",
        key: `${key}:wide`,
        hashTag: key,
        requests: { limit: 1_000, windowMs: DECADE },
        tokens: { limit: 1_000_000, windowMs: DECADE, reserve: 10 }
      }
      const narrow: RateLimiter.Limit = { type: "user", key: `${key}:narrow`, hashTag: key, requests: { limit: 5, windowMs: DECADE } }
      const limiter = await runtime.runPromise(Effect.service(RateLimiter.RateLimiter))
      await runtime.runPromise(limiter.inspect([wide, narrow]))
      const before = await evalCalls()
      const results = await runtime.runPromise(Effect.all(
        Array.from(
          { length: 40 },
          (_, i) => i % 4 === 3 ? Effect.result(limiter.inspect([wide])) : Effect.result(limiter.admit([wide, narrow]))
        ),
        { concurrency: "unbounded" }
      ))
      expect(await evalCalls()).toBe(before + 1)
      const admitted = results.flatMap((r) => r._tag === "Success" && "headers" in r.success ? [r.success.headers] : [])
      expect(admitted.map((h) => h["x-ratelimit-remaining-requests"])).toEqual(["4", "3", "2", "1", "0"])
      expect(admitted.map((h) => h["x-ratelimit-remaining-tokens"])).toEqual(["999990", "999980", "999970", "999960", "999950"])
      expect(admitted.every((h) => h["x-ratelimit-type"] === "user")).toBe(true)
      const refused = results.filter((r) => r._tag === "Failure")
      expect(refused).toHaveLength(25)
      expect(refused.every((r) => r._tag === "Failure" && r.failure._tag === "RateLimited")).toBe(true)
      const [after] = await runtime.runPromise(limiter.inspect([wide]))
      expect(after?.requests?.used).toBe(5)
      expect(after?.tokens?.used).toBe(50)
    } finally {
      await stats.close()
      await runtime.dispose()
    }
  })
})

describe("A rolling window's key expires a window after its newest bucket's first use, when every bucket in it has left the window", () => {
  it("a second use in the same bucket counts and leaves the expiry where the first use set it", async () => {
    const runtime = ManagedRuntime.make(RateLimiterRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url }))))
    const client = createClient({ url })
    await client.connect()
    try {
      const key = `rolling-${Date.now()}`
      // Buckets of DECADE / 144 (25 days): both uses fall in one bucket.
      const l: RateLimiter.Limit = { type: "user", key, hashTag: key, credits: { limit: 1_000, windowMs: DECADE, reserve: 10 } }
      const limiter = await runtime.runPromise(Effect.service(RateLimiter.RateLimiter))
      await runtime.runPromise(limiter.admit([l]))
      const first = await client.pTTL(RateLimiter.rollingKey(l))
      expect(first).toBeGreaterThan(DECADE - 5_000)
      await new Promise((resolve) => setTimeout(resolve, 300))
      await runtime.runPromise(limiter.admit([l]))
      expect(await client.pTTL(RateLimiter.rollingKey(l))).toBeLessThanOrEqual(first - 250)
      const [status] = await runtime.runPromise(limiter.inspect([l]))
      expect(status?.credits?.used).toBe(20)
    } finally {
      await client.close()
      await runtime.dispose()
    }
  })
})

describe("More admissions than one call carries are split over calls, in order", () => {
  it("600 concurrent admissions against a limit of 100 admit exactly the first 100", async () => {
    const runtime = ManagedRuntime.make(RateLimiterRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url }))))
    try {
      const key = `split-${Date.now()}`
      const l: RateLimiter.Limit = { type: "user", key, hashTag: key, requests: { limit: 100, windowMs: DECADE } }
      const limiter = await runtime.runPromise(Effect.service(RateLimiter.RateLimiter))
      const results = await runtime.runPromise(Effect.all(
        Array.from({ length: 600 }, () => Effect.result(limiter.admit([l]))),
        { concurrency: "unbounded" }
      ))
      expect(results.slice(0, 100).every((r) => r._tag === "Success")).toBe(true)
      expect(results.slice(100).every((r) => r._tag === "Failure" && r.failure._tag === "RateLimited")).toBe(true)
      const [status] = await runtime.runPromise(limiter.inspect([l]))
      expect(status?.requests?.used).toBe(100)
    } finally {
      await runtime.dispose()
    }
  })
})

const limit = (key: string): RateLimiter.Limit => ({
  type: "user",
  key,
  hashTag: key,
  requests: { limit: 1_000, windowMs: 60_000 }
})

const limiterOver = (onStoreFailure: RateLimiter.FailurePolicy) =>
  ManagedRuntime.make(
    RateLimiterRedis.layerRedis({ onStoreFailure, timeoutMs: 500 }).pipe(
      Layer.provide(RedisConnection.layer({ url }))
    )
  )

const admit = (runtime: ReturnType<typeof limiterOver>, key: string) =>
  runtime.runPromise(Effect.flatMap(RateLimiter.RateLimiter, (limiter) => Effect.result(limiter.admit([limit(key)]))))

const untilAdmitted = async (runtime: ReturnType<typeof limiterOver>, key: string) => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const result = await admit(runtime, key)
    if (result._tag === "Success" && Object.keys(result.success.headers).length > 0) return result.success
    if (Date.now() > deadline) throw new Error("the limiter did not recover")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("Redis unreachable: the configured policy holds, never a crash, and service resumes", () => {
  it("fail-closed (the default) answers 503 and fail-open admits, counted, while Redis is down; both resume once it is back", async () => {
    const closed = limiterOver("fail-closed")
    const open = limiterOver("fail-open")
    try {
      const key = `down-${Date.now()}`
      expect((await untilAdmitted(closed, key)).headers["x-ratelimit-remaining-requests"]).toBe("999")
      await untilAdmitted(open, key)
      const before = await open.runPromise(Metric.value(RateLimiter.failOpenCounter))

      await redis.kill()
      const refused = await admit(closed, key)
      expect(refused._tag).toBe("Failure")
      expect(refused._tag === "Failure" && refused.failure).toBeInstanceOf(Errors.ServiceUnavailable)
      const waved = await admit(open, key)
      expect(waved._tag === "Success" && waved.success.headers).toEqual({})
      const after = await open.runPromise(Metric.value(RateLimiter.failOpenCounter))
      expect(after.count).toBe(before.count + 1)

      await redis.restart()
      const resumed = await untilAdmitted(closed, key)
      expect(resumed.headers["x-ratelimit-remaining-requests"]).toBe("999")
      expect((await untilAdmitted(open, key)).headers["x-ratelimit-remaining-requests"]).toBe("998")
    } finally {
      await closed.dispose()
      await open.dispose()
    }
  }, 60_000)
})
