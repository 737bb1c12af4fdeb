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

describe("Model list: every default model has a price in the default price tables", () => {
  it.each(Models.defaults.map((m) => [m.id, m] as const))("%s", (_, model) => {
    const tables = PricingEngine.defaults
    const price = model.type === "text" ? tables.chat.models[model.id] : tables.image.models[model.id]
    expect(price).toBeDefined()
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
    Effect.runSyncExit(Effect.map(Models.ModelList, (list) => list.all.map((m) => m.id)).pipe(
      Effect.provide(Models.layerConfig(input))
    ))
  it("uses the defaults when absent, the given list when present, and fails on a bad one", () => {
    expect(run(undefined)).toEqual(Exit.succeed(Models.defaults.map((m) => m.id)))
    const [first] = Models.defaults
    expect(run([first])).toEqual(Exit.succeed([first!.id]))
    expect(Exit.isFailure(run([{ id: "x" }]))).toBe(true)
  })
})
