import { Errors, ImageRequest, Models } from "@tollgate/core"
import { Effect, Exit, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import Sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as ImageBackend from "../src/ImageBackend.ts"
import * as PromptEnhancer from "../src/PromptEnhancer.ts"

/** A fake OpenAI-compatible server: records what it was sent and answers what the test scripted. */
interface Fake {
  readonly url: string
  readonly requests: Array<{ path: string; authorization: string | undefined; body: Record<string, unknown> }>
  answer: (path: string, body: Record<string, unknown>) => Promise<{ status: number; body: unknown }>
  readonly close: () => Promise<void>
}

const startFake = async (): Promise<Fake> => {
  const fake: Fake = {
    url: "",
    requests: [],
    answer: async () => ({ status: 500, body: { error: { message: "unscripted" } } }),
    close: async () => {}
  }
  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>
      fake.requests.push({ path: req.url ?? "", authorization: req.headers.authorization, body })
      const answer = await fake.answer(req.url ?? "", body)
      const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body)
      res.writeHead(answer.status, { "content-type": "application/json" })
      res.end(text)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  })
}

const pngOf = (width: number, height: number, color: string) =>
  Sharp({ create: { width, height, channels: 3, background: color } }).png().toBuffer()

let fake: Fake
let dead: Fake
beforeAll(async () => {
  fake = await startFake()
  dead = await startFake()
  dead.answer = async () => ({ status: 503, body: { error: { message: "overloaded" } } })
})
afterAll(async () => {
  await fake.close()
  await dead.close()
})

const upstreamModel = (upstreams: ReadonlyArray<Models.Upstream>): Models.ImageModel => ({
  id: "remote-image",
  name: "Remote Image",
  type: "image",
  router: "openai-compatible",
  sizing: "aspect-ratio",
  aspectRatios: ["1:1", "3:2"],
  resolutions: [],
  promptCharacterLimit: 4000,
  maxStyleReferences: 0,
  supportsOptimizePromptThinking: false,
  supportsWebSearch: false,
  qualities: ["low", "medium", "high"],
  defaultQuality: "high",
  upstreams
})

const requestOf = (body: Record<string, unknown>, models: ReadonlyArray<Models.Model> = Models.defaults) =>
  Effect.runSync(ImageRequest.decode(Models.make(models), body))

const local = ImageBackend.makeLocal()
const generateLocal = (body: Record<string, unknown>) => {
  const request = requestOf(body)
  return Effect.runPromise(local.generate(request, request.prompt))
}

const remote = (upstreams: ReadonlyArray<Models.Upstream>, body: Record<string, unknown>) => {
  const model = upstreamModel(upstreams)
  const request = requestOf({ model: model.id, ...body }, [...Models.defaults, model])
  return Effect.runPromiseExit(
    Effect.flatMap(ImageBackend.ImageBackend, (backend) => backend.generate(request, request.prompt)).pipe(
      Effect.provide(ImageBackend.layer({ timeout: "5 seconds" }).pipe(Layer.provide(FetchHttpClient.layer)))
    )
  )
}

const success = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isFailure(exit)) throw new Error(`expected success: ${String(exit.cause)}`)
  return exit.value
}
const failure = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit)) throw new Error("expected failure")
  const reason = exit.cause.reasons[0]
  if (reason?._tag !== "Fail") throw new Error(`expected a typed failure: ${String(exit.cause)}`)
  return reason.error
}

describe("Local renderer: images have the requested format and size", () => {
  it.each(
    [
      ["jpeg", 1024, 1024],
      ["png", 640, 480],
      ["webp", 300, 1280]
    ] as const
  )("%s %ix%i", async (format, width, height) => {
    const generation = await generateLocal({ model: "local-renderer", prompt: "a red fox", format, width, height, seed: 7 })
    expect(generation.contentType).toBe(`image/${format}`)
    const meta = await Sharp(generation.images[0]!).metadata()
    expect(meta).toMatchObject({ format, width, height })
  })

  it("sizes aspect-ratio and resolution-tier models from their fields", async () => {
    const generation = await generateLocal({ model: "nano-banana-pro", prompt: "a", aspect_ratio: "16:9", format: "png" })
    expect(await Sharp(generation.images[0]!).metadata()).toMatchObject({ format: "png", width: 1024, height: 576 })
  })
})

describe("Local renderer: variants return that many images", () => {
  it.each([1, 2, 4])("%i", async (variants) => {
    const generation = await generateLocal({ model: "local-renderer", prompt: "boats", variants, width: 128, height: 128 })
    expect(generation.images).toHaveLength(variants)
    expect(new Set(generation.images.map((image) => Buffer.from(image).toString("base64"))).size).toBe(variants)
  })
})

