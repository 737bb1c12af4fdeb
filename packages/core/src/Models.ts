/**
 * The model list: every model the service offers, with the rules that depend on the model. Image
 * generation reads the sizing kind, prompt limit, style-reference maximum and qualities from here;
 * chat reads the upstreams, token limits and thinking support; embeddings, speech, transcription
 * and video read their upstreams and limits; the metered pipeline reads the rate-limit class;
 * `GET /models` lists it. The list is config (the `models` section of the config
 * file), validated at start; with none given the dev defaults below apply. Prices are not held
 * here: a model's price is the `PricingEngine` table entry under the model's id.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as Errors from "./Errors.ts"

/** @category schemas */
export const ModelType = Schema.Literals(["text", "image", "embedding", "tts", "asr", "video"])
/** @category models */
export type ModelType = typeof ModelType.Type

/**
 * How an image model is sized: `pixel` takes `width` and `height`; `aspect-ratio` takes
 * `aspect_ratio` only; `resolution-tier` takes `aspect_ratio` and `resolution`.
 *
 * @category schemas
 */
export const SizingKind = Schema.Literals(["pixel", "aspect-ratio", "resolution-tier"])
/** @category models */
export type SizingKind = typeof SizingKind.Type

/** @category schemas */
export const Quality = Schema.Literals(["low", "medium", "high"])
/** @category models */
export type Quality = typeof Quality.Type

/** @category schemas */
export const Resolution = Schema.Literals(["1K", "2K", "4K"])
/** @category models */
export type Resolution = typeof Resolution.Type

/**
 * Text model tiers of the rate limits (XS, S, M, L).
 *
 * @category schemas
 */
export const TextTier = Schema.Literals(["XS", "S", "M", "L"])
/** @category models */
export type TextTier = typeof TextTier.Type

/**
 * `<w>:<h>` with positive integers, e.g. `16:9`.
 *
 * @category schemas
 */
export const AspectRatio = Schema.String.check(Schema.isPattern(/^[1-9]\d{0,2}:[1-9]\d{0,2}$/u, {
  message: "must be of the form <w>:<h>, e.g. 16:9"
}))

/**
 * An OpenAI-compatible upstream: its base URL (ending before `/chat/completions` or
 * `/images/generations`), an optional bearer key, and the model name it knows the model by
 * (default: the model's id).
 *
 * @category schemas
 */
export const Upstream = Schema.Struct({
  baseUrl: Schema.String.check(Schema.isPattern(/^https?:\/\/.+/u, { message: "must be an http(s) URL" })),
  apiKey: Schema.optionalKey(Schema.String),
  model: Schema.optionalKey(Schema.String)
})
/** @category models */
export type Upstream = typeof Upstream.Type

/**
 * A deprecated model keeps working until its date; responses carry the warning and the date.
 *
 * @category schemas
 */
export const Deprecation = Schema.Struct({
  date: Schema.String.check(Schema.isPattern(/^\d{4}-\d{2}-\d{2}/u, { message: "must be an ISO 8601 date" })),
  warning: Schema.String
})
/** @category models */
export type Deprecation = typeof Deprecation.Type

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))
const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

const common = {
  id: Schema.String.check(Schema.isMinLength(1)),
  /** Display name, sent as `x-service-model-name`. */
  name: Schema.String,
  /** Which backend serves the model, sent as `x-service-model-router`. */
  router: Schema.String,
  deprecation: Schema.optionalKey(Deprecation),
  /**
   * What the model is the service's pick for (`default`, `fastest`, `code`...), listed by
   * `GET /models/traits`; a trait names one model per type.
   */
  traits: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isMinLength(1)))),
  /**
   * Other providers' model names (OpenAI's `gpt-4o`) that resolve to this model in requests, listed
   * by `GET /models/compatibility_mapping`, so a client written for them works unchanged.
   */
  aliases: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isMinLength(1))))
}

