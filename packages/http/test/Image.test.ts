/**
 * `POST /image/generate` and `GET /models` through the real app and pipeline (memory Auth,
 * RateLimiter, CreditLedger, IdempotencyStore), the local image renderer and the local prompt
 * enhancer.
 */
import { ImageBackend, PromptEnhancer } from "@tollgate/backends"
import { Models, Money, PricingEngine } from "@tollgate/core"
import { RateWindow } from "@tollgate/testkit"
import { Effect, Exit, Layer, Scope } from "effect"
import { FetchHttpClient } from "effect/http"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Zlib from "node:zlib"
import Sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as ImageRoute from "../src/routes/Image.ts"
import * as ModelsRoute from "../src/routes/Models.ts"
import * as TestApp from "./support/TestApp.ts"

const GRANT = Money.usd(10)
const tables = PricingEngine.defaults
const price = (model: string, quality: PricingEngine.ImageQuality = "high") => tables.image.models[model]!.perImage[quality]!

const scope = Effect.runSync(Scope.make())
let web: Handlers.WebHandler
let defaultContext: Awaited<ReturnType<typeof buildContext>>

const buildContext = (
  models: ReadonlyArray<Models.Model> = Models.defaults,
  backend: Layer.Layer<ImageBackend.ImageBackend> = ImageBackend.layerLocal
) =>
  TestApp.buildContext(
    TestApp.layerMetered(Layer.mergeAll(PricingEngine.layer(), Models.layer(models), backend, PromptEnhancer.layerLocal)),
    scope
  )

const newAccount = (context: Awaited<ReturnType<typeof buildContext>> = defaultContext) =>
  TestApp.seedAccount(context, { label: "image", grant: GRANT })

let alice: Awaited<ReturnType<typeof newAccount>>