describe("Local renderer: deterministic from seed and prompt", () => {
  it("the same request gives the same bytes; another seed or prompt gives others", async () => {
    const body = { model: "local-renderer", prompt: "a castle", seed: 42, width: 256, height: 256, format: "png" }
    const a = await generateLocal(body)
    const b = await generateLocal(body)
    expect(Buffer.compare(a.images[0]!, b.images[0]!)).toBe(0)
    const c = await generateLocal({ ...body, seed: 43 })
    const d = await generateLocal({ ...body, prompt: "a tower" })
    expect(Buffer.compare(a.images[0]!, c.images[0]!)).not.toBe(0)
    expect(Buffer.compare(a.images[0]!, d.images[0]!)).not.toBe(0)
  })
})

describe("Local renderer: a watermark unless hide_watermark", () => {
  it("hiding the watermark changes only its corner", async () => {
    const body = { model: "local-renderer", prompt: "fields", seed: 9, width: 240, height: 240, format: "png" }
    const shown = await generateLocal(body)
    const hidden = await generateLocal({ ...body, hide_watermark: true })
    const region = (image: Uint8Array, left: number, top: number) =>
      Sharp(image).extract({ left, top, width: 40, height: 20 }).raw().toBuffer()
    expect(Buffer.compare(await region(shown.images[0]!, 0, 0), await region(hidden.images[0]!, 0, 0))).toBe(0)
    expect(Buffer.compare(await region(shown.images[0]!, 200, 210), await region(hidden.images[0]!, 200, 210))).not.toBe(0)
  })
})

describe("EXIF with the generation info only when embed_exif_metadata is set", () => {
  it.each(["jpeg", "png", "webp"] as const)("%s", async (format) => {
    const body = { model: "local-renderer", prompt: "a quiet lake", seed: 5, format, width: 128, height: 128 }
    const without = await generateLocal(body)
    expect((await Sharp(without.images[0]!).metadata()).exif).toBeUndefined()
    const withExif = await generateLocal({ ...body, embed_exif_metadata: true })
    const exif = (await Sharp(withExif.images[0]!).metadata()).exif
    expect(exif).toBeDefined()
    const text = Buffer.from(exif!).toString("latin1")
    expect(text).toContain("a quiet lake")
    expect(text).toContain("\"seed\":5")
  })
})

const stdev = async (image: Uint8Array) => {
  const { channels } = await Sharp(image).stats()
  return channels.reduce((sum, channel) => sum + channel.stdev, 0)
}

describe("Content safety: with safe_mode on, an image flagged adult is blurred", () => {
  const body = { model: "local-renderer", prompt: "nude figure study", seed: 3, width: 256, height: 256, format: "png" }

  it("blurs and says so with safe mode on, not with it off", async () => {
    const safe = await generateLocal(body)
    const unsafe = await generateLocal({ ...body, safe_mode: false })
    expect(safe.flags).toEqual({ isBlurred: true, isContentViolation: false, isAdultModelContentViolation: false, containsMinor: false })
    expect(unsafe.flags.isBlurred).toBe(false)
    expect(await stdev(safe.images[0]!)).toBeLessThan(await stdev(unsafe.images[0]!))
  })

  it("a harmless prompt is not blurred", async () => {
    const generation = await generateLocal({ ...body, prompt: "a bowl of fruit" })
    expect(generation.flags.isBlurred).toBe(false)
  })

  it("a content violation is flagged and blurred even with safe mode off", async () => {
    const generation = await generateLocal({ ...body, prompt: "explicit child", safe_mode: false })
    expect(generation.flags).toMatchObject({ isBlurred: true, isContentViolation: true, containsMinor: true })
  })
})