/**
 * A chat model. `upstreams` are tried in order; an empty list means the local backend serves it
 * (dev mode).
 *
 * @category schemas
 */
export const TextModel = Schema.Struct({
  ...common,
  /** Defaults to the id (see `decodeConfig`). */
  name: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed(""))),
  router: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed("openai-compatible"))),
  type: Schema.Literal("text"),
  tier: TextTier.pipe(Schema.withDecodingDefaultKey(Effect.succeed("M" as const))),
  upstreams: Schema.Array(Upstream),
  /** Prompt plus completion tokens the model accepts. */
  contextTokens: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(131_072))),
  /** The cap of `max_tokens` (and the completion reserved when a request sends none). */
  maxCompletionTokens: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(8_192))),
  supportsThinking: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  supportsWebSearch: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(true))),
  supportsXSearch: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false)))
})
/** @category models */
export type TextModel = typeof TextModel.Type

/**
 * An image model. `aspectRatios` lists the accepted `aspect_ratio` values of aspect-ratio and
 * resolution-tier models (the first is the default); `resolutions` those of resolution-tier models
 * (the first is the default). An empty `qualities` means the model ignores `quality`.
 *
 * @category schemas
 */
export const ImageModel = Schema.Struct({
  ...common,
  type: Schema.Literal("image"),
  sizing: SizingKind,
  aspectRatios: Schema.Array(AspectRatio),
  resolutions: Schema.Array(Resolution),
  promptCharacterLimit: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 7500 })),
  maxStyleReferences: NonNegativeInt,
  supportsOptimizePromptThinking: Schema.Boolean,
  supportsWebSearch: Schema.Boolean,
  qualities: Schema.Array(Quality),
  defaultQuality: Schema.optionalKey(Quality),
  /** OpenAI-compatible images upstreams; empty: the local renderer draws the images. */
  upstreams: Schema.Array(Upstream)
})
/** @category models */
export type ImageModel = typeof ImageModel.Type

const named = {
  /** Defaults to the id (see `decodeConfig`). */
  name: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed(""))),
  router: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed("openai-compatible"))),
  /** OpenAI-compatible upstreams, tried in order; empty: the local dev backend serves the model. */
  upstreams: Schema.Array(Upstream)
}

/**
 * An embedding model (`POST /embeddings`). `dimensions` is the length of its vectors;
 * `supportsDimensions` whether a request may ask for shorter ones; `maxInputTokens` the most
 * tokens one input may have.
 *
 * @category schemas
 */
export const EmbeddingModel = Schema.Struct({
  ...common,
  ...named,
  type: Schema.Literal("embedding"),
  dimensions: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(1536))),
  supportsDimensions: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  maxInputTokens: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(8192)))
})
/** @category models */
export type EmbeddingModel = typeof EmbeddingModel.Type

/** @category schemas */
export const SpeechFormat = Schema.Literals(["mp3", "opus", "aac", "flac", "wav", "pcm"])
/** @category models */
export type SpeechFormat = typeof SpeechFormat.Type

/**
 * The speeds speech may be asked for (`POST /audio/speech`'s `speed`, the OpenAI API's range).
 *
 * @category constants
 */
export const SPEECH_SPEED = { minimum: 0.25, maximum: 4 } as const

/** @category schemas */
export const TranscriptionFormat = Schema.Literals(["json", "text", "srt", "vtt", "verbose_json"])
/** @category models */
export type TranscriptionFormat = typeof TranscriptionFormat.Type

/**
 * A text-to-speech model (`POST /audio/speech`): the voices it has, the audio formats it can
 * answer in (the first is the default) and the longest input it reads.
 *
 * @category schemas
 */
