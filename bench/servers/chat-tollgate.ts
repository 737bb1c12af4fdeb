/**
 * Tollgate with only the chat route, for `bench/chat.ts`: model `bench-chat` is served by
 * `CHAT_UPSTREAM`, `bench-long` by `CHAT_UPSTREAM_LONG` and `bench-paced` by `CHAT_UPSTREAM_PACED`
 * (base URLs). Auth, token limits, the credit hold and the capture all run (memory stores); the
 * limits have ceilings no benchmark reaches, and the models a context of a million tokens (as
 * long-context models have), so the longest prompt fits. Prints the API key, then "listening";
 * exits on SIGTERM, so a `--cpu-prof` run writes its profile.
 */
import { ChatBackend } from "@tollgate/backends"
import {
  Admission,
  AuthStore,
  ChatOptions,
  CreditLedger,
  Generations,
  IdempotencyStore,
  Jwt,
  Models,
  Money,
  PricingEngine,
  RateLimiter,
  SearchProvider,
  X402
} from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import { App, Handlers, ServiceInfo } from "@tollgate/http"
import * as Metered from "@tollgate/http/Metered"
import * as X402Bodies from "@tollgate/http/payment/PaymentRequiredBodies"
import * as Chat from "@tollgate/http/routes/Chat"
import { Effect, Layer, References, Scope } from "effect"
import * as Http from "node:http"
import { seedKey } from "./Seed.ts"

const upstream = process.env["CHAT_UPSTREAM"] ?? "http://127.0.0.1:8000/v1"
const paced = process.env["CHAT_UPSTREAM_PACED"] ?? upstream
const long = process.env["CHAT_UPSTREAM_LONG"] ?? upstream
const unreachable = 1_000_000_000
const limits = Layer.succeed(Metered.LimitPolicy, {
  limitsFor: (principal, call) => [{
    type: "user",
    key: `${principal.accountId}:text`,
    hashTag: principal.accountId,
    requests: { limit: unreachable, windowMs: 60_000 },
    tokens: { limit: unreachable, windowMs: 60_000, reserve: call.reserveTokens ?? 0 }
  }]
})
const model = (id: string, baseUrl: string): Models.TextModel => ({
  id,
  name: id,
  type: "text",
  router: "bench",
  tier: "XS",
  upstreams: [{ baseUrl }],
  contextTokens: 1_048_576,
  maxCompletionTokens: 4_096,
  supportsThinking: false,
  supportsWebSearch: false,
  supportsXSearch: false
})
const price = { inputPerMillion: Money.usd(1), outputPerMillion: Money.usd(2) }

const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
// Tracing off, as the server runs without an OTLP endpoint (`Telemetry.layerDisabled`).
const tracing = Layer.succeed(References.TracerEnabled, false)
const services = Layer.mergeAll(
  Metered.layer().pipe(Layer.provide(Admission.layerMemory)),
  PricingEngine.layer({
    chat: { ...PricingEngine.defaults.chat, models: { "bench-chat": price, "bench-long": price, "bench-paced": price } }
  }),
  Models.layer([model("bench-chat", upstream), model("bench-long", long), model("bench-paced", paced)]),
  ChatBackend.layer(),
  ChatOptions.layerPrompts({ systemPrompt: "You are a benchmark." }),
  Generations.layerMemory,
  SearchProvider.layerNone,
  ServiceInfo.layer({ version: "bench", hostName: "bench" })
).pipe(
  Layer.provideMerge(Layer.mergeAll(
    X402Bodies.layer.pipe(
      Layer.provide(X402.layer(X402.makeConfig({ publicOrigin: "http://localhost" }))),
      Layer.provideMerge(Auth.layer({ signingKey, publicOrigin: "http://localhost" }))
    ),
    limits
  )),
  Layer.provideMerge(
    Layer.mergeAll(AuthStore.layerMemory, RateLimiter.layerMemory(), CreditLedger.layerMemory, IdempotencyStore.layerMemory)
  ),
  Layer.provideMerge(tracing)
)

const context = await Effect.runPromise(Layer.build(services).pipe(Scope.provide(Effect.runSync(Scope.make()))))
const key = await seedKey(context)

const node = await Handlers.toNodeHandler(App.layer([Chat.route]).pipe(Layer.provide(Layer.succeedContext(context))))
const server = Http.createServer(node.handler)
process.on("SIGTERM", () => process.exit(0))
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  console.log(`url http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/api/v1\nkey ${key}\nlistening`)
})
