/**
 * The image generation request (`POST /image/generate`): its wire schema with every rule of the
 * spec's table, the rules that depend on the model (prompt limit, sizing kind, style-reference
 * maximum), and the request as the backends see it, defaults applied and sizes resolved to pixels.
 *
 * Every broken rule is reported at once, as a 400 DetailedError naming each bad field under
 * `details.<field>._errors`; a request breaking one rule names that field and no other. Fields of
 * another sizing kind are refused rather than ignored, so a client never gets an image of a size
 * it did not ask for.
 *
 * @since 0.1.0
 */
import { Effect, Option, Random, Result, Schema, SchemaIssue, SchemaParser } from "effect"
import * as Errors from "./Errors.ts"
import * as Models from "./Models.ts"

/** @category schemas */
export const Format = Schema.Literals(["jpeg", "png", "webp"])
/** @category models */
export type Format = typeof Format.Type

/** @category constants */
export const MAX_PROMPT = 7500

/**
 * The style presets `GET /image/styles` lists, for `style_preset`.
 *
 * @category constants
 */
export const stylePresets: ReadonlyArray<string> = [
  "3D Model",
  "Analog Film",
  "Anime",
  "Cinematic",
  "Comic Book",
  "Digital Art",
  "Fantasy Art",
  "Line Art",
  "Neon Punk",
  "Origami",
  "Photographic",
  "Pixel Art",
  "Watercolor"
]
/** @category constants */
export const MAX_DIMENSION = 1280
/** @category constants */
export const MAX_SEED = 999_999_999
/** @category constants */
export const MAX_STEPS = 50

const IntBetween = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))
const Dimension = Schema.Int.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(MAX_DIMENSION))

/**
 * The request body as sent. Fields not listed are ignored; `inpaint` is accepted and has no
 * effect (deprecated and disabled).
 *
 * @category schemas
 */
export const Body = Schema.Struct({
  model: Schema.String,
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_PROMPT)),
  negative_prompt: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(MAX_PROMPT))),
  cfg_scale: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(20))),
  embed_exif_metadata: Schema.optionalKey(Schema.Boolean),
  format: Schema.optionalKey(Format),
  width: Schema.optionalKey(Dimension),
  height: Schema.optionalKey(Dimension),
  aspect_ratio: Schema.optionalKey(Models.AspectRatio),
  resolution: Schema.optionalKey(Models.Resolution),
  quality: Schema.optionalKey(Models.Quality),
  hide_watermark: Schema.optionalKey(Schema.Boolean),
  lora_strength: Schema.optionalKey(IntBetween(0, 100)),
  return_binary: Schema.optionalKey(Schema.Boolean),
  variants: Schema.optionalKey(IntBetween(1, 4)),
  safe_mode: Schema.optionalKey(Schema.Boolean),
  seed: Schema.optionalKey(IntBetween(-MAX_SEED, MAX_SEED)),
  steps: Schema.optionalKey(IntBetween(1, MAX_STEPS)),
  style_preset: Schema.optionalKey(Schema.String),
  style_references: Schema.optionalKey(Schema.Array(Schema.Record(Schema.String, Schema.Unknown))),
  enhance_prompt: Schema.optionalKey(Schema.Boolean),
  disable_prompt_optimization_thinking: Schema.optionalKey(Schema.Boolean),
  enable_web_search: Schema.optionalKey(Schema.Boolean),
  inpaint: Schema.optionalKey(Schema.Unknown)
})
/** @category models */
export type Body = typeof Body.Type

/**
 * The request as a backend sees it: defaults applied, the size in pixels whatever the sizing
 * kind, and the options the model does not honor already dropped.
 *
 * @category models
 */
