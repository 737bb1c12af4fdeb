import { Effect, Exit, Random } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Errors from "../src/Errors.ts"
import * as ImageRequest from "../src/ImageRequest.ts"
import * as Models from "../src/Models.ts"

const list = Models.make()
const imageModels = Models.defaults.filter((m): m is Models.ImageModel => m.type === "image")
const modelOf = (id: string) => imageModels.find((m) => m.id === id)!

const decode = (body: unknown) => Effect.runSyncExit(ImageRequest.decode(list, body))

const succeed = (body: unknown): ImageRequest.ImageRequest => {
  const exit = decode(body)
  if (Exit.isFailure(exit)) throw new Error(`expected success, got ${JSON.stringify(exit.cause)}`)
  return exit.value
}

const fail = (body: unknown): Errors.InvalidRequest => {
  const exit = decode(body)
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure for ${JSON.stringify(body).slice(0, 300)}`)
  const error = exit.cause.reasons[0]
  if (error?._tag !== "Fail" || error.error._tag !== "InvalidRequest") throw new Error("expected InvalidRequest")
  return error.error
}

/** The fields a 400 names: the keys of `details` other than its own `_errors`. */
const namedFields = (error: Errors.InvalidRequest) => Object.keys(error.details ?? {}).filter((key) => key !== "_errors").sort()

type Body = Record<string, unknown>

const optionalFields = (model: Models.ImageModel) => {
  const sizing: Record<string, fc.Arbitrary<unknown>> = model.sizing === "pixel"
    ? { width: fc.integer({ min: 1, max: 1280 }), height: fc.integer({ min: 1, max: 1280 }) }
    : model.sizing === "aspect-ratio"
    ? { aspect_ratio: fc.constantFrom(...model.aspectRatios) }
    : { aspect_ratio: fc.constantFrom(...model.aspectRatios), resolution: fc.constantFrom(...model.resolutions) }
  return fc.record({
    negative_prompt: fc.string({ maxLength: 200 }),
    cfg_scale: fc.double({ min: 0, max: 20, minExcluded: true, noNaN: true }),
    embed_exif_metadata: fc.boolean(),
    format: fc.constantFrom("jpeg", "png", "webp"),
    ...sizing,
    quality: fc.constantFrom("low", "medium", "high"),
    hide_watermark: fc.boolean(),
    lora_strength: fc.integer({ min: 0, max: 100 }),
    return_binary: fc.boolean(),
    variants: fc.integer({ min: 1, max: 4 }),
    safe_mode: fc.boolean(),
    seed: fc.integer({ min: -999_999_999, max: 999_999_999 }),
    steps: fc.integer({ min: 1, max: 50 }),
    style_preset: fc.string({ maxLength: 40 }),
    style_references: fc.array(fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }), {
      maxLength: Math.min(model.maxStyleReferences, 5)
    }),
    enhance_prompt: fc.boolean(),
    disable_prompt_optimization_thinking: fc.boolean(),
    enable_web_search: fc.boolean(),
    inpaint: fc.jsonValue({ maxDepth: 2 })
  }, { requiredKeys: [] })
}

const validRequest: fc.Arbitrary<{ model: Models.ImageModel; body: Body }> = fc.constantFrom(...imageModels).chain((model) =>
  fc.record({
    prompt: fc.oneof(
      fc.string({ minLength: 1, maxLength: 300 }),
      fc.integer({ min: 1, max: model.promptCharacterLimit }).map((n) => "p".repeat(n))
    ),
    optional: optionalFields(model)
  }).map(({ optional, prompt }) => {
    const body: Body = { model: model.id, prompt, ...optional }
    if (body.return_binary === true) delete body.variants
    return { model, body }
  })
)

interface Breakage {
  readonly field: string
  readonly applies: (model: Models.ImageModel) => boolean
  readonly bad: fc.Arbitrary<(body: Body, model: Models.ImageModel) => Body>
}

const set = (field: string, values: fc.Arbitrary<unknown>) => values.map((value) => (body: Body) => ({ ...body, [field]: value }))
const always = () => true
const pixel = (model: Models.ImageModel) => model.sizing === "pixel"
const notPixel = (model: Models.ImageModel) => model.sizing !== "pixel"

const breakages: ReadonlyArray<Breakage> = [
  { field: "model", applies: always, bad: set("model", fc.constantFrom("no-such-model", "llama-3.3-70b", 42)) },
  {
    field: "model",
    applies: always,
    bad: fc.constant((body: Body) => {
      const { model: _, ...rest } = body
      return rest
    })
  },
  { field: "prompt", applies: always, bad: set("prompt", fc.constantFrom("", "x".repeat(7501), 12, null)) },
  {
    field: "prompt",
    applies: (model) => model.promptCharacterLimit < 7500,
    bad: fc.constant((body: Body, model: Models.ImageModel) => ({ ...body, prompt: "y".repeat(model.promptCharacterLimit + 1) }))
  },
  { field: "negative_prompt", applies: always, bad: set("negative_prompt", fc.constantFrom("n".repeat(7501), 3)) },
  { field: "cfg_scale", applies: always, bad: set("cfg_scale", fc.constantFrom(0, -1, 20.5, 100, "7")) },
  { field: "embed_exif_metadata", applies: always, bad: set("embed_exif_metadata", fc.constantFrom("yes", 1)) },
  { field: "format", applies: always, bad: set("format", fc.constantFrom("gif", "JPEG", "")) },
  { field: "width", applies: pixel, bad: set("width", fc.constantFrom(0, -5, 1281, 512.5, "512")) },
  { field: "height", applies: pixel, bad: set("height", fc.constantFrom(0, 2000, 1.5, true)) },
  { field: "width", applies: notPixel, bad: set("width", fc.integer({ min: 1, max: 1280 })) },
  { field: "height", applies: notPixel, bad: set("height", fc.integer({ min: 1, max: 1280 })) },
  { field: "aspect_ratio", applies: pixel, bad: set("aspect_ratio", fc.constantFrom("1:1", "16:9")) },
  { field: "aspect_ratio", applies: notPixel, bad: set("aspect_ratio", fc.constantFrom("wide", "0:1", "5:7", 16)) },
  {
    field: "resolution",
    applies: (model) => model.sizing !== "resolution-tier",
    bad: set("resolution", fc.constantFrom("1K", "2K"))
  },
  {
    field: "resolution",
    applies: (model) => model.sizing === "resolution-tier",
    bad: set("resolution", fc.constantFrom("8K", "1k", 4))
  },
  { field: "quality", applies: always, bad: set("quality", fc.constantFrom("ultra", "HIGH", 1)) },
  { field: "hide_watermark", applies: always, bad: set("hide_watermark", fc.constantFrom("false", 0)) },
  { field: "lora_strength", applies: always, bad: set("lora_strength", fc.constantFrom(-1, 101, 2.5, "50")) },
  { field: "return_binary", applies: always, bad: set("return_binary", fc.constantFrom("true", 1)) },
  { field: "variants", applies: always, bad: set("variants", fc.constantFrom(0, 5, 1.5, "2")) },
  {
    field: "variants",
    applies: always,
    bad: fc.integer({ min: 2, max: 4 }).map((variants) => (body: Body) => ({ ...body, variants, return_binary: true }))
  },
  { field: "safe_mode", applies: always, bad: set("safe_mode", fc.constantFrom("no", null)) },
  { field: "seed", applies: always, bad: set("seed", fc.constantFrom(1_000_000_000, -1_000_000_000, 0.5, "1")) },
  { field: "steps", applies: always, bad: set("steps", fc.constantFrom(0, 51, 2.5)) },
  { field: "style_preset", applies: always, bad: set("style_preset", fc.constantFrom(5, false)) },
  { field: "style_references", applies: always, bad: set("style_references", fc.constantFrom("ref", [1], [null])) },
  {
    field: "style_references",
    applies: always,
    bad: fc.constant((body: Body, model: Models.ImageModel) => ({
      ...body,
      style_references: Array.from({ length: model.maxStyleReferences + 1 }, (_, i) => ({ url: `ref-${i}` }))
    }))
  },
  { field: "enhance_prompt", applies: always, bad: set("enhance_prompt", fc.constantFrom("yes", 1)) },
  {
    field: "disable_prompt_optimization_thinking",
    applies: always,
    bad: set("disable_prompt_optimization_thinking", fc.constantFrom("yes", 1))
  },
  { field: "enable_web_search", applies: always, bad: set("enable_web_search", fc.constantFrom("on", 1)) }
]

const brokenRequest = validRequest.chain(({ body, model }) =>
  fc.constantFrom(...breakages.filter((b) => b.applies(model))).chain((breakage) =>
    breakage.bad.map((mutate) => ({ field: breakage.field, body: mutate(body, model) }))
  )
)

describe("Image request: every request within the spec's rules is accepted", () => {
  it("holds for generated requests of every model and sizing kind", () => {
    fc.assert(
      fc.property(validRequest, ({ body, model }) => {
        const request = succeed(body)
        expect(request.model.id).toBe(model.id)
        expect(request.prompt).toBe(body.prompt)
        expect(request.variants).toBe(body.variants ?? 1)
      }),
      { numRuns: 400 }
    )
  })
})

describe("Image request: a request breaking exactly one rule is a 400 naming exactly that field", () => {
  it("holds for every rule of the image table and the sizing rules", () => {
    fc.assert(
      fc.property(brokenRequest, ({ body, field }) => {
        const error = fail(body)
        expect(Errors.statusOf[error._tag]).toBe(400)
        expect(namedFields(error)).toEqual([field])
        const fieldErrors = (error.details as Record<string, Errors.FieldErrors>)[field]!
        expect(fieldErrors._errors.length + Object.keys(fieldErrors).length - 1).toBeGreaterThan(0)
      }),
      { numRuns: 600 }
    )
  })
})

describe("Image request: every bad field is named in one 400 (DetailedError details.<field>._errors)", () => {
  it("names each broken field with its messages", () => {
    const error = fail({
      model: "flux-dev",
      prompt: "",
      cfg_scale: 0,
      format: "gif",
      width: 2000,
      aspect_ratio: "1:1",
      seed: 1e12
    })
    expect(error.message).toBe("Invalid request parameters")
    expect(namedFields(error)).toEqual(["aspect_ratio", "cfg_scale", "format", "prompt", "seed", "width"])
    expect(error.details?.prompt).toEqual({ _errors: [expect.any(String)] })
  })

  it("a body that is not an object is refused at the root", () => {
    expect(fail([1, 2]).details?._errors).toEqual([expect.any(String)])
    expect(fail("draw a cat").details?._errors).toEqual([expect.any(String)])
  })
})

describe("Image request: an unknown model is a 400 naming model", () => {
  it.each(["no-such-model", "llama-3.3-70b"])("%s", (model) => {
    const error = fail({ model, prompt: "a cat" })
    expect(namedFields(error)).toEqual(["model"])
  })
})

describe("Image request: defaults are webp, 1024x1024, 8 steps, safe mode on, watermark shown, a random seed", () => {
  it("applies the defaults", () => {
    const request = succeed({ model: "local-renderer", prompt: "a lighthouse" })
    expect(request).toMatchObject({
      format: "webp",
      width: 1024,
      height: 1024,
      steps: 8,
      safeMode: true,
      hideWatermark: false,
      variants: 1,
      returnBinary: false,
      embedExifMetadata: false,
      enhancePrompt: false
    })
    expect(Number.isInteger(request.seed)).toBe(true)
    expect(Math.abs(request.seed)).toBeLessThanOrEqual(999_999_999)
  })

  it("draws the seed from Effect's Random, so a seeded Random pins it, and keeps a given seed", () => {
    const draw = ImageRequest.decode(list, { model: "local-renderer", prompt: "a" }).pipe(Effect.map((r) => r.seed))
    const a = Effect.runSync(draw.pipe(Random.withSeed("s")))
    expect(Effect.runSync(draw.pipe(Random.withSeed("s")))).toBe(a)
    expect(succeed({ model: "local-renderer", prompt: "a", seed: 0 }).seed).toBe(0)
    expect(succeed({ model: "local-renderer", prompt: "a", seed: -999_999_999 }).seed).toBe(-999_999_999)
  })
})

describe("Image request: inpaint is accepted and has no effect", () => {
  it.each([null, { image: "abc" }, "x", 3])("inpaint = %j", (inpaint) => {
    const plain = succeed({ model: "local-renderer", prompt: "a", seed: 1 })
    const withInpaint = succeed({ model: "local-renderer", prompt: "a", seed: 1, inpaint })
    expect(withInpaint).toEqual(plain)
  })
})

describe("Image request: sizing follows the model's kind", () => {
  it("aspect-ratio models size from aspect_ratio (long side 1024), the first listed ratio by default", () => {
    expect(succeed({ model: "gpt-image-1", prompt: "a" })).toMatchObject({ width: 1024, height: 1024, aspectRatio: "1:1" })
    expect(succeed({ model: "gpt-image-1", prompt: "a", aspect_ratio: "2:3" })).toMatchObject({ width: 683, height: 1024 })
  })

  it("resolution-tier models size from aspect_ratio and resolution", () => {
    expect(succeed({ model: "nano-banana-pro", prompt: "a" })).toMatchObject({ width: 1024, height: 1024, resolution: "1K" })
    expect(succeed({ model: "nano-banana-pro", prompt: "a", aspect_ratio: "16:9", resolution: "2K" }))
      .toMatchObject({ width: 2048, height: 1152 })
  })

  it("pixel models take width and height", () => {
    expect(succeed({ model: "flux-dev", prompt: "a", width: 640, height: 1280 })).toMatchObject({ width: 640, height: 1280 })
  })
})

describe("Image request: quality is honored only by models with qualities; omitted means the model default", () => {
  it("uses the asked quality or the default on a supporting model, and none elsewhere", () => {
    expect(succeed({ model: "gpt-image-1", prompt: "a" }).quality).toBe("high")
    expect(succeed({ model: "gpt-image-1", prompt: "a", quality: "low" }).quality).toBe("low")
    expect(succeed({ model: "flux-dev", prompt: "a", quality: "low" }).quality).toBeUndefined()
  })
})

describe("Image request: disable_prompt_optimization_thinking applies only to models that support it", () => {
  it("turns thinking off on a supporting model and is ignored by others", () => {
    const body = { prompt: "a", disable_prompt_optimization_thinking: true }
    expect(succeed({ ...body, model: modelOf("nano-banana-pro").id }).promptOptimizationThinking).toBe(false)
    expect(succeed({ ...body, model: "flux-dev" }).promptOptimizationThinking).toBe(true)
  })
})
