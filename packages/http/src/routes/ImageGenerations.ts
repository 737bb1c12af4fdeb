/**
 * `POST /images/generations`: OpenAI's image endpoint, so that `client.images.generate` of the
 * OpenAI SDKs works unchanged. The OpenAI body is translated into the service's own image request
 * and runs the same metered generation as `POST /image/generate` (`Image.generation`): same
 * backends, same prices, same limits, same validation of what it translates to.
 *
 * **Details**
 *
 * The translation, following the published reference: `model` absent or unknown (another
 * provider's name that is not an alias) is the default image model (its `default` trait, else the
 * first); `n` is the variants; `size` `WxH` is the pixel size of a pixel-sized model (scaled down
 * to fit the service's largest side, keeping its shape) and the model's nearest aspect ratio
 * otherwise, `auto` the model's default; `quality` `hd`/`standard` are `high`/`medium`, `auto` the
 * model's default; `output_format` is the format (PNG by default); `moderation: "low"` turns safe
 * mode off. `response_format` `url` answers data URLs: nothing is stored to link to. `background`,
 * `output_compression`, `style` and `user` are accepted for compatibility and have no effect.
 *
 * @since 0.1.0
 */
import { Errors, ImageRequest, type Models } from "@tollgate/core"
import { ByteSize, Clock, Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as RequestBody from "../RequestBody.ts"
import * as Image from "./Image.ts"

const MAX_BODY = ByteSize.kilobytes(64)

const Size = Schema.String.check(
  Schema.isPattern(/^(auto|[1-9]\d{1,4}x[1-9]\d{1,4})$/u, { message: "must be auto or <width>x<height>, e.g. 1024x1024" })
)

/**
 * The OpenAI request. Other fields are ignored, so fields a newer SDK sends do not fail the call.
 *
 * @category schemas
 */
export const Request = Schema.Struct({
  model: Schema.optionalKey(Schema.String),
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(ImageRequest.MAX_PROMPT)),
  n: Schema.optionalKey(Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 4 })))),
  size: Schema.optionalKey(Schema.NullOr(Size)),
  quality: Schema.optionalKey(Schema.NullOr(Schema.Literals(["auto", "high", "medium", "low", "hd", "standard"]))),
  response_format: Schema.optionalKey(Schema.NullOr(Schema.Literals(["b64_json", "url"]))),
  output_format: Schema.optionalKey(Schema.NullOr(ImageRequest.Format)),
  moderation: Schema.optionalKey(Schema.NullOr(Schema.Literals(["low", "auto"]))),
  background: Schema.optionalKey(Schema.NullOr(Schema.Literals(["transparent", "opaque", "auto"]))),
  output_compression: Schema.optionalKey(Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100 })))),
  style: Schema.optionalKey(Schema.NullOr(Schema.Literals(["vivid", "natural"]))),
  user: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "ImagesGenerationsRequest" })

/** @category schemas */
export const Response = Schema.Struct({
  created: Schema.Int,
  data: Schema.Array(Schema.Union([Schema.Struct({ b64_json: Schema.String }), Schema.Struct({ url: Schema.String })]))
}).annotate({ identifier: "ImagesGenerationsResponse" })

/** The model a request names, or the default image model when it names none the service knows. */
const modelOf = (models: Models.ModelList["Service"], name: string | undefined): Models.ImageModel | undefined => {
  const named = name === undefined ? undefined : Option.getOrUndefined(models.get(name))
  if (named?.type === "image") return named
  const images = models.all.filter((model): model is Models.ImageModel => model.type === "image")
  return images.find((model) => (model.traits ?? []).includes("default")) ?? images[0]
}

const ratio = (text: string) => {
  const [w = 1, h = 1] = text.split(/[x:]/u).map(Number)
  return w / h
}

/** The sizing fields of the native request for an OpenAI `size`. */
const sizing = (model: Models.ImageModel, size: string | null | undefined): Record<string, unknown> => {
  if (size === undefined || size === null || size === "auto") return {}
  const [width = 1, height = 1] = size.split("x").map(Number)
  if (model.sizing === "pixel") {
    const scale = Math.min(1, ImageRequest.MAX_DIMENSION / Math.max(width, height))
    return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) }
  }
  const wanted = Math.log(ratio(size))
  const nearest = [...model.aspectRatios].sort((a, b) => Math.abs(Math.log(ratio(a)) - wanted) - Math.abs(Math.log(ratio(b)) - wanted))[0]
  return nearest === undefined ? {} : { aspect_ratio: nearest }
}

const qualities = { high: "high", hd: "high", medium: "medium", standard: "medium", low: "low" } as const

/**
 * The service's own image request for an OpenAI one.
 *
 * @category decoding
 */
export const translate = (model: Models.ImageModel, body: typeof Request.Type): Record<string, unknown> => ({
  model: model.id,
  prompt: body.prompt,
  variants: body.n ?? 1,
  format: body.output_format ?? "png",
  safe_mode: body.moderation !== "low",
  ...sizing(model, body.size),
  ...(body.quality === undefined || body.quality === null || body.quality === "auto" ? {} : { quality: qualities[body.quality] })
})

/** @category routes */
export const route = Image.generation({
  path: "/api/v1/images/generations",
  decode: (models) =>
    Effect.gen(function*() {
      const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const body = yield* RequestBody.decode(Request, yield* RequestBody.json(MAX_BODY))
      const model = modelOf(models, body.model)
      if (model === undefined) {
        return yield* Errors.invalidField("model", "No image model is configured")
      }
      const request = yield* ImageRequest.decode(models, translate(model, body))
      const asUrl = body.response_format === "url"
      return {
        request,
        respond: (generation, { headers }) =>
          HttpServerResponse.jsonUnsafe({
            created,
            data: generation.images.map((image) => {
              const base64 = Buffer.from(image).toString("base64")
              return asUrl ? { url: `data:${generation.contentType};base64,${base64}` } : { b64_json: base64 }
            })
          }, { headers })
      }
    }),
  docs: {
    summary: "Generate images (OpenAI-compatible)",
    description: "OpenAI's images endpoint over the service's image models and prices (the same as POST /image/generate). " +
      "model defaults to the default image model; n is the number of images; size WxH sizes a pixel model and picks " +
      "the nearest aspect ratio of the others; quality hd/standard are high/medium; moderation low turns safe mode off; " +
      "response_format url answers data URLs. background, output_compression, style and user have no effect.",
    tags: ["Image"],
    request: { contentType: "application/json", schema: Request },
    responses: {
      200: { description: "The generated images", schema: Response, headers: Image.responseHeaders }
    }
  }
})
