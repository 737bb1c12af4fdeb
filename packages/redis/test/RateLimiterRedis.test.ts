import { NodeRedis } from "@effect/platform-node"
import { Errors, RateLimiter } from "@tollgate/core"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime, Metric } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { afterAll, describe, expect, it } from "vitest"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => ("stop" in redis ? redis.stop() : undefined))
const server = "url" in redis ? redis : undefined
const url = server?.url ?? ""

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

describe.skipIf("unavailable" in redis)("Two server processes on one Redis share every limit", () => {
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

const limit = (key: string): RateLimiter.Limit => ({
  type: "user",
  key,
  hashTag: key,
  requests: { limit: 1_000, windowMs: 60_000 }
})

const limiterOver = (onStoreFailure: RateLimiter.FailurePolicy) =>
  ManagedRuntime.make(
    RateLimiterRedis.layerRedis({ onStoreFailure, timeoutMs: 500 }).pipe(
      Layer.provide(NodeRedis.layer({ url, disableOfflineQueue: true }))
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

describe.skipIf("unavailable" in redis || process.env["REDIS_URL"])("Redis unreachable: the configured policy holds, never a crash, and service resumes", () => {
  it("fail-closed (the default) answers 503 and fail-open admits, counted, while Redis is down; both resume once it is back", async () => {
    const closed = limiterOver("fail-closed")
    const open = limiterOver("fail-open")
    try {
      const key = `down-${Date.now()}`
      expect((await untilAdmitted(closed, key)).headers["x-ratelimit-remaining-requests"]).toBe("999")
      await untilAdmitted(open, key)
      const before = await open.runPromise(Metric.value(RateLimiter.failOpenCounter))

      await server!.kill()
      const refused = await admit(closed, key)
      expect(refused._tag).toBe("Failure")
      expect(refused._tag === "Failure" && refused.failure).toBeInstanceOf(Errors.ServiceUnavailable)
      const waved = await admit(open, key)
      expect(waved._tag === "Success" && waved.success.headers).toEqual({})
      const after = await open.runPromise(Metric.value(RateLimiter.failOpenCounter))
      expect(after.count).toBe(before.count + 1)

      await server!.restart()
      const resumed = await untilAdmitted(closed, key)
      expect(resumed.headers["x-ratelimit-remaining-requests"]).toBe("999")
      expect((await untilAdmitted(open, key)).headers["x-ratelimit-remaining-requests"]).toBe("998")
    } finally {
      await closed.dispose()
      await open.dispose()
    }
  }, 60_000)
})
