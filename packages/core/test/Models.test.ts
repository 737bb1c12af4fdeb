import { Effect, Exit, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as Models from "../src/Models.ts"
import * as PricingEngine from "../src/PricingEngine.ts"

describe("Model list: the config is validated at start, every bad field reported", () => {
  it("the dev defaults are a valid config", () => {
    const decoded = Effect.runSync(Models.decodeConfig(JSON.parse(JSON.stringify(Models.defaults))))
    expect(decoded).toEqual(Models.defaults)
  })

  it("refuses bad fields and duplicate ids", () => {
    const [first] = Models.defaults
    const exit = Effect.runSyncExit(Models.decodeConfig([{ ...first, type: "hologram" }, first, first]))
    expect(Exit.isFailure(exit)).toBe(true)
    const dup = Effect.runSyncExit(Models.decodeConfig([first, first]))
    expect(Exit.isFailure(dup)).toBe(true)
    const bad = Effect.runSyncExit(Models.decodeConfig([{
      id: "img",
      name: "Img",
      router: "local",
      type: "image",
      sizing: "aspect-ratio",
      aspectRatios: ["wide"],
      resolutions: [],
      promptCharacterLimit: 9000,
      maxStyleReferences: -1,
      supportsOptimizePromptThinking: false,
      supportsWebSearch: false,
      qualities: [],
      upstreams: [{ baseUrl: "ftp://x" }]
    }]))
    expect(Exit.isFailure(bad)).toBe(true)
  })
})

describe("Model list: an alias resolves like the id it names; aliases and traits are unique", () => {
  it("get, text and image take an alias and answer the model under its own id", () => {
    const list = Models.make()
    expect(Option.map(list.get("gpt-4o"), (model) => model.id)).toEqual(Option.some("llama-3.3-70b"))
    expect(Effect.runSync(list.text("gpt-4o-mini")).id).toBe("qwen3-4b")
    expect(Effect.runSync(list.image("dall-e-3")).id).toBe("flux-dev")
  })

  it("refuses an alias used twice, an alias that is another model's id, and a trait two models of one type claim", () => {
    const text = (id: string, fields: Record<string, unknown>) => ({ id, type: "text", upstreams: [], ...fields })
    for (
      const models of [
        [text("a", { aliases: ["x"] }), text("b", { aliases: ["x"] })],
        [text("a", { aliases: ["b"] }), text("b", {})],
        [text("a", { traits: ["default"] }), text("b", { traits: ["default"] })]
      ]
    ) {
      expect(Exit.isFailure(Effect.runSyncExit(Models.decodeConfig(models))), JSON.stringify(models)).toBe(true)
    }
    const image = Models.defaults.find((model) => model.id === "flux-dev")!
    expect(Exit.isSuccess(Effect.runSyncExit(Models.decodeConfig([text("a", { traits: ["default"] }), image])))).toBe(true)
  })
})

describe("Model list: every default model has a price in the default price tables", () => {
  it.each(Models.defaults.map((m) => [m.id, m] as const))("%s", (_, model) => {
    const tables = PricingEngine.defaults
    const price = {
      text: tables.chat.models,
      image: tables.image.models,
      embedding: tables.media.embedding,
      tts: tables.media.speech,
      asr: tables.media.transcription,
      video: tables.media.video
    }[model.type][model.id]
    expect(price).toBeDefined()
  })
})

describe("Model list: one dev model of each other type, named as a dev model, served locally", () => {
  it.each(["embedding", "tts", "asr", "video"] as const)("%s", (type) => {
    const models = Models.defaults.filter((model) => model.type === type)
    expect(models).toHaveLength(1)
    expect(models[0]!.id).toMatch(/^dev-/)
    expect(models[0]!.name).toMatch(/^Dev /)
    expect(models[0]!.upstreams).toEqual([])
  })
})

describe("Model list: speech and transcription count against the audio kind, video against video", () => {
  it.each([["dev-tts", "audio"], ["dev-asr", "audio"], ["dev-embedding", "embedding"], ["dev-video", "video"]] as const)(
    "%s: %s",
    (id, kind) => {
      expect(Models.rateLimitOf(Option.getOrThrow(Models.make().get(id)))).toEqual({ kind })
    }
  )
})

describe("Model list: the other types are configured like chat models, with defaults for what they leave out", () => {
  it("decodes an embedding, a tts, an asr and a video model; refuses a video size that is not <w>x<h>", () => {
    const upstreams = [{ baseUrl: "http://127.0.0.1:9/v1" }]
    const models = Effect.runSync(Models.decodeConfig([
      { id: "e", type: "embedding", upstreams },
      { id: "s", type: "tts", upstreams, voices: ["alloy"] },
      { id: "a", type: "asr", upstreams },
      { id: "v", type: "video", upstreams, durations: [4], sizes: ["1280x720"] }
    ]))
    expect(models.map((model) => [model.id, model.name, model.router])).toEqual([
      ["e", "e", "openai-compatible"],
      ["s", "s", "openai-compatible"],
      ["a", "a", "openai-compatible"],
      ["v", "v", "openai-compatible"]
    ])
    expect(models[0]).toMatchObject({ dimensions: 1536, supportsDimensions: false, maxInputTokens: 8192 })
    expect(models[1]).toMatchObject({ responseFormats: ["mp3", "opus", "aac", "flac", "wav", "pcm"], maxInputCharacters: 4096 })
    expect(models[3]).toMatchObject({ jobTtlSeconds: 3600, promptCharacterLimit: 2500 })
    const bad = Effect.runSyncExit(Models.decodeConfig([{ id: "v", type: "video", upstreams, durations: [4], sizes: ["big"] }]))
    expect(Exit.isFailure(bad)).toBe(true)
  })
})

describe("Model list: lookups by type", () => {
  const list = Models.make()
  it("finds an image model, and refuses a text model or an unknown id with a 400 naming model", () => {
    expect(Effect.runSync(list.image("flux-dev")).sizing).toBe("pixel")
    for (const id of ["llama-3.3-70b", "nope"]) {
      const exit = Effect.runSyncExit(list.image(id))
      expect(Exit.isFailure(exit) && exit.cause.reasons[0]?._tag === "Fail" ? exit.cause.reasons[0].error.details?.model : undefined)
        .toEqual({ _errors: [expect.stringContaining(id)] })
    }
    expect(Effect.runSync(list.text("qwen3-4b")).supportsThinking).toBe(true)
    expect(Option.isNone(list.get("nope"))).toBe(true)
  })
})

describe("Model list: rate-limit class is the text tier for text models, the kind otherwise", () => {
  it("classifies", () => {
    const list = Models.make()
    expect(Models.rateLimitOf(Option.getOrThrow(list.get("llama-3.3-70b")))).toEqual({ kind: "text", modelTier: "M" })
    expect(Models.rateLimitOf(Option.getOrThrow(list.get("flux-dev")))).toEqual({ kind: "image" })
  })
})

describe("Model list: a deprecated model's responses carry the deprecation warning and date", () => {
  it("adds both headers for a deprecated model only", () => {
    const list = Models.make()
    expect(Models.headersOf(Option.getOrThrow(list.get("sd-3.5")))).toMatchObject({
      "x-service-model-id": "sd-3.5",
      "x-service-model-deprecation-date": "2027-01-31",
      "x-service-model-deprecation-warning": expect.stringContaining("deprecated")
    })
    expect(Models.headersOf(Option.getOrThrow(list.get("flux-dev")))).not.toHaveProperty("x-service-model-deprecation-date")
  })
})

describe("Model list: the config section replaces the dev defaults; absent, the defaults apply", () => {
  const run = (input: unknown) =>
    Effect.runSyncExit(
      Effect.map(Models.ModelList, (list) => list.all.map((m) => m.id)).pipe(
        Effect.provide(Models.layerConfig(input))
      )
    )
  it("uses the defaults when absent, the given list when present, and fails on a bad one", () => {
    expect(run(undefined)).toEqual(Exit.succeed(Models.defaults.map((m) => m.id)))
    const [first] = Models.defaults
    expect(run([first])).toEqual(Exit.succeed([first!.id]))
    expect(Exit.isFailure(run([{ id: "x" }]))).toBe(true)
  })
})