export const SpeechModel = Schema.Struct({
  ...common,
  ...named,
  type: Schema.Literal("tts"),
  voices: Schema.Array(Schema.String).check(Schema.isMinLength(1)),
  responseFormats: Schema.Array(SpeechFormat).check(Schema.isMinLength(1)).pipe(
    Schema.withDecodingDefaultKey(Effect.succeed(SpeechFormat.literals))
  ),
  maxInputCharacters: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(4096)))
})
/** @category models */
export type SpeechModel = typeof SpeechModel.Type

/**
 * A speech-to-text model (`POST /audio/transcriptions`). Its upstream is asked for
 * `verbose_json` whatever the client asked, because the audio's duration is what is billed.
 *
 * @category schemas
 */
export const TranscriptionModel = Schema.Struct({
  ...common,
  ...named,
  type: Schema.Literal("asr")
})
/** @category models */
export type TranscriptionModel = typeof TranscriptionModel.Type

/**
 * A video model (`POST /video/queue`): the durations in seconds and the sizes (`<w>x<h>`) it
 * renders (the first of each is the default), and how long a job may run before it expires and
 * its hold is released.
 *
 * @category schemas
 */
export const VideoModel = Schema.Struct({
  ...common,
  ...named,
  type: Schema.Literal("video"),
  durations: Schema.Array(PositiveInt).check(Schema.isMinLength(1)),
  sizes: Schema.Array(Schema.String.check(Schema.isPattern(/^[1-9]\d{1,4}x[1-9]\d{1,4}$/u, { message: "must be <w>x<h>, e.g. 1280x720" })))
    .check(Schema.isMinLength(1)),
  promptCharacterLimit: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(2500))),
  jobTtlSeconds: PositiveInt.pipe(Schema.withDecodingDefaultKey(Effect.succeed(3600)))
})
/** @category models */
export type VideoModel = typeof VideoModel.Type

/** @category schemas */
export const Model = Schema.Union([TextModel, ImageModel, EmbeddingModel, SpeechModel, TranscriptionModel, VideoModel])
/** @category models */
export type Model = typeof Model.Type

/**
 * The `models` section of the config file: a list of models with unique ids.
 *
 * @category schemas
 */
export const Config = Schema.Array(Model).check(
  Schema.makeFilter(
    (models) => new Set(models.map((model) => model.id)).size === models.length,
    { message: "model ids must be unique" }
  ),
  Schema.makeFilter(
    (models) => {
      const names = models.flatMap((model) => model.aliases ?? [])
      const ids = new Set(models.map((model) => model.id))
      return new Set(names).size === names.length && names.every((name) => !ids.has(name))
    },
    { message: "model aliases must be unique and differ from every model id" }
  ),
  Schema.makeFilter(
    (models) => {
      const traits = models.flatMap((model) => (model.traits ?? []).map((trait) => `${model.type}\u0000${trait}`))
      return new Set(traits).size === traits.length
    },
    { message: "a trait names one model per type" }
  )
)

/**
 * Which rate limit a model's calls count against: its kind, and for text models its tier. Speech
 * and transcription share the `audio` kind; a video model's jobs count against `video` when queued
 * (`video_retrieve` when polled).
 *
 * @category models
 */
export interface RateLimitClass {
  readonly kind: "text" | "image" | "embedding" | "audio" | "video"
  readonly modelTier?: TextTier
}

/** @category accessors */
export const rateLimitOf = (model: Model): RateLimitClass =>
  model.type === "text"
    ? { kind: "text", modelTier: model.tier }
    : { kind: model.type === "tts" || model.type === "asr" ? "audio" : model.type }

/**
 * The response headers every inference response of a model carries: id, name, router, and the
 * deprecation warning and date when the model is deprecated.
 *
 * @category accessors
 */
export const headersOf = (model: Model): Record<string, string> => ({
  "x-service-model-id": model.id,
  "x-service-model-name": model.name,
  "x-service-model-router": model.router,
  ...(model.deprecation === undefined ? {} : {
    "x-service-model-deprecation-warning": model.deprecation.warning,
    "x-service-model-deprecation-date": model.deprecation.date
  })
})

