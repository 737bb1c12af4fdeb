/**
 * The metered pipeline in process, without HTTP: CPU time per paid call of `Metered.run` against
 * a straight line of the same store calls in the same order (authenticate, confirm the key, hold,
 * take the rate limits, the work, capture, settle the limits, the same headers) with none of the
 * pipeline's guarantees: nothing is given back when a step refuses or the call is interrupted, no
 * metric is updated, the stores are called one after another. The ratio is what those guarantees
 * cost. Memory layers; 50 calls at a time, each call's work one `setImmediate` long. Each subject
 * runs in its own process (the memory ledger keeps every call's journal and usage entries, so a
 * later subject in the same heap would pay for an earlier one's garbage), twice, alternating.
 *
 * `PIPELINE_STORE=redis` runs both on the Redis layers against a throwaway `redis-server` and also
 * reports the Redis commands per paid call (from `INFO commandstats`, which counts the commands
 * scripts run too), the Redis server's CPU per paid call (`INFO cpu`: user and system time of its
 * process, as `/proc` has it) and the share of the process's wall time spent in GC pauses.
 */
import {
  Admission,
  Auth,
  AuthStore,
  CreditLedger,
  IdempotencyStore,
  Jwt,
  Money,
  type PricingEngine,
  type Principal,
  RateLimiter,
  X402
} from "@tollgate/core"
import * as Metered from "@tollgate/http/Metered"
import * as X402Bodies from "@tollgate/http/payment/PaymentRequiredBodies"
import { CurrentRequest } from "@tollgate/http/RequestContext"
import {
  AdmissionStoreRedis,
  AuthStoreRedis,
  CreditLedgerRedis,
  IdempotencyStoreRedis,
  RateLimiterRedis,
  RedisConnection
} from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, Option, References, Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as ChildProcess from "node:child_process"
import { PerformanceObserver } from "node:perf_hooks"
import { createClient } from "redis"
import { table } from "./Harness.ts"
import { seedKey } from "./servers/Seed.ts"

const CONCURRENCY = 50
const CALLS_PER_WORKER = 400
const ROUNDS = Number(process.env["PIPELINE_ROUNDS"] ?? 6)
const subjects = ["Metered.run", "straight line"] as const
type Subject = typeof subjects[number]

const unreachable = 1_000_000_000
const limitsFor = (principal: Principal.Principal): ReadonlyArray<RateLimiter.Limit> => [
  {
    type: "user",
    key: `${principal.accountId}:rpc:minute`,
    hashTag: principal.accountId,
    requests: { limit: unreachable, windowMs: 60_000 }
  },
  {
    type: "user",
    key: `${principal.accountId}:rpc:day`,
    hashTag: principal.accountId,
    credits: { limit: unreachable, windowMs: 86_400_000, reserve: 20 }
  }
]
const price = Money.unsafeNano(1_000_000)
const quote: PricingEngine.Quote = { amount: price, version: "bench", sku: "rpc:ethereum-mainnet", units: 1, pricePerUnit: price }
const response = HttpServerResponse.text("ok")
const afterATurn = Effect.callback<void>((resume) => {
  setImmediate(() => resume(Effect.void))
})
const call: Metered.MeteredCall = {
  sku: quote.sku,
  kind: "rpc",
  reserveCredits: 20,
  quote,
  execute: () =>
    Effect.as(afterATurn, { response, charge: quote.amount, usage: { units: 1, pricePerUnit: quote.amount }, actualCredits: 1 })
}

/** Every store call `Metered.run` makes on an admitted call, in order, and nothing else. */
const straightLine = Effect.gen(function*() {
  const auth = yield* Auth.Auth
  const limiter = yield* RateLimiter.RateLimiter
  const ledger = yield* CreditLedger.CreditLedger
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const found = Option.getOrThrow(yield* auth.authenticateUnconfirmed(request.headers))
    if (found.confirm !== undefined) yield* found.confirm
    const { accountId } = found.principal
    const reference = `bench:${crypto.randomUUID()}`
    const hold = yield* ledger.hold({ accountId, amount: quote.amount, reference, priceVersion: quote.version })
    const admission = yield* limiter.admit(limitsFor(found.principal))
    const startedAt = Date.now()
    yield* afterATurn
    yield* ledger.capture({
      accountId,
      reference,
      amount: quote.amount,
      usage: { sku: call.sku, units: 1, pricePerUnit: quote.amount, requestId: "bench", executionMs: Date.now() - startedAt }
    })
    yield* admission.settle({ credits: 1 })
    return HttpServerResponse.setHeaders(response, {
      ...admission.headers,
      "x-service-balance-usd": Money.formatUsd(hold.before.availableUsd),
      "x-service-balance-token": Money.formatUsd(hold.before.availableAllowance)
    })
  })
})

const redisUrl = process.env["PIPELINE_REDIS_URL"]

/** Commands Redis has run so far (a script call and each command it runs), and its CPU time in us. */
const redisUsage = async (url: string) => {
  const client = createClient({ url })
  await client.connect()
  const stats = await client.info("commandstats")
  const cpu = await client.info("cpu")
  await client.quit()
  let commands = 0
  for (const match of stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gmu)) if (match[1] !== "info") commands += Number(match[2])
  const seconds = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "mu").exec(cpu)?.[1] ?? 0)
  return { commands, cpuUs: (seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6 }
}

interface Measured {
  readonly cpuUsPerCall: number
  readonly gcShare: number
}

