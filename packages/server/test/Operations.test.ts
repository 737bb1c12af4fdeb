/**
 * What an operator sees of the reference app (`Server.appLayer` over dev-mode memory services):
 * the Prometheus counters of `/metrics`, the spans of a metered call, the request log lines, and
 * the extraction pool's metrics.
 */
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Auth, CreditLedger, Money } from "@tollgate/core"
import * as WorkerPool from "@tollgate/documents/WorkerPool"
import { Handlers, RequestLog } from "@tollgate/http"
import { RedisServer } from "@tollgate/testkit"
import { type Context, Effect, Layer, Logger, Metric, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"
import * as Server from "../src/Server.ts"
import * as Services from "../src/Services.ts"
import * as Telemetry from "../src/Telemetry.ts"

type Seeded = Context.Context<Auth.Auth | CreditLedger.CreditLedger>

interface Instance {
  readonly web: Handlers.WebHandler
  readonly seeded: Seeded
}

/**
 * The reference app with its services shared with a seeding layer (same layer value, one build),
 * plus the observability layers a test merges in (by default, no logger: the output stays quiet).
 */
const start = async (observe: Layer.Layer<never> = Logger.layer([]), env: Record<string, string> = {}): Promise<Instance> => {
  const config = await Effect.runPromise(Config.load({ TOLLGATE_METRICS: "open", ...env }))
  const services = Services.layer(config)
  let seeded: Seeded | undefined
  const seed = Layer.effectDiscard(Effect.map(
    Effect.context<Auth.Auth | CreditLedger.CreditLedger>(),
    (context) => {
      seeded = context
    }
  )).pipe(Layer.provide(services))
  const web = Handlers.toWebHandler(Layer.mergeAll(Server.appLayer(config, services), seed).pipe(Layer.provideMerge(observe)))
  await web.handler(new Request("http://localhost/metrics"))
  if (seeded === undefined) throw new Error("the app did not build")
  return { web, seeded }
}

let accounts = 0

/** An account (`id`, or a fresh one) with one key (INFERENCE unless said) and `grant` of credits. */
const account = (instance: Instance, grant: Money.Nano, type: "INFERENCE" | "ADMIN" = "INFERENCE", id?: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const ledger = yield* CreditLedger.CreditLedger
      const created = yield* auth.createAccount(id === undefined ? {} : { id })
      const { key } = yield* auth.createKey({ accountId: created.id, type, description: "operations tests" })
      if (grant > 0) yield* ledger.grant({ accountId: created.id, amount: grant, reference: `operations-${accounts++}` })
      const spent = () =>
        Effect.runPromise(Effect.map(ledger.balance(created.id), (balance) => grant - balance.usd).pipe(Effect.provide(instance.seeded)))
      return { key, spent }
    }).pipe(Effect.provide(instance.seeded))
  )

const generate = (instance: Instance, key: string, body: unknown) =>
  instance.web.handler(
    new Request("http://localhost/api/v1/image/generate", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify(body)
    })
  )

const image = (prompt: string) => ({ model: "local-renderer", prompt, width: 64, height: 48, format: "png" })

/** Prometheus text as `series -> value`, the series written as printed (`name{label="v",...}`). */
const parse = (text: string): Map<string, number> => {
  const series = new Map<string, number>()
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const at = line.lastIndexOf(" ")
    series.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return series
}

/** The sum over the series of `name` whose labels include every pair of `labels`. */
const total = (series: Map<string, number>, name: string, labels: Record<string, string> = {}) => {
  let sum = 0
  for (const [key, value] of series) {
    const brace = key.indexOf("{")
    if ((brace === -1 ? key : key.slice(0, brace)) !== name) continue
    if (Object.entries(labels).every(([label, v]) => key.includes(`${label}="${v}"`))) sum += value
  }
  return sum
}

const scrape = async (instance: Instance) => {
  const response = await instance.web.handler(new Request("http://localhost/metrics"))
  expect(response.status).toBe(200)
  expect(response.headers.get("content-type")).toMatch(/^text\/plain/)
  return parse(await response.text())
}