/**
 * The names of the headers `headersOf` may set, for the routes' documentation.
 *
 * @category accessors
 */
export const headerNames: ReadonlyArray<string> = [
  "x-service-model-id",
  "x-service-model-name",
  "x-service-model-router",
  "x-service-model-deprecation-warning",
  "x-service-model-deprecation-date"
]

const text = (
  id: string,
  name: string,
  fields: Omit<TextModel, "id" | "name" | "type" | "router" | "upstreams" | "supportsWebSearch" | "supportsXSearch">
): TextModel => ({
  id,
  name,
  type: "text",
  router: "local",
  upstreams: [],
  supportsWebSearch: true,
  supportsXSearch: false,
  ...fields
})

const image = (
  id: string,
  name: string,
  fields: Partial<Omit<ImageModel, "id" | "name" | "type">> & Pick<ImageModel, "sizing">
): ImageModel => ({
  id,
  name,
  type: "image",
  router: "local",
  aspectRatios: [],
  resolutions: [],
  promptCharacterLimit: 7500,
  maxStyleReferences: 0,
  supportsOptimizePromptThinking: false,
  supportsWebSearch: false,
  qualities: [],
  upstreams: [],
  ...fields
})

const dev = {
  router: "local",
  upstreams: []
} as const

/**
 * The dev defaults: one model of each image sizing kind, three chat tiers, and one dev model of
 * each other type (named `dev-*`: local stand-ins, not real models), all served locally, priced by
 * the `PricingEngine` defaults under the same ids.
 *
 * @category constants
 */
export const defaults: ReadonlyArray<Model> = [
  text("llama-3.3-70b", "Llama 3.3 70B", {
    traits: ["default", "function_calling_default"],
    aliases: ["gpt-4o", "gpt-4.1"],
    tier: "M",
    contextTokens: 131_072,
    maxCompletionTokens: 8_192,
    supportsThinking: false
  }),
  text("qwen3-4b", "Qwen 3 4B", {
    traits: ["fastest", "default_reasoning"],
    aliases: ["gpt-4o-mini", "o4-mini"],
    tier: "XS",
    contextTokens: 32_768,
    maxCompletionTokens: 4_096,
    supportsThinking: true
  }),
  text("local-echo", "Local Echo", {
    tier: "XS",
    contextTokens: 8_192,
    maxCompletionTokens: 1_024,
    supportsThinking: false
  }),
  image("local-renderer", "Local Renderer", { sizing: "pixel", traits: ["default_edit"] }),
  image("flux-dev", "FLUX.1 [dev]", {
    traits: ["default"],
    aliases: ["dall-e-3"],
    sizing: "pixel",
    promptCharacterLimit: 2048,
    maxStyleReferences: 0
  }),
  image("gpt-image-1", "GPT Image 1", {
    traits: ["highest_quality"],
    sizing: "aspect-ratio",
    aspectRatios: ["1:1", "3:2", "2:3"],
    promptCharacterLimit: 4000,
    qualities: ["low", "medium", "high"],
    defaultQuality: "high",
    maxStyleReferences: 4
  }),
  image("nano-banana-pro", "Nano Banana Pro", {
    sizing: "resolution-tier",
    aspectRatios: ["1:1", "16:9", "9:16", "4:3", "3:4", "3:2", "2:3", "21:9"],
    resolutions: ["1K", "2K", "4K"],
    promptCharacterLimit: 7500,
    maxStyleReferences: 14,
    supportsOptimizePromptThinking: true,
    supportsWebSearch: true
  }),
  image("sd-3.5", "Stable Diffusion 3.5", {
    sizing: "pixel",
    promptCharacterLimit: 1500,
    deprecation: { date: "2027-01-31", warning: "sd-3.5 is deprecated and will be removed; use flux-dev instead" }
  }),
  {
    ...dev,
    id: "dev-embedding",
    name: "Dev Embedding (local, deterministic hash vectors)",
    type: "embedding",
    dimensions: 256,
    supportsDimensions: true,
    maxInputTokens: 8192
  },
  {
    ...dev,
    id: "dev-tts",
    name: "Dev TTS (local tone generator)",
    type: "tts",
    voices: ["alloy", "echo", "nova"],
    responseFormats: ["wav", "pcm"],
    maxInputCharacters: 4096
  },
  { ...dev, id: "dev-asr", name: "Dev ASR (local, fixed transcript of WAV audio)", type: "asr" },
  {
    ...dev,
    id: "dev-video",
    name: "Dev Video (local, tiny generated clip)",
    type: "video",
    durations: [2, 4],
    sizes: ["64x64"],
    promptCharacterLimit: 2500,
    jobTtlSeconds: 3600
  }
]

