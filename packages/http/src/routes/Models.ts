/**
 * `GET /models`: the model list in the OpenAI list shape (`{object: "list", data: [{id, object,
 * created, owned_by}]}`), each entry with the service's `type` and a `model_spec` holding what a
 * client needs to build a valid request (sizing kind, limits, qualities, token limits, voices, formats,
 * durations), its price
 * from the price tables, its rate-limit class and its deprecation. Upstreams and their keys are
 * never listed. `?type=` filters by type (`all` lists every model). No authentication.
 *
 * @since 0.1.0
 */
import { Errors, ImageRequest, Models, Money, PricingEngine } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Effect, Schema } from "effect"
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
      ...(model.deprecation === undefined ? {} : { deprecation: model.deprecation })
    }
  }
}

const TypeFilter = Schema.Literals(["all", ...Models.ModelType.literals])
const isTypeFilter = Schema.is(TypeFilter)

/** @category routes */
export const route = Route.make(
  "GET",
  "/api/v1/models",
  Effect.gen(function*() {
    const list = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const created = Math.floor(Date.now() / 1000)
    const entries = list.all.map(entryOf(tables, created))
    return Effect.gen(function*() {
      const type = RequestQuery.params(yield* HttpServerRequest.HttpServerRequest)["type"] ?? "all"
      if (!isTypeFilter(type)) {
        return yield* Errors.invalidParameters([{ path: ["type"], message: `Expected one of ${TypeFilter.literals.join(", ")}` }])
      }
      return HttpServerResponse.jsonUnsafe({
        object: "list",
        type,
        data: type === "all" ? entries : entries.filter((entry) => entry.type === type)
      })
    })
  }),
  {
    summary: "List models",
    description: "Every model with its type (text, image, embedding, tts, asr, video) and a model_spec: sizing kind " +
      "and limits of image models, token limits of text models, dimensions of embedding models, voices and formats " +
      "of speech models, durations and sizes of video models, price, rate-limit class and deprecation.",
    tags: ["Models"],
    security: "public",
    query: Schema.Struct({ type: Schema.optionalKey(TypeFilter) }),
    responses: {
      200: {
        description: "The model list",
        schema: Schema.Struct({
          object: Schema.Literal("list"),
          type: Schema.String,
          data: Schema.Array(Schema.Struct({
            id: Schema.String,
            object: Schema.Literal("model"),
            created: Schema.Int,
            owned_by: Schema.String,
            type: Models.ModelType,
            model_spec: Schema.Record(Schema.String, Schema.Unknown)
          }))
        }).annotate({ identifier: "ModelList" })
      }
    }
  }
)