const measure = async (subject: Subject): Promise<Measured> => {
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const stores = redisUrl === undefined
    ? Admission.layerMemory.pipe(Layer.provideMerge(
      Layer.mergeAll(AuthStore.layerMemory, RateLimiter.layerMemory(), CreditLedger.layerMemory, IdempotencyStore.layerMemory)
    ))
    : Layer.mergeAll(
      AdmissionStoreRedis.layerRedis(),
      AuthStoreRedis.layerRedis,
      RateLimiterRedis.layerRedis(),
      CreditLedgerRedis.layerRedis(),
      IdempotencyStoreRedis.layerRedis
    ).pipe(Layer.provide(RedisConnection.layer({ url: redisUrl })))
  const services = Metered.layer().pipe(
    Layer.provideMerge(Layer.mergeAll(
      X402Bodies.layer.pipe(
        Layer.provide(X402.layer(X402.makeConfig({ publicOrigin: "http://localhost" }))),
        Layer.provideMerge(Auth.layer({ signingKey, publicOrigin: "http://localhost" }))
      ),
      Layer.succeed(Metered.LimitPolicy, { limitsFor })
    )),
    Layer.provideMerge(stores),
    Layer.provide(Layer.succeed(References.TracerEnabled, false))
  )
  const context = await Effect.runPromise(Layer.build(services).pipe(Scope.provide(Scope.makeUnsafe())))
  const key = await seedKey(context)
  const request = HttpServerRequest.fromWeb(
    new Request("http://localhost/api/v1/crypto/rpc/ethereum-mainnet", {
      method: "POST",
      headers: { authorization: `Bearer ${key}` }
    })
  )
  const once = subject === "Metered.run"
    ? Effect.flatMap(Effect.service(Metered.Metered), (metered) => metered.run(call))
    : Effect.flatten(straightLine)
  const worker = Effect.gen(function*() {
    for (let i = 0; i < CALLS_PER_WORKER; i++) {
      const answer = yield* once
      if (answer.status !== 200) return yield* Effect.die(`status ${answer.status}`)
    }
  })
  const round = Effect.forEach(Array.from({ length: CONCURRENCY }), () => worker, { concurrency: CONCURRENCY, discard: true }).pipe(
    Effect.provideService(HttpServerRequest.HttpServerRequest, request),
    Effect.provideService(CurrentRequest, {
      requestId: "bench",
      clientRequestId: undefined,
      startedAt: 0,
      route: "bench",
      params: {},
      principalId: undefined
    }),
    Effect.provide(context)
  )
  let pausedMs = 0
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pausedMs += entry.duration
  })
  observer.observe({ entryTypes: ["gc"] })
  const rounds: Array<Measured> = []
  for (let i = 0; i <= ROUNDS; i++) {
    pausedMs = 0
    const before = process.cpuUsage()
    const startedAt = performance.now()
    await Effect.runPromise(round)
    const used = process.cpuUsage(before)
    const wallMs = performance.now() - startedAt
    await new Promise((resolve) => setImmediate(resolve))
    if (i > 0) rounds.push({ cpuUsPerCall: (used.user + used.system) / (CONCURRENCY * CALLS_PER_WORKER), gcShare: pausedMs / wallMs })
  }
  observer.disconnect()
  return rounds.reduce((best, round) => round.cpuUsPerCall < best.cpuUsPerCall ? round : best)
}

const child = process.argv[2] as Subject | undefined
if (child !== undefined) {
  console.log(JSON.stringify(await measure(child)))
  // The Redis client would keep the process alive.
  process.exit(0)
} else {
  const redis = process.env["PIPELINE_STORE"] === "redis" ? await RedisServer.start() : undefined
  const env = redis === undefined ? process.env : { ...process.env, PIPELINE_REDIS_URL: redis.url }
  const runs = new Map<Subject, Array<Measured & { readonly commandsPerCall: number; readonly redisUsPerCall: number }>>(
    subjects.map((subject) => [subject, []])
  )
  const calls = (ROUNDS + 1) * CONCURRENCY * CALLS_PER_WORKER
  for (let pass = 0; pass < 2; pass++) {
    for (const subject of subjects) {
      const before = redis === undefined ? undefined : await redisUsage(redis.url)
      const output = ChildProcess.execFileSync(process.execPath, [new URL(import.meta.url).pathname, subject], { encoding: "utf8", env })
      const after = redis === undefined ? undefined : await redisUsage(redis.url)
      const measured = JSON.parse(output.trim().split("\n").at(-1)!) as Measured
      // Seeding the account takes a few commands; the rounds take the rest.
      runs.get(subject)!.push({
        ...measured,
        commandsPerCall: before === undefined || after === undefined ? 0 : (after.commands - before.commands) / calls,
        redisUsPerCall: before === undefined || after === undefined ? 0 : (after.cpuUs - before.cpuUs) / calls
      })
    }
  }
  await redis?.stop()
  const best = (subject: Subject) => Math.min(...runs.get(subject)!.map((run) => run.cpuUsPerCall))
  const baseline = best("straight line")
  table(subjects.map((subject) => ({
    subject,
    store: redis === undefined ? "memory" : "redis",
    "CPU us per call (best round, each run)": runs.get(subject)!.map((run) => run.cpuUsPerCall.toFixed(1)).join(" / "),
    "x straight line": (best(subject) / baseline).toFixed(2),
    "GC pauses, share of wall time": runs.get(subject)!.map((run) => `${(run.gcShare * 100).toFixed(0)} %`).join(" / "),
    ...(redis === undefined ? {} : {
      "Redis commands per call": runs.get(subject)!.map((run) => run.commandsPerCall.toFixed(2)).join(" / "),
      "Redis CPU us per call": runs.get(subject)!.map((run) => run.redisUsPerCall.toFixed(1)).join(" / ")
    })
  })))
}