describe("GET /metrics counts requests by route and status, and admissions and rejections by reason", () => {
  let instance: Instance
  beforeAll(async () => {
    instance = await start()
  }, 60_000)
  afterAll(() => instance.web.dispose())

  it("after a scripted mix (successes, a 402, a 429, a 400) the counters moved by exactly those amounts", async () => {
    const funded = await account(instance, Money.usd(10))
    const broke = await account(instance, Money.zero)
    const route = "/api/v1/image/generate"
    const before = await scrape(instance)

    let successes = 0
    let limited = 0
    while (limited === 0 && successes < 200) {
      const response = await generate(instance, funded.key, image(`picture ${successes}`))
      if (response.status === 200) successes++
      else if (response.status === 429) limited++
      else throw new Error(`unexpected ${response.status}: ${await response.text()}`)
      await response.arrayBuffer()
    }
    const poor = await generate(instance, broke.key, image("unaffordable"))
    expect(poor.status).toBe(402)
    const invalid = await generate(instance, funded.key, { model: "local-renderer" })
    expect(invalid.status).toBe(400)

    const after = await scrape(instance)
    const delta = (name: string, labels: Record<string, string> = {}) => total(after, name, labels) - total(before, name, labels)
    expect(successes).toBeGreaterThan(0)
    expect(delta("tollgate_http_requests_total", { route, status: "200" })).toBe(successes)
    expect(delta("tollgate_http_requests_total", { route, status: "429" })).toBe(1)
    expect(delta("tollgate_http_requests_total", { route, status: "402" })).toBe(1)
    expect(delta("tollgate_http_requests_total", { route, status: "400" })).toBe(1)
    expect(delta("tollgate_http_request_duration_seconds_count", { route })).toBe(successes + 3)
    expect(delta("tollgate_admissions_total", { outcome: "admitted" })).toBe(successes)
    expect(delta("tollgate_admissions_total", { outcome: "rate_limit" })).toBe(1)
    expect(delta("tollgate_admissions_total", { outcome: "balance" })).toBe(1)
    expect(delta("tollgate_admissions_total", { outcome: "idempotency_conflict" })).toBe(0)
    expect(delta("tollgate_credits_captured_nano_usd_total")).toBe(await funded.spent())
    expect(await funded.spent()).toBeGreaterThan(0)
    expect(total(after, "tollgate_holds_open")).toBe(total(before, "tollgate_holds_open"))
  })
})

