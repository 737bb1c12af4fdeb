/**
 * The model list and what hangs off it, all public like the list itself:
 *
 * - `GET /models`: the OpenAI list shape (`{object: "list", data: [{id, object, created,
 *   owned_by}]}`), each entry with the service's `type` and a `model_spec` holding what a client
 *   needs to build a valid request (sizing kind, limits, qualities, token limits, voices, formats,
 *   durations), its price from the price tables, its rate-limit class, traits, aliases and
 *   deprecation. Upstreams and their keys are never listed. `?type=` takes the published
 *   reference's values: a model type, `all`, or `code` (text models with the `code` trait);
 *   `music`, `upscale` and `inpaint` name model types tollgate does not have (its image operations
 *   take no model), so they list nothing rather than fail a client that asks.
 * - `GET /models/{id}`: one entry, by id or alias (what `client.models.retrieve` reads).
 * - `GET /models/traits`: trait -> model id, for one type (default `text`).
 * - `GET /models/compatibility_mapping`: alias (another provider's name) -> model id, for one
 *   type (default `text`).
 *
 * @since 0.1.0
 */
import { Errors, ImageRequest, Models, Money, PricingEngine } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Effect, Option, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

const usd = (amount: Money.Nano | undefined) => amount === undefined ? undefined : Number(Money.formatUsd(amount))

const mediaPrice = (amount: Money.Nano | undefined, unit: string) => amount === undefined ? undefined : { usd: usd(amount), unit }

const pricingOf = (tables: PricingEngine.Tables, model: Models.Model) => {
  switch (model.type) {
    case "text": {
      const price = tables.chat.models[model.id]
      return price === undefined ? undefined : {
        input: { usd: usd(price.inputPerMillion) },
        output: { usd: usd(price.outputPerMillion) },
        unit: "per million tokens"
      }
    }
    case "image": {
      const price = tables.image.models[model.id]
      return price === undefined ? undefined : {
        generation: Object.fromEntries(Object.entries(price.perImage).map(([quality, amount]) => [quality, { usd: usd(amount) }])),
        defaultQuality: price.defaultQuality,
        enhancePrompt: { usd: usd(tables.image.enhancePrompt) },
        ...(model.supportsWebSearch ? { webSearch: { usd: usd(tables.image.webSearch) } } : {})
      }
    }
    case "embedding":
      return mediaPrice(tables.media.embedding[model.id]?.perMillionTokens, "per million input tokens")
    case "tts":
      return mediaPrice(tables.media.speech[model.id]?.perMillionCharacters, "per million input characters")
    case "asr":
      return mediaPrice(tables.media.transcription[model.id]?.perSecond, "per second of audio")
    case "video":
      return mediaPrice(tables.media.video[model.id]?.perSecond, "per second of video")
  }
}

const specOf = (model: Models.Model) => {
  switch (model.type) {
    case "text":
      return {
        availableContextTokens: model.contextTokens,
        maxCompletionTokens: model.maxCompletionTokens,
        capabilities: {
          supportsThinking: model.supportsThinking,
          supportsWebSearch: model.supportsWebSearch,
          supportsXSearch: model.supportsXSearch
        }
      }
    case "image":
      return {
        sizing: model.sizing,
        ...(model.sizing === "pixel" ? { widthHeightMax: ImageRequest.MAX_DIMENSION, defaultWidth: 1024, defaultHeight: 1024 } : {}),
        ...(model.sizing === "pixel" ? {} : { aspectRatios: model.aspectRatios }),
        ...(model.sizing === "resolution-tier" ? { resolutions: model.resolutions } : {}),
        constraints: {
          promptCharacterLimit: model.promptCharacterLimit,
          maxStyleReferences: model.maxStyleReferences,
          steps: { default: 8 }
        },
        qualities: model.qualities,
        ...(model.defaultQuality === undefined ? {} : { defaultQuality: model.defaultQuality }),
        supportsOptimizePromptThinking: model.supportsOptimizePromptThinking,
        supportsWebSearch: model.supportsWebSearch
      }
    case "embedding":
      return {
        dimensions: model.dimensions,
        maxInputTokens: model.maxInputTokens,
        capabilities: { supportsDimensions: model.supportsDimensions, encodingFormats: ["float", "base64"] }
      }
    case "tts":
      return {
        voices: model.voices,
        maxInputCharacters: model.maxInputCharacters,
        capabilities: { responseFormats: model.responseFormats, speed: Models.SPEECH_SPEED }
      }
    case "asr":
      return {
        maxFileBytes: DocumentExtractor.MAX_BYTES,
        capabilities: { responseFormats: Models.TranscriptionFormat.literals }
      }
    case "video":
      return {
        durations: model.durations,
        sizes: model.sizes,
        promptCharacterLimit: model.promptCharacterLimit,
        jobTtlSeconds: model.jobTtlSeconds
      }
  }
}

/**
 * One entry of the list.
 *
 * @category encoding
 */
export const entryOf = (tables: PricingEngine.Tables, created: number) => (model: Models.Model) => {
  const pricing = pricingOf(tables, model)
  return {
    id: model.id,
    object: "model",
    created,
    owned_by: "tollgate",
    type: model.type,
    model_spec: {
      name: model.name,
      router: model.router,
      ...specOf(model),
      ...(pricing === undefined ? {} : { pricing }),
      rateLimit: Models.rateLimitOf(model),
      traits: model.traits ?? [],
      ...(model.aliases === undefined ? {} : { aliases: model.aliases }),
      ...(model.deprecation === undefined ? {} : { deprecation: model.deprecation })
    },
    ...(model.type === "text" ? { context_length: model.contextTokens } : {})
  }
}

