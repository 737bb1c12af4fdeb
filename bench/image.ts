/**
 * Image generation: the local renderer's time per 1024x1024 image in each format against the
 * least any renderer must do (sharp encoding a blank 1024x1024 canvas in the same format), and the
 * cost of the metered HTTP pipeline around a render (authentication, rate limit, credit hold and
 * capture, usage entry, headers, in-process web handler) against calling the backend directly with
 * the same request.
 */
import { ImageBackend, PromptEnhancer } from "@tollgate/backends"
import {
  Admission,
  CreditLedger,
  IdempotencyStore,
  ImageRequest,
  Models,
  Money,
  PricingEngine,
  RateLimitPolicy,
  X402
} from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { App, Handlers, ServiceInfo } from "@tollgate/http"
import * as Metered from "@tollgate/http/Metered"
import * as X402Bodies from "@tollgate/http/payment/PaymentRequiredBodies"
import * as ImageRoute from "@tollgate/http/routes/Image"
import { Effect, Exit, Layer, References, Scope } from "effect"
import Sharp from "sharp"
import { table } from "./Harness.ts"

const RENDERS = Number(process.env["IMAGE_RENDERS"] ?? 20)
const CALLS = Number(process.env["IMAGE_CALLS"] ?? 300)
const formats = ["jpeg", "png", "webp"] as const

const models = Models.make()
const backend = ImageBackend.makeLocal()
const requestOf = (body: Record<string, unknown>) => Effect.runSync(ImageRequest.decode(models, body))

/** Mean milliseconds per call, after two warm-up calls. */
const mean = async (count: number, task: (i: number) => Promise<unknown>) => {
  await task(-1)
  await task(-2)
  const started = performance.now()
  for (let i = 0; i < count; i++) await task(i)
  return (performance.now() - started) / count
}

/**
 * Mean milliseconds of two tasks run alternately with the same inputs, so that whatever else the
 * machine is doing weighs on both alike.
 */
const interleaved = async (count: number, a: (i: number) => Promise<unknown>, b: (i: number) => Promise<unknown>) => {
  await a(-1)
  await b(-1)
  let totalA = 0
  let totalB = 0
  for (let i = 0; i < count; i++) {
    const t0 = performance.now()
    await a(i)
    const t1 = performance.now()
    await b(i)
    totalA += t1 - t0
    totalB += performance.now() - t1
  }
  return { a: totalA / count, b: totalB / count }
}

const renderRows = []
for (const format of formats) {
  const baseline = await mean(
    RENDERS,
    () => Sharp({ create: { width: 1024, height: 1024, channels: 3, background: "#336699" } }).toFormat(format).toBuffer()
  )
  const tollgate = await mean(RENDERS, (i) => {
    const request = requestOf({ model: "local-renderer", prompt: "a harbour at dawn", seed: i, format })
    return Effect.runPromise(backend.generate(request, request.prompt))
  })
  renderRows.push({
    format,
    "tollgate local render (ms/image)": tollgate.toFixed(1),
    "baseline: sharp encode of a blank canvas (ms/image)": baseline.toFixed(1),
    ratio: (tollgate / baseline).toFixed(2)
  })
}
console.log("Local renderer, one 1024x1024 image per call\n")
table(renderRows)

const unlimited: Layer.Layer<Metered.LimitPolicy> = Layer.succeed(Metered.LimitPolicy, {
  limitsFor: (principal, call) =>
    RateLimitPolicy.limitsFor(principal, call).map((limit) =>
      limit.requests === undefined ? limit : { ...limit, requests: { ...limit.requests, limit: 1_000_000_000 } }
    )
})

const scope = Effect.runSync(Scope.make())
const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const context = await Effect.runPromise(
  Layer.build(
    Layer.mergeAll(
      Metered.layer().pipe(Layer.provide(Admission.layerMemory)),
      PricingEngine.layer(),
      Models.layer(),
      ImageBackend.layerLocal,
      PromptEnhancer.layerLocal,
      ServiceInfo.layer({ version: "bench", hostName: "bench" })
    ).pipe(Layer.provideMerge(Layer.mergeAll(
      X402Bodies.layer.pipe(
        Layer.provide(X402.layer(X402.makeConfig({ publicOrigin: "http://localhost" }))),
        Layer.provideMerge(Auth.layer({ signingKey, publicOrigin: "http://localhost" }).pipe(Layer.provideMerge(AuthStore.layerMemory)))
      ),
      RateLimiter.layerMemory(),
      CreditLedger.layerMemory,
      IdempotencyStore.layerMemory,
      unlimited
    )))
  ).pipe(Scope.provide(scope))
)
const web = Handlers.toWebHandler(
  App.layer([ImageRoute.route]).pipe(
    Layer.provide(Layer.succeedContext(context)),
    Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "None"))
  )
)
const authorization = await Effect.runPromise(
  Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const ledger = yield* CreditLedger.CreditLedger
    const account = yield* auth.createAccount()
    const { key } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "bench" })
    yield* ledger.grant({ accountId: account.id, amount: Money.usd(100_000), reference: "bench-grant" })
    return `Bearer ${key}`
  }).pipe(Effect.provide(context))
)

const pipelineRows = []
for (
  const [label, body, calls] of [
    ["64x64 png", { model: "local-renderer", prompt: "a dot", width: 64, height: 64, format: "png" }, CALLS],
    ["1024x1024 webp", { model: "local-renderer", prompt: "a harbour at dawn", format: "webp" }, RENDERS]
  ] as const
) {
  const direct = (i: number) => {
    const request = requestOf({ ...body, seed: i })
    return Effect.runPromise(backend.generate(request, request.prompt))
  }
  const viaHttp = async (i: number) => {
    const response = await web.handler(
      new Request("http://localhost/api/v1/image/generate", {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify({ ...body, seed: i, return_binary: true })
      })
    )
    if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`)
    await response.arrayBuffer()
  }
  const { a: http, b: directMs } = await interleaved(calls, viaHttp, direct)
  pipelineRows.push({
    image: label,
    "tollgate: POST /image/generate (ms/request)": http.toFixed(2),
    "baseline: backend.generate directly (ms/call)": directMs.toFixed(2),
    "pipeline overhead (ms)": (http - directMs).toFixed(2),
    ratio: (http / directMs).toFixed(2)
  })
}
console.log("\nThe metered pipeline around a render (return_binary, sequential, in process)\n")
table(pipelineRows)

await web.dispose()
await Effect.runPromise(Scope.close(scope, Exit.void))