export interface ImageRequest {
  readonly model: Models.ImageModel
  readonly prompt: string
  readonly negativePrompt: string | undefined
  readonly cfgScale: number | undefined
  readonly embedExifMetadata: boolean
  readonly format: Format
  readonly width: number
  readonly height: number
  readonly aspectRatio: string | undefined
  readonly resolution: Models.Resolution | undefined
  /** The quality used, when the model honors quality; undefined otherwise. */
  readonly quality: Models.Quality | undefined
  readonly hideWatermark: boolean
  readonly loraStrength: number | undefined
  readonly returnBinary: boolean
  readonly variants: number
  readonly safeMode: boolean
  readonly seed: number
  readonly steps: number
  readonly stylePreset: string | undefined
  readonly styleReferences: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly enhancePrompt: boolean
  /** Whether prompt optimization may think first: false only when asked off on a supporting model. */
  readonly promptOptimizationThinking: boolean
  /** Web search for the task, on a model that supports it. */
  readonly webSearch: boolean
}

/** @category constants */
export const defaults = {
  format: "webp",
  width: 1024,
  height: 1024,
  steps: 8,
  variants: 1,
  safeMode: true,
  hideWatermark: false
} as const

const longSide: { readonly [R in Models.Resolution]: number } = { "1K": 1024, "2K": 2048, "4K": 4096 }

/**
 * Pixels of an aspect ratio at a long side: `16:9` at 1024 is 1024x576.
 *
 * @category sizing
 */
export const pixelsOf = (aspectRatio: string, long: number): { readonly width: number; readonly height: number } => {
  const [w = 1, h = 1] = aspectRatio.split(":").map(Number)
  return w >= h
    ? { width: long, height: Math.max(1, Math.round((long * h) / w)) }
    : { width: Math.max(1, Math.round((long * w) / h)), height: long }
}

/** The sizing fields each kind takes; any other sizing field is refused. */
const sizingFields: { readonly [K in Models.SizingKind]: ReadonlyArray<string> } = {
  "pixel": ["width", "height"],
  "aspect-ratio": ["aspect_ratio"],
  "resolution-tier": ["aspect_ratio", "resolution"]
}
const allSizingFields = ["width", "height", "aspect_ratio", "resolution"] as const

interface FieldIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

const issuesOf = (issue: SchemaIssue.Issue): Array<FieldIssue> =>
  SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues.map(({ message, path }) => ({
    message,
    path: (path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment))
  }))

/**
 * The rules that depend on the model and on other fields, checked on the raw body so that they are
 * reported together with the schema's: each applies only when its own fields are well-typed, so a
 * field broken in one way is never blamed for another field's rule.
 */
const crossFieldIssues = (
  raw: Readonly<Record<string, unknown>>,
  model: Models.ImageModel | undefined
): Array<FieldIssue> => {
  const issues: Array<FieldIssue> = []
  const has = (field: string) => Object.hasOwn(raw, field)
  if (typeof raw.variants === "number" && raw.variants > 1 && raw.return_binary === true) {
    issues.push({ path: ["variants"], message: "variants must be 1 when return_binary is true" })
  }
  if (model === undefined) return issues
  if (typeof raw.prompt === "string" && raw.prompt.length <= MAX_PROMPT && raw.prompt.length > model.promptCharacterLimit) {
    issues.push({
      path: ["prompt"],
      message: `Expected at most ${model.promptCharacterLimit} characters for model ${model.id}`
    })
  }
  const accepted = sizingFields[model.sizing]
  for (const field of allSizingFields) {
    if (has(field) && !accepted.includes(field)) {
      issues.push({
        path: [field],
        message: `${model.id} is sized by ${model.sizing}; it takes ${accepted.join(" and ")}, not ${field}`
      })
    }
  }
  if (
    accepted.includes("aspect_ratio") && typeof raw.aspect_ratio === "string" &&
    Schema.is(Models.AspectRatio)(raw.aspect_ratio) && model.aspectRatios.length > 0 &&
    !model.aspectRatios.includes(raw.aspect_ratio)
  ) {
    issues.push({ path: ["aspect_ratio"], message: `Expected one of ${model.aspectRatios.join(", ")}` })
  }
  if (
    accepted.includes("resolution") && Schema.is(Models.Resolution)(raw.resolution) &&
    !model.resolutions.includes(raw.resolution)
  ) {
    issues.push({ path: ["resolution"], message: `Expected one of ${model.resolutions.join(", ")}` })
  }
  if (Array.isArray(raw.style_references) && raw.style_references.length > model.maxStyleReferences) {
    issues.push({
      path: ["style_references"],
      message: model.maxStyleReferences === 0
        ? `${model.id} does not support style references`
        : `Expected at most ${model.maxStyleReferences} style references for model ${model.id}`
    })
  }
  return issues
}

