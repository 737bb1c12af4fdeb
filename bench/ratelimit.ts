/**
 * Rate-limit admissions per second, each checking a request limit AND a token limit: tollgate's
 * RateLimiter (memory; Redis, one Lua round trip, all or nothing) against rate-limiter-flexible
 * (RateLimiterMemory; RateLimiterRedis on the same Redis through the same node-redis package),
 * which needs one limiter per dimension, so two consumes per admission (sent in parallel, and
 * not all or nothing). Both sides run 64 workers, each admitting one call after the other.
 * tollgate's Redis layer sends the admissions that start in one turn of the event loop in one
 * script call (each still all or nothing); rate-limiter-flexible sends one `EVAL` per consume. A row
 * with that batching off (`batch: false`, one call per admission, as on a Redis Cluster) and a
 * requests-only row of rate-limiter-flexible are shown for reference, and every row shows its
 * process's CPU time and Redis's script time per admission.
 *
 * Every limiter runs in a node process of its own (this file, started with `subject <name>`), so
 * none runs on code the JIT shaped for another; this process drives them round by round.
 * Target: tollgate Redis >= 1.0x rate-limiter-flexible Redis.
 */
import { RateLimiter } from "@tollgate/core"
import { RateLimiterRedis, RedisConnection } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as ChildProcess from "node:child_process"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { RateLimiterMemory, RateLimiterRedis as FlexibleRedis } from "rate-limiter-flexible"
import { createClient } from "redis"
import { table } from "./Harness.ts"

const OPS = Number(process.env["RATELIMIT_OPS"] ?? 40_000)
const CONCURRENCY = 64
const KEYS = 256
const TOKENS = 100

interface Subject {
  readonly batch: (n: number) => Promise<unknown>
}

const limits = (i: number): ReadonlyArray<RateLimiter.Limit> => [{
  type: "user",
  key: `bench:${i % KEYS}`,
  hashTag: `acct_${i % KEYS}`,
  requests: { limit: 1_000_000_000, windowMs: 60_000 },
  tokens: { limit: 1_000_000_000_000, windowMs: 60_000, reserve: TOKENS }
}]

const tollgate = async (layer: Layer.Layer<RateLimiter.RateLimiter>): Promise<Subject> => {
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
  return { batch }
}

const pool = async (n: number, op: (i: number) => Promise<unknown>) => {
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < n) await op(next++)
  }))
}

const flexible = (
  make: (points: number, keyPrefix: string) => { consume: (key: string, points: number) => Promise<unknown> },
  tokens: boolean
): Subject => {
  const requests = make(1_000_000_000, "rlf-req")
  const tokenLimiter = make(1_000_000_000_000, "rlf-tok")
  return {
    batch: (n: number) =>
      pool(n, (i) => {
        const key = `bench:${i % KEYS}`
        return tokens ? Promise.all([requests.consume(key, 1), tokenLimiter.consume(key, TOKENS)]) : requests.consume(key, 1)
      })
  }
}

const flexibleRedis = async (url: string, tokens: boolean) => {
  const client = createClient({ url })
  await client.connect()
  return flexible(
    (points, keyPrefix) => new FlexibleRedis({ storeClient: client, useRedisPackage: true, points, duration: 60, keyPrefix }),
    tokens
  )
}

const tollgateRedis = (url: string, options: RateLimiterRedis.StoreOptions) =>
  tollgate(RateLimiterRedis.layerRedis(options).pipe(Layer.provide(RedisConnection.layer({ url })), Layer.orDie))

const subjects = {
  flexibleMemory: () => flexible((points, keyPrefix) => new RateLimiterMemory({ points, duration: 60, keyPrefix }), true),
  tollgateMemory: () => tollgate(RateLimiter.layerMemory()),
  flexibleRedis: (url: string) => flexibleRedis(url, true),
  flexibleRedisRequestsOnly: (url: string) => flexibleRedis(url, false),
  tollgateRedis: (url: string) => tollgateRedis(url, {}),
  tollgateRedisUnbatched: (url: string) => tollgateRedis(url, { batch: false })
}
type Name = keyof typeof subjects

interface Batch {
  readonly perSecond: number
  readonly cpuMicros: number
}