beforeAll(async () => {
  defaultContext = await buildContext()
  web = Handlers.toWebHandler(
    App.layer([ImageRoute.route, ModelsRoute.list]).pipe(Layer.provide(Layer.succeedContext(defaultContext)))
  )
  alice = await newAccount()
})
afterAll(async () => {
  await web.dispose()
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

const generate = (
  body: unknown,
  headers: Record<string, string> = { authorization: alice.authorization },
  handler: Handlers.WebHandler = web
) =>
  handler.handler(
    new Request("http://localhost/api/v1/image/generate", {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
  )

interface ImageBody {
  readonly id: string
  readonly images: ReadonlyArray<string>
  readonly timing: Record<string, number>
  readonly request: unknown
}

describe("POST /image/generate answers {id, images, timing, request} with base64 images", () => {
  it("draws a webp 1024x1024 by default, charges the model's price, and echoes the request", async () => {
    const before = await alice.charged()
    const body = { model: "local-renderer", prompt: "a lighthouse at dusk", seed: 11 }
    const response = await generate(body)
    expect(response.status).toBe(200)
    const json = await response.json() as ImageBody
    expect(json.id).toBe(response.headers.get("x-request-id"))
    expect(json.request).toEqual(body)
    expect(json.images).toHaveLength(1)
    expect(Object.keys(json.timing).sort()).toEqual(["inferenceDuration", "inferencePreprocessingTime", "inferenceQueueTime", "total"])
    expect(await Sharp(Buffer.from(json.images[0]!, "base64")).metadata()).toMatchObject({ format: "webp", width: 1024, height: 1024 })
    expect(await alice.charged() - before).toBe(price("local-renderer"))
  })

  it("variants return that many images, each charged", async () => {
    const before = await alice.charged()
    const response = await generate({ model: "local-renderer", prompt: "pebbles", variants: 3, width: 64, height: 48, format: "png" })
    const json = await response.json() as ImageBody
    expect(json.images).toHaveLength(3)
    for (const image of json.images) {
      expect(await Sharp(Buffer.from(image, "base64")).metadata()).toMatchObject({ format: "png", width: 64, height: 48 })
    }
    expect(await alice.charged() - before).toBe(3 * price("local-renderer"))
  })

  it("JSON answers are compressed when the client accepts it", async () => {
    const response = await generate({ model: "local-renderer", prompt: "dunes", width: 64, height: 64 }, {
      authorization: alice.authorization,
      "accept-encoding": "gzip"
    })
    expect(response.headers.get("content-encoding")).toBe("gzip")
    const json = JSON.parse(Zlib.gunzipSync(Buffer.from(await response.arrayBuffer())).toString("utf8")) as ImageBody
    expect(json.images).toHaveLength(1)
  })
})

describe("POST /image/generate with return_binary answers the raw image, never compressed", () => {
  it.each(["jpeg", "png", "webp"] as const)("%s", async (format) => {
    const response = await generate({ model: "flux-dev", prompt: "a kite", return_binary: true, format, width: 320, height: 200 }, {
      authorization: alice.authorization,
      "accept-encoding": "gzip, br"
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe(`image/${format}`)
    expect(response.headers.get("content-encoding")).toBeNull()
    const bytes = Buffer.from(await response.arrayBuffer())
    expect(await Sharp(bytes).metadata()).toMatchObject({ format, width: 320, height: 200 })
  })
})

describe("Inference responses carry the model and content-safety headers", () => {
  it("model id, name and router, and the four flags as true/false", async () => {
    const response = await generate({ model: "flux-dev", prompt: "a kite", width: 32, height: 32 })
    expect(response.headers.get("x-service-model-id")).toBe("flux-dev")
    expect(response.headers.get("x-service-model-name")).toBe("FLUX.1 [dev]")
    expect(response.headers.get("x-service-model-router")).toBe("local")
    for (const name of ["is-blurred", "is-content-violation", "is-adult-model-content-violation", "contains-minor"]) {
      expect(response.headers.get(`x-service-${name}`)).toBe("false")
    }
    expect(response.headers.get("x-service-model-deprecation-date")).toBeNull()
  })

  it("an adult image with safe_mode on is blurred and flagged", async () => {
    const response = await generate({ model: "flux-dev", prompt: "nude figure", width: 32, height: 32 })
    expect(response.headers.get("x-service-is-blurred")).toBe("true")
  })

  it("a deprecated model's responses carry the deprecation warning and date", async () => {
    const response = await generate({ model: "sd-3.5", prompt: "a kite", width: 32, height: 32 })
    expect(response.status).toBe(200)
    expect(response.headers.get("x-service-model-deprecation-date")).toBe("2027-01-31")
    expect(response.headers.get("x-service-model-deprecation-warning")).toContain("deprecated")
  })
})

describe("enhance_prompt rewrites the prompt first, charges extra, and returns it URL-encoded", () => {
  it("sends x-service-enhanced-prompt and charges the enhancement", async () => {
    const before = await alice.charged()
    const prompt = "a café & a cat"
    const response = await generate({ model: "local-renderer", prompt, enhance_prompt: true, width: 32, height: 32 })
    expect(response.status).toBe(200)
    const header = response.headers.get("x-service-enhanced-prompt")!
    expect(header).not.toContain(" ")
    const enhanced = decodeURIComponent(header)
    expect(enhanced.startsWith(`${prompt}, `)).toBe(true)
    expect(await alice.charged() - before).toBe(price("local-renderer") + tables.image.enhancePrompt)
    const plain = await generate({ model: "local-renderer", prompt, width: 32, height: 32 })
    expect(plain.headers.get("x-service-enhanced-prompt")).toBeNull()
  })
})

describe("Image prices follow model, quality and variants", () => {
  it.each([["low", 1], ["high", 2]] as const)("gpt-image-1 at %s x%i", async (quality, variants) => {
    const before = await alice.charged()
    const response = await generate({ model: "gpt-image-1", prompt: "a tree", quality, variants })
    expect(response.status).toBe(200)
    expect(await alice.charged() - before).toBe(variants * price("gpt-image-1", quality))
  })
})

describe("Bad image requests are a 400 DetailedError, with nothing held or charged", () => {
  it("names every bad field", async () => {
    const before = await alice.charged()
    const response = await generate({ model: "gpt-image-1", prompt: "", width: 512, format: "gif", variants: 9 })
    expect(response.status).toBe(400)
    const json = await response.json() as { error: string; details: Record<string, { _errors: Array<string> }> }
    expect(json.error).toEqual(expect.any(String))
    expect(Object.keys(json.details).filter((k) => k !== "_errors").sort()).toEqual(["format", "prompt", "variants", "width"])
    expect(json.details.width!._errors).toEqual([expect.stringContaining("aspect-ratio")])
    expect(await alice.charged()).toBe(before)
  })

  it("an unknown model names model; a body that is not JSON is a 400", async () => {
    const unknown = await generate({ model: "nope", prompt: "a" })
    expect(unknown.status).toBe(400)
    expect((await unknown.json() as { details: object }).details).toHaveProperty("model")
    expect((await generate("{not json")).status).toBe(400)
  })

  it("a valid request without credentials is the 402 discovery answer and one with a bad key a 401", async () => {
    const anonymous = await generate({ model: "local-renderer", prompt: "a" }, {})
    expect(anonymous.status).toBe(402)
    expect(await anonymous.json()).toEqual(TestApp.operationDiscoveryBody("/api/v1/image/generate"))
    expect((await generate({ model: "local-renderer", prompt: "a" }, { authorization: "Bearer nope" })).status).toBe(401)
  })
})

describe("The image kind is limited to 20 requests per minute by default", () => {
  it("the 21st request in a minute is a 429 and is not charged", async () => {
    const bob = await newAccount()
    const body = { model: "local-renderer", prompt: "dot", width: 8, height: 8, format: "png" }
    await RateWindow.fresh()
    for (let i = 0; i < 20; i++) {
      expect((await generate(body, { authorization: bob.authorization })).status).toBe(200)
    }
    const charged = await bob.charged()
    const refused = await generate(body, { authorization: bob.authorization })
    expect(refused.status).toBe(429)
    expect(await bob.charged()).toBe(charged)
  })
})

describe("GET /models lists the model list in the OpenAI list shape with a model_spec", () => {
  const list = async (query = "") => {
    const response = await web.handler(new Request(`http://localhost/api/v1/models${query}`))
    return { response, json: await response.json() as { object: string; data: Array<Record<string, any>> } }
  }

  it("lists every model with its type, spec, price and rate-limit class, and never an upstream", async () => {
    const { json, response } = await list("?type=all")
    expect(response.status).toBe(200)
    expect(json.object).toBe("list")
    expect(json.data.map((m) => m.id)).toEqual(Models.defaults.map((m) => m.id))
    for (const entry of json.data) {
      expect(entry).toMatchObject({ object: "model", owned_by: "tollgate", created: expect.any(Number) })
      expect(entry.model_spec.pricing).toBeDefined()
    }
    const gpt = json.data.find((m) => m.id === "gpt-image-1")!
    expect(gpt.model_spec).toMatchObject({
      sizing: "aspect-ratio",
      constraints: { promptCharacterLimit: 4000, maxStyleReferences: 4 },
      qualities: ["low", "medium", "high"],
      defaultQuality: "high",
      pricing: { generation: { low: { usd: 0.02 } } },
      rateLimit: { kind: "image" }
    })
    const llama = json.data.find((m) => m.id === "llama-3.3-70b")!
    expect(llama.model_spec).toMatchObject({ availableContextTokens: 131_072, rateLimit: { kind: "text", modelTier: "M" } })
    expect(JSON.stringify(json)).not.toContain("upstreams")
    expect(json.data.find((m) => m.id === "sd-3.5")!.model_spec.deprecation).toMatchObject({ date: "2027-01-31" })
  })

  it("filters by type, and refuses an unknown type naming it", async () => {
    const { json } = await list("?type=image")
    expect(json.data.every((m) => m.type === "image")).toBe(true)
    expect(json.data.length).toBe(Models.defaults.filter((m) => m.type === "image").length)
    const bad = await list("?type=hologram")
    expect(bad.response.status).toBe(400)
    expect(bad.json).toHaveProperty("details.type._errors")
  })
})

describe("A model with upstreams is drawn by its OpenAI-compatible images API, through the same pipeline", () => {
  let upstream: Http.Server
  let answer: () => Promise<{ status: number; body: unknown }>
  let remote: Handlers.WebHandler
  let carol: Awaited<ReturnType<typeof newAccount>>

  beforeAll(async () => {
    upstream = Http.createServer((req, res) => {
      req.resume()
      req.on("end", async () => {
        const { body, status } = await answer()
        res.writeHead(status, { "content-type": "application/json" })
        res.end(JSON.stringify(body))
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
    const baseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
    const models = Models.defaults.map((model) =>
      model.id === "gpt-image-1" ? { ...model, router: "openai", upstreams: [{ baseUrl }] } : model
    )
    const context = await buildContext(models, ImageBackend.layer({ timeout: "5 seconds" }).pipe(Layer.provide(FetchHttpClient.layer)))
    remote = Handlers.toWebHandler(App.layer([ImageRoute.route]).pipe(Layer.provide(Layer.succeedContext(context))))
    carol = await newAccount(context)
  })
  afterAll(async () => {
    await remote.dispose()
    await new Promise((resolve) => upstream.close(resolve))
  })

  it("answers the upstream's image in the asked format and size, charged", async () => {
    const png = await Sharp({ create: { width: 1024, height: 1024, channels: 3, background: "#808080" } }).png().toBuffer()
    answer = async () => ({ status: 200, body: { data: [{ b64_json: png.toString("base64") }] } })
    const response = await generate(
      { model: "gpt-image-1", prompt: "grey", aspect_ratio: "3:2", format: "jpeg", return_binary: true, quality: "medium" },
      { authorization: carol.authorization },
      remote
    )
    expect(response.status).toBe(200)
    expect(response.headers.get("x-service-model-router")).toBe("openai")
    expect(await Sharp(Buffer.from(await response.arrayBuffer())).metadata()).toMatchObject({ format: "jpeg", width: 1024, height: 683 })
    expect(await carol.charged()).toBe(price("gpt-image-1", "medium"))
  })

  it("an upstream refusal is a 400 and a failing upstream a 502, neither charged", async () => {
    const before = await carol.charged()
    answer = async () => ({ status: 400, body: { error: { code: "content_policy_violation", message: "no" } } })
    expect((await generate({ model: "gpt-image-1", prompt: "x" }, { authorization: carol.authorization }, remote)).status).toBe(400)
    answer = async () => ({ status: 500, body: { error: { message: "down" } } })
    expect((await generate({ model: "gpt-image-1", prompt: "x" }, { authorization: carol.authorization }, remote)).status).toBe(502)
    expect(await carol.charged()).toBe(before)
  })
})
