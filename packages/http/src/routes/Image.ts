/**
 * `POST /image/generate`. The body is validated against the spec's rules and the model list before
 * anything is held or charged; the price (model, quality, variants, prompt enhancement, web search)
 * is quoted and the call is a paid endpoint (`Endpoint`) under the image kind's limits. The
 * prompt is enhanced first when asked, then drawn by the `ImageBackend`.
 *
 * The answer is `{id, images, timing, request}` with base64 images, or with `return_binary` the
 * bytes of the one image under its own Content-Type, marked `content-encoding: identity` so the
 * app's compression leaves it alone (images are compressed already). Both carry the model headers,
 * the content-safety flags and, when enhanced, the final prompt URL-encoded.
 *
 * @since 0.1.0
 */
import * as ImageBackend from "@tollgate/backends/ImageBackend"
import { PromptEnhancer } from "@tollgate/backends/PromptEnhancer"
import { type Errors, ImageRequest, Models, PricingEngine } from "@tollgate/core"
import { ByteSize, Clock, Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import type * as Metered from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import type * as Route from "../Route.ts"

/** Style references may carry images, so the body may be larger than the app's default cap. */
const MAX_BODY = ByteSize.megabytes(16)

const flag = (value: boolean) => (value ? "true" : "false")

const headersOf = (
  request: ImageRequest.ImageRequest,
  generation: ImageBackend.Generation,
  enhancedPrompt: string | undefined
): Record<string, string> => ({
  ...Models.headersOf(request.model),
  "x-service-is-blurred": flag(generation.flags.isBlurred),
  "x-service-is-content-violation": flag(generation.flags.isContentViolation),
  "x-service-is-adult-model-content-violation": flag(generation.flags.isAdultModelContentViolation),
  "x-service-contains-minor": flag(generation.flags.containsMinor),
  ...(enhancedPrompt === undefined ? {} : { "x-service-enhanced-prompt": encodeURIComponent(enhancedPrompt) })
})

/**
 * The 200 JSON body (without `return_binary`).
 *
 * @category schemas
 */
export const GenerateResponse = Schema.Struct({
  id: Schema.String,
  images: Schema.Array(Schema.String),
  timing: Schema.Struct({
    inferenceQueueTime: Schema.Finite,
    inferencePreprocessingTime: Schema.Finite,
    inferenceDuration: Schema.Finite,
    total: Schema.Finite
  }),
  request: Schema.optionalKey(Schema.Unknown)
}).annotate({ identifier: "ImageGenerateResponse" })

/**
 * The headers of a generation's answer, for the routes' documentation.
 *
 * @category constants
 */
export const responseHeaders = [
  ...Models.headerNames,
  "x-service-is-blurred",
  "x-service-is-content-violation",
  "x-service-is-adult-model-content-violation",
  "x-service-contains-minor",
  "x-service-enhanced-prompt"
]

/**
 * What a generation answers, from the finished images: `/image/generate`'s body or binary,
 * `/images/generations`'s OpenAI body.
 *
 * @category models
 */
export type Respond = (
  generation: ImageBackend.Generation,
  context: {
    readonly requestId: string
    /** The model, safety and enhanced-prompt headers every generation answer carries. */
    readonly headers: Record<string, string>
    readonly timing: typeof GenerateResponse.Type["timing"]
  }
) => HttpServerResponse.HttpServerResponse

/**
 * A decoded generation request: the service's own image request and how its answer is built.
 *
 * @category models
 */
export interface Generating {
  readonly request: ImageRequest.ImageRequest
  readonly respond: Respond
}

/** When the route began reading the request and when it had decoded it, for the timing. */
interface Timed extends Generating {
  readonly started: number
  readonly decoded: number
}

/**
 * A generation endpoint, as both image routes declare it: the request decoded by `decode`, priced
 * (model, quality, variants, prompt enhancement, web search) under the image kind's limits, the
 * prompt enhanced when asked, the images drawn by the `ImageBackend`, and the answer `respond`
 * builds.
 *
 * @category constructors
 */
export const generation = (declaration: {
  readonly path: `/${string}`
  readonly decode: (models: Models.ModelList["Service"]) => Effect.Effect<Generating, Errors.ApiError, Route.RequestServices>
  readonly docs: Omit<Route.Docs, "security">
}) =>
  Endpoint.make({
    method: "POST",
    path: declaration.path,
    kind: "image",
    serve: Effect.gen(function*() {
      const models = yield* Models.ModelList
      const tables = yield* PricingEngine.PricingEngine
      const backend = yield* ImageBackend.ImageBackend
      const enhancer = yield* PromptEnhancer
      const decode = declaration.decode(models)
      return {
        decode: Effect.gen(function*() {
          const started = yield* Clock.currentTimeMillis
          const generating = yield* decode
          return { ...generating, started, decoded: yield* Clock.currentTimeMillis } satisfies Timed
        }),
        subject: ({ request }: Timed) => ({ models: [request.model.id] }),
        quote: ({ request }: Timed) =>
          PricingEngine.image(tables, {
            model: request.model.id,
            quality: request.quality,
            variants: request.variants,
            enhancePrompt: request.enhancePrompt,
            webSearch: request.webSearch
          }),
        execute: ({ decoded, request, respond, started }: Timed, quote: PricingEngine.Quote, { requestId }: Metered.CallContext) =>
          Effect.gen(function*() {
            const queued = yield* Clock.currentTimeMillis
            const enhancedPrompt = request.enhancePrompt
              ? yield* enhancer.enhance(request.prompt, {
                model: request.model,
                thinking: request.promptOptimizationThinking
              })
              : undefined
            const prepared = yield* Clock.currentTimeMillis
            const generation = yield* backend.generate(request, enhancedPrompt ?? request.prompt)
            const finished = yield* Clock.currentTimeMillis
            const response = respond(generation, {
              requestId,
              headers: headersOf(request, generation, enhancedPrompt),
              timing: {
                inferenceQueueTime: queued - decoded,
                inferencePreprocessingTime: prepared - queued,
                inferenceDuration: finished - prepared,
                total: finished - started
              }
            })
            return {
              response,
              charge: quote.amount,
              usage: {
                units: request.variants,
                pricePerUnit: quote.pricePerUnit,
                notes: [
                  `${request.width}x${request.height} ${request.format}`,
                  ...(request.quality === undefined ? [] : [`quality ${request.quality}`]),
                  ...(request.enhancePrompt ? ["enhanced prompt"] : []),
                  ...(request.webSearch ? ["web search"] : [])
                ].join(", ")
              }
            }
          })
      }
    }),
    docs: declaration.docs
  })

/** @category routes */
export const route = generation({
  path: "/api/v1/image/generate",
  decode: (models) =>
    Effect.gen(function*() {
      const body = yield* RequestBody.json(MAX_BODY)
      const request = yield* ImageRequest.decode(models, body)
      return {
        request,
        respond: (generation, { headers, requestId, timing }) =>
          request.returnBinary
            ? HttpServerResponse.uint8Array(generation.images[0] ?? new Uint8Array(), {
              contentType: generation.contentType,
              headers: {
                ...headers,
                "content-encoding": "identity",
                "content-disposition": `inline; filename="${requestId}.${request.format}"`
              }
            })
            : HttpServerResponse.jsonUnsafe({
              id: requestId,
              images: generation.images.map((image) => Buffer.from(image).toString("base64")),
              timing,
              request: body
            }, { headers })
      }
    }),
  docs: {
    summary: "Generate images",
    description: "Images from a text prompt. Sizing follows the model's kind (see GET /models): width and height, " +
      "aspect_ratio, or aspect_ratio and resolution. Base64 images in JSON, or with return_binary the raw bytes " +
      "of one image under its image/* Content-Type. Priced per model, quality, variants and prompt enhancement.",
    tags: ["Image"],
    request: { contentType: "application/json", schema: ImageRequest.Body.annotate({ identifier: "ImageGenerateRequest" }) },
    responses: {
      200: { description: "The generated images", schema: GenerateResponse, headers: responseHeaders }
    }
  }
})
