/**
 * The metered pipeline in process, without HTTP: CPU time per paid call of `Metered.run` against
 * a straight line of the same store calls in the same order (authenticate, confirm the key, hold,
 * take the rate limits, the work, capture, settle the limits, the same headers) with none of the
 * pipeline's guarantees: nothing is given back when a step refuses or the call is interrupted, no
 * metric is updated, the stores are called one after another. The ratio is what those guarantees
 * cost. Memory layers; 50 calls at a time, each call's work one `setImmediate` long. Each subject
 * runs in its own process (the memory ledger keeps every call's journal and usage entries, so a
 * later subject in the same heap would pay for an earlier one's garbage), twice, alternating.
 */
import { Admission, Auth, AuthStore, CreditLedger, IdempotencyStore, Jwt, Money, type PricingEngine, type Principal, RateLimiter } from "@tollgate/core"
import * as Metered from "@tollgate/http/Metered"
import { CurrentRequest } from "@tollgate/http/RequestContext"
import { Effect, Layer, Option, References, Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as ChildProcess from "node:child_process"
import { table } from "./Harness.ts"
import { seedKey } from "./servers/Seed.ts"

const CONCURRENCY = 50
const CALLS_PER_WORKER = 400
const ROUNDS = 6
const subjects = ["Metered.run", "straight line"] as const
type Subject = typeof subjects[number]

const unreachable = 1_000_000_000
const limitsFor = (principal: Principal.Principal): ReadonlyArray<RateLimiter.Limit> => [
  { type: "user", key: `${principal.accountId}:rpc:minute`, hashTag: principal.accountId, requests: { limit: unreachable, windowMs: 60_000 } },
  { type: "user", key: `${principal.accountId}:rpc:day`, hashTag: principal.accountId, credits: { limit: unreachable, windowMs: 86_400_000, reserve: 20 } }
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
  execute: () => Effect.as(afterATurn, { response, charge: quote.amount, usage: { units: 1, pricePerUnit: quote.amount }, actualCredits: 1 })
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

const measure = async (subject: Subject): Promise<number> => {
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const stores = Layer.mergeAll(AuthStore.layerMemory, RateLimiter.layerMemory(), CreditLedger.layerMemory, IdempotencyStore.layerMemory)
  const services = Metered.layer().pipe(
    Layer.provide(Admission.layerMemory),
    Layer.provideMerge(Layer.mergeAll(
      Auth.layer({ signingKey, publicOrigin: "http://localhost" }),
      Metered.layerPaymentRequiredMinimal,
      Layer.succeed(Metered.LimitPolicy, { limitsFor })
    )),
    Layer.provideMerge(stores),
    Layer.provide(Layer.succeed(References.TracerEnabled, false))
  )
  const context = await Effect.runPromise(Layer.build(services).pipe(Scope.provide(Scope.makeUnsafe())))
  const key = await seedKey(context)
  const request = HttpServerRequest.fromWeb(new Request("http://localhost/api/v1/crypto/rpc/ethereum-mainnet", {
    method: "POST",
    headers: { authorization: `Bearer ${key}` }
  }))
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
    Effect.provideService(CurrentRequest, { requestId: "bench", clientRequestId: undefined, startedAt: 0, route: "bench", params: {}, principalId: undefined }),
    Effect.provide(context)
  )
  const perCall: Array<number> = []
  for (let i = 0; i <= ROUNDS; i++) {
    const before = process.cpuUsage()
    await Effect.runPromise(round)
    const used = process.cpuUsage(before)
    if (i > 0) perCall.push((used.user + used.system) / (CONCURRENCY * CALLS_PER_WORKER))
  }
  return Math.min(...perCall)
}

const child = process.argv[2] as Subject | undefined
if (child !== undefined) {
  console.log(JSON.stringify(await measure(child)))
} else {
  const runs = new Map<Subject, Array<number>>(subjects.map((subject) => [subject, []]))
  for (let pass = 0; pass < 2; pass++) {
    for (const subject of subjects) {
      const output = ChildProcess.execFileSync(process.execPath, [new URL(import.meta.url).pathname, subject], { encoding: "utf8" })
      runs.get(subject)!.push(JSON.parse(output.trim().split("\n").at(-1)!))
    }
  }
  const best = (subject: Subject) => Math.min(...runs.get(subject)!)
  const baseline = best("straight line")
  table(subjects.map((subject) => ({
    subject,
    "CPU us per call (best round, each run)": runs.get(subject)!.map((us) => us.toFixed(1)).join(" / "),
    "x straight line": (best(subject) / baseline).toFixed(2)
  })))
}
