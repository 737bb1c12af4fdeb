/**
 * What a long-running memory-mode server keeps per paid call: 1,000,000 calls of `Metered.run` in
 * process (memory layers, one account, 50 calls at a time, each call's work one `setImmediate`
 * long), the heap after a full GC once the first 10,000 calls are done and after every round of
 * 100,000, the CPU per call of each round and the share of its wall time spent in GC pauses (both
 * measured in wall time, so a busy machine inflates them alike). Targets: the heap
 * ends within 50 MB of where it was after the first 10,000 calls, and the last round's CPU per call
 * is no higher than the first's (within the noise of this machine, 15 %).
 *
 * The ledger keeps each account's usage and journal entries for the configured retention and, in
 * memory, at most `CreditLedger.DEFAULT_MAX_ENTRIES` of each per account, so the heap stays flat
 * once an account has reached its cap. `HEAP_CALLS` sets the total (default 1,000,000).
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
import { Effect, Layer, References, Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as ChildProcess from "node:child_process"
import { PerformanceObserver } from "node:perf_hooks"
import { table } from "./Harness.ts"
import { seedKey } from "./servers/Seed.ts"

const CONCURRENCY = 50
const TOTAL = Number(process.env["HEAP_CALLS"] ?? 1_000_000)
const FIRST = 10_000
const ROUND = 100_000

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
const price = Money.unsafeNano(1_000)
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

interface Round {
  readonly calls: number
  readonly heapMb: number
  readonly cpuUsPerCall: number
  readonly gcShare: number
}

const measure = async (): Promise<ReadonlyArray<Round>> => {
  const gc = globalThis.gc
  if (gc === undefined) throw new Error("run with --expose-gc")
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const stores = Layer.mergeAll(AuthStore.layerMemory, RateLimiter.layerMemory(), CreditLedger.layerMemory, IdempotencyStore.layerMemory)
  const services = Metered.layer().pipe(
    Layer.provide(Admission.layerMemory),
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
  const metered = Effect.flatMap(Effect.service(Metered.Metered), (service) => service.run(call))
  const calls = (count: number) => {
    const worker = Effect.gen(function*() {
      for (let i = 0; i < count / CONCURRENCY; i++) {
        const answer = yield* metered
        if (answer.status !== 200) return yield* Effect.die(`status ${answer.status}`)
      }
    })
    return Effect.forEach(Array.from({ length: CONCURRENCY }), () => worker, { concurrency: CONCURRENCY, discard: true }).pipe(
      Effect.provideService(HttpServerRequest.HttpServerRequest, request),
      Effect.provideService(CurrentRequest, { requestId: "bench", startedAt: 0, route: "bench", params: {}, principalId: undefined }),
      Effect.provide(context)
    )
  }
  let pausedMs = 0
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pausedMs += entry.duration
  })
  observer.observe({ entryTypes: ["gc"] })
  const heapMb = () => {
    gc()
    return process.memoryUsage().heapUsed / 1_048_576
  }
  const rounds: Array<Round> = []
  let done = 0
  for (
    const count of [
      FIRST,
      ...Array.from({ length: Math.ceil((TOTAL - FIRST) / ROUND) }, (_, i) => Math.min(ROUND, TOTAL - FIRST - i * ROUND))
    ]
  ) {
    pausedMs = 0
    const before = process.cpuUsage()
    const startedAt = performance.now()
    await Effect.runPromise(calls(count))
    const used = process.cpuUsage(before)
    const wallMs = performance.now() - startedAt
    const cpuUs = used.user + used.system
    // The observer reports in a later turn: let it.
    await new Promise((resolve) => setImmediate(resolve))
    done += count
    rounds.push({ calls: done, heapMb: heapMb(), cpuUsPerCall: cpuUs / count, gcShare: pausedMs / wallMs })
  }
  observer.disconnect()
  return rounds
}

if (process.argv[2] === "child") {
  console.log(JSON.stringify(await measure()))
} else {
  const output = ChildProcess.execFileSync(process.execPath, ["--expose-gc", new URL(import.meta.url).pathname, "child"], {
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024
  })
  const rounds = JSON.parse(output.trim().split("\n").at(-1)!) as ReadonlyArray<Round>
  const first = rounds[0]!
  table(rounds.map((round) => ({
    "paid calls": round.calls.toLocaleString("en-US"),
    "heap after GC (MB)": round.heapMb.toFixed(1),
    "heap - after 10k (MB)": (round.heapMb - first.heapMb).toFixed(1),
    "CPU us per call (this round)": round.cpuUsPerCall.toFixed(1),
    "GC pauses, share of wall time": `${(round.gcShare * 100).toFixed(1)} %`
  })))
  const last = rounds.at(-1)!
  const second = rounds[1] ?? last
  console.log(
    `heap growth after the first 10,000 calls: ${(last.heapMb - first.heapMb).toFixed(1)} MB (target <= 50 MB): ${
      last.heapMb - first.heapMb <= 50 ? "met" : "NOT met"
    }`
  )
  console.log(
    `CPU per call, first round of 100,000 vs last: ${second.cpuUsPerCall.toFixed(1)} vs ${last.cpuUsPerCall.toFixed(1)} us: ${
      last.cpuUsPerCall <= second.cpuUsPerCall * 1.15 ? "met" : "NOT met"
    }`
  )
}