const sizeOf = (body: Body, model: Models.ImageModel) => {
  switch (model.sizing) {
    case "pixel":
      return {
        width: body.width ?? defaults.width,
        height: body.height ?? defaults.height,
        aspectRatio: undefined,
        resolution: undefined
      }
    case "aspect-ratio": {
      const aspectRatio = body.aspect_ratio ?? model.aspectRatios[0] ?? "1:1"
      return { ...pixelsOf(aspectRatio, longSide["1K"]), aspectRatio, resolution: undefined }
    }
    case "resolution-tier": {
      const aspectRatio = body.aspect_ratio ?? model.aspectRatios[0] ?? "1:1"
      const resolution = body.resolution ?? model.resolutions[0] ?? "1K"
      return { ...pixelsOf(aspectRatio, longSide[resolution]), aspectRatio, resolution }
    }
  }
}

const qualityOf = (body: Body, model: Models.ImageModel): Models.Quality | undefined =>
  model.qualities.length === 0
    ? undefined
    : body.quality !== undefined && model.qualities.includes(body.quality)
    ? body.quality
    : model.defaultQuality ?? model.qualities[model.qualities.length - 1]

const resolve = (body: Body, model: Models.ImageModel, seed: number): ImageRequest => ({
  model,
  prompt: body.prompt,
  negativePrompt: body.negative_prompt,
  cfgScale: body.cfg_scale,
  embedExifMetadata: body.embed_exif_metadata ?? false,
  format: body.format ?? defaults.format,
  ...sizeOf(body, model),
  quality: qualityOf(body, model),
  hideWatermark: body.hide_watermark ?? defaults.hideWatermark,
  loraStrength: body.lora_strength,
  returnBinary: body.return_binary ?? false,
  variants: body.variants ?? defaults.variants,
  safeMode: body.safe_mode ?? defaults.safeMode,
  seed,
  steps: body.steps ?? defaults.steps,
  stylePreset: body.style_preset,
  styleReferences: body.style_references ?? [],
  enhancePrompt: body.enhance_prompt ?? false,
  promptOptimizationThinking: !(model.supportsOptimizePromptThinking && body.disable_prompt_optimization_thinking === true),
  webSearch: model.supportsWebSearch && body.enable_web_search === true
})

const decodeBody = SchemaParser.decodeUnknownResult(Body)

/**
 * Validates a request body against the spec's rules and the model list, and resolves it. Fails
 * with one 400 naming every bad field; an unknown model is a bad `model`. A missing seed is drawn
 * from Effect's `Random`, so a test can pin it.
 *
 * @category decoding
 */
export const decode = Effect.fn("ImageRequest.decode")(function*(models: Models.ModelList["Service"], input: unknown) {
  const decoded = decodeBody(input, { errors: "all" })
  const raw: Readonly<Record<string, unknown>> = typeof input === "object" && input !== null && !Array.isArray(input)
    ? input as Record<string, unknown>
    : {}
  const found = typeof raw.model === "string" ? Option.getOrUndefined(models.get(raw.model)) : undefined
  const model = found?.type === "image" ? found : undefined
  const issues = Result.isFailure(decoded) ? issuesOf(decoded.failure) : []
  if (typeof raw.model === "string" && model === undefined) {
    issues.push({ path: ["model"], message: `Unknown image model: ${raw.model}` })
  }
  for (const issue of crossFieldIssues(raw, model)) issues.push(issue)
  if (issues.length > 0 || Result.isFailure(decoded) || model === undefined) {
    return yield* Errors.invalidParameters(issues)
  }
  const seed = decoded.success.seed ?? (yield* Random.nextIntBetween(-MAX_SEED, MAX_SEED))
  return resolve(decoded.success, model, seed)
})