// A subject's process: builds the limiter, then runs one batch of the size it is sent at a time and
// answers with its rate and the CPU time it took. Each batch starts from a collected heap, so no
// batch pays for the garbage of the one before it.
const serve = async (name: Name, url: string) => {
  V8.setFlagsFromString("--expose-gc")
  const collect = Vm.runInNewContext("gc") as () => void
  const subject = await subjects[name](url)
  process.on("message", async (n: number) => {
    collect()
    const cpu = process.cpuUsage()
    const start = performance.now()
    await subject.batch(n)
    const seconds = (performance.now() - start) / 1000
    const spent = process.cpuUsage(cpu)
    process.send!({ perSecond: n / seconds, cpuMicros: spent.user + spent.system } satisfies Batch)
  })
  process.send!("ready")
}

interface Measured {
  readonly perSecond: number
  readonly redisMicrosPerAdmission: number
  readonly nodeMicrosPerAdmission: number
}

// The machine is shared and noisy: every subject runs ROUNDS times, interleaved with the others,
// and its median counts.
const ROUNDS = Number(process.env["RATELIMIT_ROUNDS"] ?? 5)

const drive = async () => {
  const server = await RedisServer.start()
  const client = createClient({ url: server.url })
  await client.connect()

  // Redis CPU spent in scripts so far, in microseconds (INFO commandstats). With each process's own
  // CPU time per admission, it shows what each admission costs, which a busy machine blurs less
  // than the admissions per second. Both limiters only send scripts; the commands a script calls
  // are counted in its own time and again under their names, so only EVAL, EVALSHA and FCALL are summed.
  const redisMicros = async () => {
    const info = await client.sendCommand(["INFO", "commandstats"])
    let total = 0
    for (const match of String(info).matchAll(/cmdstat_(?:eval|evalsha|fcall):calls=\d+,usec=(\d+),/g)) total += Number(match[1])
    return total
  }

  const names = Object.keys(subjects) as Array<Name>
  const file = new URL(import.meta.url).pathname
  const children = new Map(names.map((name) => [name, ChildProcess.fork(file, ["subject", name, server.url])]))
  const reply = <A>(child: ChildProcess.ChildProcess) =>
    new Promise<A>((resolve, reject) => {
      const exited = (code: number | null) => reject(new Error(`a subject exited with ${code}`))
      child.once("exit", exited)
      child.once("message", (message) => {
        child.off("exit", exited)
        resolve(message as A)
      })
    })
  await Promise.all([...children.values()].map((child) => reply(child)))
  const batch = (name: Name) => {
    const child = children.get(name)!
    const answer = reply<Batch>(child)
    child.send(OPS)
    return answer
  }

  const samples = new Map<Name, Array<number>>(names.map((name) => [name, []]))
  const micros = new Map<Name, number>(names.map((name) => [name, 0]))
  const nodeMicros = new Map<Name, number>(names.map((name) => [name, 0]))
  for (const name of names) await batch(name)
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) {
      const before = await redisMicros()
      const { cpuMicros, perSecond } = await batch(name)
      samples.get(name)!.push(perSecond)
      nodeMicros.set(name, nodeMicros.get(name)! + cpuMicros)
      micros.set(name, micros.get(name)! + (await redisMicros()) - before)
    }
  }
  for (const child of children.values()) child.kill()
  await client.close()
  await server.stop()

  const results = Object.fromEntries(names.map((name) => {
    const sorted = samples.get(name)!.sort((a, b) => a - b)
    return [name, {
      perSecond: sorted[Math.floor(sorted.length / 2)]!,
      redisMicrosPerAdmission: micros.get(name)! / (OPS * ROUNDS),
      nodeMicrosPerAdmission: nodeMicros.get(name)! / (OPS * ROUNDS)
    }]
  })) as Record<Name, Measured>

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
    row("tollgate Redis", "requests + tokens", results.tollgateRedis, results.flexibleRedis, true),
    row(
      "tollgate Redis, one call per admission (batch: false)",
      "requests + tokens",
      results.tollgateRedisUnbatched,
      results.flexibleRedis,
      true
    )
  ])
  console.log(
    `\ntollgate Redis / rate-limiter-flexible Redis (requests + tokens) = ${
      (results.tollgateRedis.perSecond / results.flexibleRedis.perSecond).toFixed(2)
    }x (target >= 1.00x)`
  )
  process.exit(0)
}

if (process.argv[2] === "subject") await serve(process.argv[3] as Name, process.argv[4]!)
else await drive()