describe("TOLLGATE_METRICS decides who may scrape: off (no route, the default), open, or ADMIN keys of operator accounts only", () => {
  it("off: /metrics is a 404", async () => {
    const instance = await start(Logger.layer([]), { TOLLGATE_METRICS: "off" })
    try {
      expect((await instance.web.handler(new Request("http://localhost/metrics"))).status).toBe(404)
    } finally {
      await instance.web.dispose()
    }
  }, 60_000)

  it("admin: no key is a 401, an INFERENCE key a 403, a customer's ADMIN key a 403, an operator's ADMIN key gets the metrics", async () => {
    // Dev mode: the demo account is the operator's.
    const instance = await start(Logger.layer([]), { TOLLGATE_METRICS: "admin" })
    try {
      const scrapeWith = (key?: string) =>
        instance.web.handler(
          new Request("http://localhost/metrics", key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } })
        )
      const inference = await account(instance, Money.zero)
      const customer = await account(instance, Money.zero, "ADMIN")
      const operator = await account(instance, Money.zero, "ADMIN", "acct_demo")
      expect((await scrapeWith()).status).toBe(401)
      expect((await scrapeWith(inference.key)).status).toBe(403)
      const refused = await scrapeWith(customer.key)
      expect(refused.status).toBe(403)
      expect(await refused.json()).toEqual({ error: "Only operator accounts may read the metrics" })
      const scraped = await scrapeWith(operator.key)
      expect(scraped.status).toBe(200)
      expect(await scraped.text()).toContain("# TYPE tollgate_http_requests_total counter")
    } finally {
      await instance.web.dispose()
    }
  }, 60_000)
})

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe("Tracing: one span per request named by its route, with child spans for auth, admission, the backend call and the capture; the request's log line carries its trace id", () => {
  const exporter = new InMemorySpanExporter()
  const lines: Array<string> = []
  let instance: Instance
  beforeAll(async () => {
    instance = await start(Layer.mergeAll(
      Telemetry.layerWith(new SimpleSpanProcessor(exporter), "tollgate-test"),
      Logger.layer([]),
      RequestLog.layerWith((line) => {
        lines.push(line)
      })
    ))
  }, 60_000)
  afterAll(() => instance.web.dispose())

  it("an image generation is one request span whose descendants are the four pipeline steps", async () => {
    const { key } = await account(instance, Money.usd(1))
    exporter.reset()
    const response = await generate(instance, key, image("a traced lighthouse"))
    expect(response.status).toBe(200)
    await response.arrayBuffer()

    const steps = ["tollgate.auth", "tollgate.admission", "tollgate.backend", "tollgate.capture"]
    await expect.poll(() => exporter.getFinishedSpans().filter((span) => parentOf(span) === undefined)).toHaveLength(1)
    const spans = exporter.getFinishedSpans()
    const root = spans.find((span) => parentOf(span) === undefined)!
    const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]))
    const descendsFromRoot = (span: ReadableSpan): boolean => {
      const parent = parentOf(span)
      if (parent === undefined) return false
      return parent === root.spanContext().spanId || (byId.has(parent) && descendsFromRoot(byId.get(parent)!))
    }
    for (const name of steps) {
      const matching = spans.filter((span) => span.name === name)
      expect(matching, name).toHaveLength(1)
      expect(matching[0]!.spanContext().traceId).toBe(root.spanContext().traceId)
      expect(descendsFromRoot(matching[0]!), name).toBe(true)
    }
    const run = spans.find((span) => span.name === "Metered.run")!
    expect(parentOf(run)).toBe(root.spanContext().spanId)
    expect(root.name).toBe("POST /api/v1/image/generate")
    const logged = lines.map((line) => JSON.parse(line) as { annotations: Record<string, unknown> })
      .find((line) => line.annotations["route"] === "/api/v1/image/generate")
    expect(logged?.annotations["traceId"]).toBe(root.spanContext().traceId)
  })

  it("a route with a parameter names its span by the pattern, not the path", async () => {
    exporter.reset()
    const response = await instance.web.handler(
      new Request("http://localhost/api/v1/crypto/rpc/base", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
      })
    )
    await response.arrayBuffer()
    await expect.poll(() => exporter.getFinishedSpans().filter((span) => parentOf(span) === undefined)).toHaveLength(1)
    expect(exporter.getFinishedSpans().find((span) => parentOf(span) === undefined)!.name).toBe("POST /api/v1/crypto/rpc/:network")
  })
})

describe("Log lines carry the request id, principal, route, status and latency, never a key, signature, prompt or document", () => {
  const lines: Array<string> = []
  const capture = Layer.mergeAll(
    Logger.layer([Logger.map(Logger.formatJson, (line) => {
      lines.push(line)
    })]),
    RequestLog.layerWith((line) => {
      lines.push(line)
    }),
    Layer.succeed(References.MinimumLogLevel, "Trace")
  )
  let instance: Instance
  beforeAll(async () => {
    instance = await start(capture)
  }, 60_000)
  afterAll(() => instance.web.dispose())

  it("1,000 requests with keys, SIWX headers, prompts and documents leave none of them in the logs", async () => {
    const keys = await Promise.all(Array.from({ length: 20 }, () => account(instance, Money.usd(100)).then(({ key }) => key)))
    const signature = `0x${"5ea1".repeat(32)}`
    const siwx = Buffer.from(JSON.stringify({ message: "siwx-marker-message", signature })).toString("base64")
    const prompt = "prompt-marker-violet-heron"
    const documentText = "document-marker-copper-lantern"
    lines.length = 0

    // Each key sends 50 calls, within its image and text limits; one call in 50 is refused (20 in
    // all, no more), so the abuse guard never blocks the shared client address.
    const requestFor = (i: number) => {
      const key = keys[Math.floor(i / 50)]!
      const headers = { authorization: `Bearer ${key}`, "x-request-id": `req-${i}` }
      if (i % 100 === 49) {
        return new Request("http://localhost/api/v1/image/generate", {
          method: "POST",
          headers: { "content-type": "application/json", "sign-in-with-x": siwx, "x-request-id": `req-${i}` },
          body: JSON.stringify(image(`${prompt} ${i}`))
        })
      }
      if (i % 100 === 99) {
        return new Request("http://localhost/api/v1/image/generate", {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: JSON.stringify({ model: "local-renderer", prompt: 42, note: prompt })
        })
      }
      if (i % 50 < 10) {
        return new Request("http://localhost/api/v1/image/generate", {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: JSON.stringify(image(`${prompt} ${i}`))
        })
      }
      const body = new FormData()
      body.append("file", new Blob([`${documentText} line ${i}`]), "notes.txt")
      return new Request("http://localhost/api/v1/augment/text-parser", { method: "POST", headers, body })
    }

    const statuses: Array<number> = []
    for (let batch = 0; batch < 1000; batch += 50) {
      const answered = await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          instance.web.handler(requestFor(batch + j)).then(async (response) => {
            await response.arrayBuffer()
            return response.status
          }))
      )
      for (const status of answered) statuses.push(status)
    }
    statuses.forEach((status, i) => {
      expect(status, `request ${i}`).toBe(i % 100 === 49 ? 401 : i % 100 === 99 ? 400 : 200)
    })

    const requestLines = lines.map((line) => JSON.parse(line) as { message: unknown; annotations: Record<string, unknown> })
      .filter((entry) => entry.annotations["route"] !== undefined)
    expect(requestLines).toHaveLength(1000)
    expect(new Set(requestLines.map((entry) => entry.annotations["clientRequestId"]))).toEqual(
      new Set(Array.from({ length: 1000 }, (_, i) => `req-${i}`))
    )
    expect(new Set(requestLines.map((entry) => entry.annotations["requestId"])).size).toBe(1000)
    for (const entry of requestLines) {
      expect(Object.keys(entry.annotations).sort()).toEqual([
        "clientRequestId",
        "latencyMs",
        "method",
        "principalId",
        "requestId",
        "route",
        "status"
      ])
    }

    const log = lines.join("\n")
    expect(log.includes(`"clientRequestId":"req-999"`)).toBe(true)
    const keyParts = keys.flatMap((key) => [key, ...key.split(".").slice(1)])
    for (const secret of [...keyParts, siwx, signature, "siwx-marker-message", prompt, documentText]) {
      expect(log.includes(secret), secret.slice(0, 24)).toBe(false)
    }
  }, 60_000)
})