describe("OpenAI-compatible adapter: draws through POST /images/generations of the model's upstream", () => {
  it("sends the OpenAI request and returns the images in the asked format and size", async () => {
    fake.requests.length = 0
    fake.answer = async (_path, body) => ({
      status: 200,
      body: {
        created: 1,
        data: await Promise.all(Array.from({ length: Number(body.n) }, async (_, i) => ({
          b64_json: (await pngOf(1024, 1024, i === 0 ? "#ff0000" : "#0000ff")).toString("base64")
        })))
      }
    })
    const generation = success(
      await remote(
        [{ baseUrl: fake.url, apiKey: "sk-upstream", model: "upstream-name" }],
        { prompt: "a red square", aspect_ratio: "3:2", quality: "low", variants: 2, format: "jpeg" }
      )
    )
    expect(fake.requests).toHaveLength(1)
    expect(fake.requests[0]).toMatchObject({
      path: "/v1/images/generations",
      authorization: "Bearer sk-upstream",
      body: { model: "upstream-name", prompt: "a red square", n: 2, size: "1024x683", quality: "low", response_format: "b64_json" }
    })
    expect(generation.images).toHaveLength(2)
    for (const image of generation.images) {
      expect(await Sharp(image).metadata()).toMatchObject({ format: "jpeg", width: 1024, height: 683 })
    }
    expect(generation.flags.isBlurred).toBe(false)
  })

  it("honours the upstream's content flags: an adult image is blurred in safe mode", async () => {
    fake.answer = async () => ({
      status: 200,
      body: { data: [{ b64_json: (await pngOf(64, 64, "#ffcc00")).toString("base64"), content_flags: { adult: true } }] }
    })
    const generation = success(await remote([{ baseUrl: fake.url }], { prompt: "a" }))
    expect(generation.flags).toMatchObject({ isBlurred: true, isContentViolation: false })
  })

  it("a content-policy refusal is the client's 400", async () => {
    fake.answer = async () => ({
      status: 400,
      body: { error: { code: "content_policy_violation", message: "Your request was rejected" } }
    })
    const error = failure(await remote([{ baseUrl: fake.url }], { prompt: "a" }))
    expect(error).toBeInstanceOf(Errors.InvalidRequest)
  })

  it("a failing upstream is skipped for the next one", async () => {
    fake.answer = async () => ({ status: 200, body: { data: [{ b64_json: (await pngOf(32, 32, "#00ff00")).toString("base64") }] } })
    const generation = success(await remote([{ baseUrl: dead.url }, { baseUrl: fake.url }], { prompt: "a", format: "png" }))
    expect(generation.images).toHaveLength(1)
  })

  it("no upstream answering well is a 502", async () => {
    fake.answer = async () => ({ status: 200, body: "not json" })
    expect(failure(await remote([{ baseUrl: dead.url }], { prompt: "a" }))).toBeInstanceOf(Errors.BadGateway)
    expect(failure(await remote([{ baseUrl: fake.url }], { prompt: "a" }))).toBeInstanceOf(Errors.BadGateway)
    fake.answer = async () => ({ status: 200, body: { data: [] } })
    expect(failure(await remote([{ baseUrl: fake.url }], { prompt: "a" }))).toBeInstanceOf(Errors.BadGateway)
  })
})

describe("Prompt enhancement: deterministic in dev, through a chat model when configured, within the model's limit", () => {
  const flux = requestOf({ model: "flux-dev", prompt: "a" }).model

  it("the local enhancer rewrites the same prompt the same way and respects the limit", () => {
    const a = PromptEnhancer.enhanceLocally("a cat on a roof", flux)
    expect(a).toBe(PromptEnhancer.enhanceLocally("a cat on a roof", flux))
    expect(a.startsWith("a cat on a roof, ")).toBe(true)
    expect(PromptEnhancer.enhanceLocally("word ".repeat(500), flux).length).toBeLessThanOrEqual(flux.promptCharacterLimit)
  })

  it("the chat enhancer asks an OpenAI-compatible chat model, without thinking when told", async () => {
    fake.requests.length = 0
    fake.answer = async () => ({ status: 200, body: { choices: [{ message: { role: "assistant", content: " a cat, moonlit " } }] } })
    const enhance = (thinking: boolean) =>
      Effect.runPromise(
        Effect.flatMap(PromptEnhancer.PromptEnhancer, (enhancer) => enhancer.enhance("a cat", { model: flux, thinking })).pipe(
          Effect.provide(
            PromptEnhancer.layerChat({ upstreams: [{ baseUrl: fake.url }], model: "qwen3-4b" }).pipe(
              Layer.provide(FetchHttpClient.layer)
            )
          )
        )
      )
    expect(await enhance(true)).toBe("a cat, moonlit")
    expect(await enhance(false)).toBe("a cat, moonlit")
    expect(fake.requests.map((r) => r.path)).toEqual(["/v1/chat/completions", "/v1/chat/completions"])
    expect(fake.requests[0]!.body).toMatchObject({ model: "qwen3-4b", messages: [{ role: "system" }, { role: "user", content: "a cat" }] })
    expect(fake.requests[0]!.body).not.toHaveProperty("service_parameters")
    expect(fake.requests[1]!.body).toMatchObject({ service_parameters: { disable_thinking: true } })
  })
})