/**
 * The `type` values of the published reference. `code` is a view of the text models; `music`,
 * `upscale` and `inpaint` are types no model of tollgate has.
 */
const TypeFilter = Schema.Literals(["all", "code", ...Models.ModelType.literals, "music", "upscale", "inpaint"])
const isTypeFilter = Schema.is(TypeFilter)
type TypeFilter = typeof TypeFilter.Type

const matches = (filter: TypeFilter) => (model: Models.Model) =>
  filter === "all" || model.type === filter || (filter === "code" && model.type === "text" && (model.traits ?? []).includes("code"))

const badType = () => Errors.invalidField("type", `Expected one of ${TypeFilter.literals.join(", ")}`)

/** The `type` of the query, or `fallback` when it has none; anything else is a 400 naming `type`. */
const typeOf = (fallback: TypeFilter) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const type = RequestQuery.params(request)["type"] ?? fallback
    return isTypeFilter(type) ? Effect.succeed(type) : Effect.fail(badType())
  })

const ModelEntry = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("model"),
  created: Schema.Int,
  owned_by: Schema.String,
  type: Models.ModelType,
  context_length: Schema.optionalKey(Schema.Int),
  model_spec: Schema.Record(Schema.String, Schema.Unknown)
}).annotate({ identifier: "Model" })

const created = () => Math.floor(Date.now() / 1000)

/** @category routes */
export const list = Route.make(
  "GET",
  "/api/v1/models",
  Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const entries = models.all.map((model) => [model, entryOf(tables, created())(model)] as const)
    return Effect.map(typeOf("all"), (type) =>
      HttpServerResponse.jsonUnsafe({
        object: "list",
        type,
        data: entries.filter(([model]) => matches(type)(model)).map(([, entry]) => entry)
      }))
  }),
  {
    summary: "List models",
    description: "Every model with its type (text, image, embedding, tts, asr, video) and a model_spec: sizing kind " +
      "and limits of image models, token limits of text models, dimensions of embedding models, voices and formats " +
      "of speech models, durations and sizes of video models, price, rate-limit class, traits, aliases and deprecation. " +
      "type=code lists the text models with the code trait; music, upscale and inpaint list no models.",
    tags: ["Models"],
    security: "public",
    query: Schema.Struct({ type: Schema.optionalKey(TypeFilter) }),
    responses: {
      200: {
        description: "The model list",
        schema: Schema.Struct({
          object: Schema.Literal("list"),
          type: Schema.String,
          data: Schema.Array(ModelEntry)
        }).annotate({ identifier: "ModelList" })
      }
    }
  }
)

/** @category routes */
export const retrieve = Route.make(
  "GET",
  "/api/v1/models/:id",
  Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    return Effect.gen(function*() {
      const { id } = yield* Route.params
      const model = models.get(id ?? "")
      if (Option.isNone(model)) return yield* new Errors.NotFound({ message: `No model ${id}` })
      return HttpServerResponse.jsonUnsafe(entryOf(tables, created())(model.value), { headers: Models.headersOf(model.value) })
    })
  }),
  {
    summary: "Retrieve a model",
    description: "One entry of the model list, by id or by an alias (GET /models/compatibility_mapping); the entry " +
      "always names the model's own id. A deprecated model's answer carries the deprecation headers.",
    tags: ["Models"],
    security: "public",
    responses: {
      200: { description: "The model", schema: ModelEntry, headers: Models.headerNames },
      404: { description: "No model of that id or alias", schema: Errors.StandardError }
    }
  }
)

/** A name -> model id map per type, in the reference's list shape. */
const mapping = (
  path: `/${string}`,
  names: (model: Models.Model) => ReadonlyArray<string> | undefined,
  docs: { readonly summary: string; readonly description: string; readonly identifier: string }
) =>
  Route.make(
    "GET",
    path,
    Effect.gen(function*() {
      const models = yield* Models.ModelList
      return Effect.map(typeOf("text"), (type) =>
        HttpServerResponse.jsonUnsafe({
          object: "list",
          type,
          data: Object.fromEntries(
            models.all.filter(matches(type)).flatMap((model) => (names(model) ?? []).map((name) => [name, model.id]))
          )
        }))
    }),
    {
      summary: docs.summary,
      description: docs.description,
      tags: ["Models"],
      security: "public",
      query: Schema.Struct({ type: Schema.optionalKey(TypeFilter) }),
      responses: {
        200: {
          description: docs.summary,
          schema: Schema.Struct({
            object: Schema.Literal("list"),
            type: Schema.String,
            data: Schema.Record(Schema.String, Schema.String)
          }).annotate({ identifier: docs.identifier })
        }
      }
    }
  )

/** @category routes */
export const traits = mapping("/api/v1/models/traits", (model) => model.traits, {
  summary: "Model traits",
  description: "Which model is the service's pick for each trait (default, fastest, ...) among the models of a type " +
    "(default text). Traits come from the model list's configuration.",
  identifier: "ModelTraits"
})

/** @category routes */
export const compatibilityMapping = mapping("/api/v1/models/compatibility_mapping", (model) => model.aliases, {
  summary: "Model compatibility mapping",
  description: "Other providers' model names (OpenAI's gpt-4o) and the model each resolves to in requests, among the " +
    "models of a type (default text). The mapping is the aliases of the model list's configuration.",
  identifier: "ModelCompatibilityMapping"
})

/** @category routes */
export const routes = [list, traits, compatibilityMapping, retrieve] as const