describe("The extraction pool reports its waiting documents and the workers it replaced after a kill", () => {
  it("three documents on one worker that is killed each time: three restarts, and nothing left waiting", async () => {
    const restarts = () => Effect.runPromise(Metric.value(WorkerPool.childRestarts)).then((state) => state.count)
    const before = await restarts()
    const refusals = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      // A zero time budget runs out long before 2 MB of text are tokenized: every job's worker is killed.
      const pool = yield* WorkerPool.make({ workers: 1, baseTimeoutMs: 0, timeoutMsPerMb: 0 })
      const bytes = new TextEncoder().encode("many words of a long document ".repeat(70_000))
      return yield* Effect.all([pool.run(bytes), pool.run(bytes), pool.run(bytes)].map(Effect.flip), { concurrency: "unbounded" })
    })))
    expect(refusals.map((refusal) => refusal.reason)).toEqual(["time-limit", "time-limit", "time-limit"])
    expect(await restarts() - before).toBe(3)
    expect((await Effect.runPromise(Metric.value(WorkerPool.queueDepth))).value).toBe(0)
  }, 60_000)
})

describe("Redis unreachable: the metered pipeline refuses with a 503 (fail-closed) and counts the error", () => {
  // Its own server, never a shared REDIS_URL: the test kills it.
  let redis: RedisServer.RedisServer
  let instance: Instance
  beforeAll(async () => {
    redis = await RedisServer.start()
    instance = await start(Logger.layer([]), { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis.url })
  }, 60_000)
  afterAll(async () => {
    await instance?.web.dispose()
    await redis?.stop()
  })

  it("a call while Redis is down is a 503, each failed store call counted under its service and policy", async () => {
    const { key } = await account(instance, Money.usd(1))
    expect((await generate(instance, key, image("before the outage"))).status).toBe(200)
    const before = await scrape(instance)
    if (!("kill" in redis)) throw new Error("no redis")
    await redis.kill()
    const refused = await generate(instance, key, image("during the outage"))
    expect(refused.status).toBe(503)
    const after = await scrape(instance)
    const added = (labels: Record<string, string>) =>
      total(after, "tollgate_redis_errors_total", labels) - total(before, "tollgate_redis_errors_total", labels)
    // The key's standing is checked before the body is read, and that check fails first: one failure.
    expect(added({ service: "auth" })).toBe(1)
    expect(added({ policy: "fail-closed" })).toBe(1)
  }, 60_000)
})