/**
 * The model list in use.
 *
 * @category services
 */
export class ModelList extends Context.Service<ModelList, {
  readonly all: ReadonlyArray<Model>
  /** The model of that id or alias. */
  readonly get: (id: string) => Option.Option<Model>
  /** The image model of that id, or a 400 naming `model`. */
  readonly image: (id: string) => Effect.Effect<ImageModel, Errors.InvalidRequest>
  /** The text model of that id, or a 400 naming `model`. */
  readonly text: (id: string) => Effect.Effect<TextModel, Errors.InvalidRequest>
  /** The model of that id and type, or a 400 naming `model`. */
  readonly ofType: <T extends ModelType>(type: T, id: string) => Effect.Effect<Extract<Model, { type: T }>, Errors.InvalidRequest>
}>()("@tollgate/core/ModelList") {}

const unknownModel = (id: string, type: ModelType) =>
  Errors.invalidParameters([{ path: ["model"], message: `Unknown ${type} model: ${id}` }])

/**
 * A model list from decoded config (the dev defaults when none is given). Lookups take a model's
 * id or one of its aliases.
 *
 * @category constructors
 */
export const make = (models: ReadonlyArray<Model> = defaults): ModelList["Service"] => {
  // an alias resolves like the id it names; the config check keeps aliases and ids apart
  const byId = new Map([
    ...models.flatMap((model) => (model.aliases ?? []).map((alias) => [alias, model] as const)),
    ...models.map((model) => [model.id, model] as const)
  ])
  const ofType = <T extends ModelType>(type: T, id: string) => {
    const model = byId.get(id)
    return model !== undefined && model.type === type
      ? Effect.succeed(model as Extract<Model, { type: T }>)
      : Effect.fail(unknownModel(id, type))
  }
  return {
    all: models,
    get: (id) => Option.fromNullishOr(byId.get(id)),
    image: (id) => ofType("image", id),
    text: (id) => ofType("text", id),
    ofType
  }
}

/**
 * The service from decoded config (the dev defaults when none is given).
 *
 * @category layers
 */
export const layer = (models: ReadonlyArray<Model> = defaults): Layer.Layer<ModelList> => Layer.succeed(ModelList, make(models))

/**
 * Decodes the `models` section of the config file, reporting every bad field at once.
 *
 * @category decoding
 */
export const decodeConfig = (input: unknown): Effect.Effect<ReadonlyArray<Model>, Schema.SchemaError> =>
  Schema.decodeUnknownEffect(Config)(input, { errors: "all", onExcessProperty: "error" }).pipe(
    Effect.map((models) => models.map((model) => model.name === "" ? { ...model, name: model.id } : model))
  )

/**
 * The service from the config file's `models` section as read (the dev defaults when absent).
 *
 * @category layers
 */
export const layerConfig = (input: unknown): Layer.Layer<ModelList, Schema.SchemaError> =>
  input === undefined ? layer() : Layer.effect(ModelList, Effect.map(decodeConfig(input), make))
