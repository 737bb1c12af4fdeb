/**
 * The image operations beyond generation, as the published reference has them, and OpenAI's edit
 * endpoint:
 *
 * - `GET /image/styles`: the style presets, public.
 * - `POST /image/upscale`: the image at `scale` 2 or 4 as PNG. The result may have at most
 *   `ImageEditor.MAX_PIXELS`; a scale that would exceed it is lowered to the largest that fits
 *   (as the reference does), and an image too large to double is a 400. Priced per scale asked.
 * - `POST /image/edit`: the image changed by `prompt`, by an image model (`model`, default the
 *   image model with the `default_edit` trait, else `default`), priced as one image of that model.
 * - `POST /image/multi-edit`: a base image and up to `MAX_EDIT_IMAGES - 1` layers laid over it,
 *   changed by `prompt` on the edit's models and price (`modelId` as the reference names it); each
 *   image has at least `MIN_EDIT_PIXELS` pixels, as the reference requires.
 * - `POST /image/background-remove`: the image with a transparent background, as PNG.
 * - `POST /images/edits`: OpenAI's shape of the edit (`client.images.edit`), answering
 *   `{created, data: [{b64_json}]}`.
 *
 * Each takes the image as a multipart upload or base64 in JSON (`ImageInput`), at most 25 MB and
 * `ImageEditor.MAX_PIXELS` pixels; the image is read and checked before anything is held, and each
 * operation is a paid endpoint (`Endpoint`) under the image kind's limits. The `/image/*` answers are
 * the image's bytes under its Content-Type.
 *
 * @since 0.1.0
 */
import * as ImageEditor from "@tollgate/backends/ImageEditor"
import { Errors, ImageRequest, Models, PricingEngine } from "@tollgate/core"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as ImageInput from "../ImageInput.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"

/** Form fields arrive as text: a number field takes the number or its decimal string. */
const NumberField = Schema.Union([Schema.Finite, Schema.NumberFromString])
const BooleanField = Schema.Union([Schema.Boolean, Schema.Literals(["true", "false"])])

/** @category schemas */
export const UpscaleFields = Schema.Struct({
  scale: Schema.optionalKey(NumberField.check(Schema.makeFilter((scale: number) => scale === 2 || scale === 4 ? true : "must be 2 or 4"))),
  /** Accepted for compatibility: the resampling adds no detail. */
  creativity: Schema.optionalKey(NumberField)
})

const EditPrompt = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(1500))

const OutputFormat = Schema.Literals(["png", "jpeg", "jpg", "webp"])

/** @category schemas */
export const EditFields = Schema.Struct({
  prompt: EditPrompt,
  model: Schema.optionalKey(Schema.String),
  output_format: Schema.optionalKey(OutputFormat),
  /** Accepted for compatibility with the reference; the local edit draws nothing to blur. */
  safe_mode: Schema.optionalKey(BooleanField)
})

/** @category schemas */
export const OpenAiEditFields = Schema.Struct({
  prompt: EditPrompt,
  model: Schema.optionalKey(Schema.String),
  n: Schema.optionalKey(NumberField.check(Schema.makeFilter((n: number) => n === 1 ? true : "must be 1"))),
  response_format: Schema.optionalKey(Schema.Literals(["b64_json", "url"])),
  output_format: Schema.optionalKey(OutputFormat),
  size: Schema.optionalKey(Schema.String),
  quality: Schema.optionalKey(Schema.String),
  background: Schema.optionalKey(Schema.String),
  user: Schema.optionalKey(Schema.String)
})

/** The request bodies as documented: the JSON form; multipart carries the same fields, `image` as a file. */
const jsonDoc = <F extends Schema.Struct.Fields>(fields: F, identifier: string) =>
  Schema.Struct({ image: Schema.String.annotate({ description: "The image, base64 or a data URL (a file part in multipart)" }), ...fields })
    .annotate({ identifier })

const imageResponse = (description: string) => ({
  description,
  contentType: "image/png",
  headers: ["x-service-image-width", "x-service-image-height"]
})

const binary = (produced: ImageEditor.Produced, headers: Record<string, string> = {}) =>
  HttpServerResponse.uint8Array(produced.bytes, {
    contentType: produced.contentType,
    headers: {
      ...headers,
      "content-encoding": "identity",
      "x-service-image-width": String(produced.width),
      "x-service-image-height": String(produced.height)
    }
  })

/** An upscale's image, its size, the scale asked (what it is priced at) and the scale that fits. */
interface Upscaling {
  readonly image: Uint8Array
  readonly width: number
  readonly height: number
  readonly asked: number
  readonly scale: number
}

/** @category routes */
export const styles = Route.make(
  "GET",
  "/api/v1/image/styles",
  Effect.succeed(Effect.succeed(HttpServerResponse.jsonUnsafe({ object: "list", data: ImageRequest.stylePresets }))),
  {
    summary: "List image styles",
    description: "The style presets style_preset of POST /image/generate names.",
    tags: ["Image"],
    security: "public",
    responses: {
      200: {
        description: "The styles",
        schema: Schema.Struct({ object: Schema.Literal("list"), data: Schema.Array(Schema.String) }).annotate({ identifier: "ImageStyles" })
      }
    }
  }
)

/** @category routes */
export const upscale = Endpoint.make({
  method: "POST",
  path: "/api/v1/image/upscale",
  kind: "image",
  serve: Effect.gen(function*() {
    const tables = yield* PricingEngine.PricingEngine
    const editor = yield* ImageEditor.ImageEditor
    return {
      decode: Effect.gen(function*() {
        const input = yield* ImageInput.read(["scale", "creativity"])
        const fields = yield* RequestBody.decode(UpscaleFields, input.fields)
        const { height, width } = yield* ImageEditor.inspect(input.image)
        const asked = fields.scale ?? 2
        const scale = Math.min(asked, Math.sqrt(ImageEditor.MAX_PIXELS / (width * height)))
        if (scale < 2)
          return yield* Errors.invalidField("image", `Too large to upscale: the result may have at most ${ImageEditor.MAX_PIXELS} pixels`)
        return { image: input.image, width, height, asked, scale } satisfies Upscaling
      }),
      quote: ({ asked }: Upscaling) => PricingEngine.operation(tables, asked === 4 ? "image-upscale-4" : "image-upscale-2"),
      execute: ({ height, image, scale, width }: Upscaling, quote: PricingEngine.Quote) =>
        Effect.map(
          editor.upscale(image, scale),
          (produced) => Endpoint.flat(quote, binary(produced), `${width}x${height} to ${produced.width}x${produced.height}`)
        )
    }
  }),
  docs: {
    summary: "Upscale an image",
    description: "The image at scale 2 or 4 (default 2), as PNG. Multipart (image file) or JSON (image as base64), at most " +
      `25 MB and ${ImageEditor.MAX_PIXELS} pixels, and the result at most as many; a scale of 4 that would exceed it is ` +
      "lowered to the largest that fits. Priced per scale asked.",
    tags: ["Image"],
    request: { contentType: "application/json", schema: jsonDoc(UpscaleFields.fields, "ImageUpscaleRequest") },
    responses: { 200: imageResponse("The upscaled image (image/png)") }
  }
})

/** The model an edit names (id or alias), or the default edit model; one that is not an image model is a 400. */
const editModel = (models: Models.ModelList["Service"], name: string | undefined) => {
  if (name !== undefined) return models.image(Option.match(models.get(name), { onNone: () => name, onSome: (model) => model.id }))
  const images = models.all.filter((model): model is Models.ImageModel => model.type === "image")
  const chosen = images.find((model) => (model.traits ?? []).includes("default_edit"))
    ?? images.find((model) => (model.traits ?? []).includes("default")) ?? images[0]
  return chosen === undefined ? Effect.fail(Errors.invalidField("model", "No image model is configured")) : Effect.succeed(chosen)
}

const formatOf = (format: typeof OutputFormat.Type | undefined): ImageRequest.Format => format === "jpg" ? "jpeg" : format ?? "png"

/** What every edit's fields have: the prompt and the format of the answer. */
interface EditRequest {
  readonly prompt: string
  readonly output_format?: typeof OutputFormat.Type
}

/** An edit's base image and the layers laid over it (none but in a multi-edit), its fields and the model that draws it. */
interface Editing<F extends EditRequest> {
  readonly images: readonly [Uint8Array, ...Array<Uint8Array>]
  readonly fields: F
  readonly model: Models.ImageModel
}

/**
 * An edit endpoint, as the edit routes declare it: the request `decode` reads, priced as one image
 * of the edit's model, drawn by the `ImageEditor`, answered as `respond` says; `what` names the
 * edit in the usage notes.
 */
const editing = <F extends EditRequest>({ decode, docs, path, respond, what }: {
  readonly path: `/${string}`
  readonly decode: (models: Models.ModelList["Service"]) => Effect.Effect<Editing<F>, Errors.ApiError, Route.RequestServices>
  readonly respond: (produced: ImageEditor.Produced, headers: Record<string, string>, fields: F) => HttpServerResponse.HttpServerResponse
  readonly what: (images: number) => string
  readonly docs: Omit<Route.Docs, "security">
}) =>
  Endpoint.make({
    method: "POST",
    path,
    kind: "image",
    serve: Effect.gen(function*() {
      const tables = yield* PricingEngine.PricingEngine
      const imageEditor = yield* ImageEditor.ImageEditor
      return {
        decode: decode(yield* Models.ModelList),
        subject: ({ model }: Editing<F>) => ({ models: [model.id] }),
        quote: ({ model }: Editing<F>) => PricingEngine.image(tables, { model: model.id }),
        execute: ({ fields, images, model }: Editing<F>, quote: PricingEngine.Quote) => {
          const format = formatOf(fields.output_format)
          const [image, ...layers] = images
          return Effect.map(imageEditor.edit({ model, image, layers, prompt: fields.prompt, format }), (produced) =>
            Endpoint.flat(
              quote,
              respond(produced, Models.headersOf(model), fields),
              `${what(images.length)}, ${produced.width}x${produced.height} ${format}`
            ))
        }
      }
    }),
    docs
  })

/** The request of an edit of one image, with `schema`'s fields. */
const oneImage = <S extends typeof EditFields | typeof OpenAiEditFields>(schema: S) => (models: Models.ModelList["Service"]) =>
  Effect.gen(function*() {
    const input = yield* ImageInput.read(Object.keys(schema.fields))
    const fields = (yield* RequestBody.decode(schema, input.fields)) as S["Type"]
    yield* ImageEditor.inspect(input.image)
    const model = yield* editModel(models, fields.model)
    const editing: Editing<S["Type"]> = { images: [input.image], fields, model }
    return editing
  })

/** @category routes */
export const edit = editing({
  path: "/api/v1/image/edit",
  decode: oneImage(EditFields),
  respond: (produced, headers) => binary(produced, headers),
  what: () => "edit",
  docs: {
    summary: "Edit an image",
    description: "The image changed as prompt says, by an image model (model, default the one with the default_edit trait), " +
      "in output_format (png by default). Multipart (image file) or JSON (image as base64), at most 25 MB and " +
      `${ImageEditor.MAX_PIXELS} pixels. Priced as one image of the model.`,
    tags: ["Image"],
    request: { contentType: "application/json", schema: jsonDoc(EditFields.fields, "ImageEditRequest") },
    responses: {
      200: {
        ...imageResponse("The edited image (image/png, image/jpeg or image/webp)"),
        headers: [...Models.headerNames, "x-service-image-width", "x-service-image-height"]
      }
    }
  }
})

/** @category routes */
export const openAiEdit = editing<typeof OpenAiEditFields.Type>({
  path: "/api/v1/images/edits",
  decode: oneImage(OpenAiEditFields),
  what: () => "edit",
  respond: (produced, headers, fields) => {
    const base64 = Buffer.from(produced.bytes).toString("base64")
    return HttpServerResponse.jsonUnsafe({
      created: Math.floor(Date.now() / 1000),
      data: [fields.response_format === "url" ? { url: `data:${produced.contentType};base64,${base64}` } : { b64_json: base64 }]
    }, { headers })
  },
  docs: {
    summary: "Edit an image (OpenAI-compatible)",
    description: "OpenAI's image edit (client.images.edit): multipart with one image and a prompt, n 1. Runs and is priced as " +
      "POST /image/edit; answers the OpenAI images body (response_format url: a data URL). size, quality, background and " +
      "user have no effect.",
    tags: ["Image"],
    request: { contentType: "application/json", schema: jsonDoc(OpenAiEditFields.fields, "ImagesEditsRequest") },
    responses: {
      200: {
        description: "The edited image",
        schema: Schema.Struct({
          created: Schema.Int,
          data: Schema.Array(Schema.Union([Schema.Struct({ b64_json: Schema.String }), Schema.Struct({ url: Schema.String })]))
        }).annotate({ identifier: "ImagesEditsResponse" }),
        headers: Models.headerNames
      }
    }
  }
})

/**
 * The most images a multi-edit takes (the base and its layers): the reference leaves it to each
 * model; one limit for all keeps the form's memory bounded (4 x 25 MB).
 *
 * @category constants
 */
export const MAX_EDIT_IMAGES = 4

/**
 * The fewest pixels a multi-edit's image may have (256 x 256), as the reference says.
 *
 * @category constants
 */
export const MIN_EDIT_PIXELS = 65_536

/** @category schemas */
export const MultiEditFields = Schema.Struct({
  prompt: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(32_768)),
  modelId: Schema.optionalKey(Schema.String),
  output_format: Schema.optionalKey(OutputFormat),
  /** The reference's ratios, accepted for compatibility: the edit keeps the base image's size. */
  aspect_ratio: Schema.optionalKey(Schema.Literals(["auto", "1:1", "3:2", "16:9", "21:9", "9:16", "2:3", "3:4", "4:5"])),
  /** Accepted for compatibility with the reference; the local edit draws nothing to blur. */
  safe_mode: Schema.optionalKey(BooleanField)
})

/** @category routes */
export const multiEdit = editing({
  path: "/api/v1/image/multi-edit",
  decode: (models) =>
    Effect.gen(function*() {
      const input = yield* ImageInput.readMany(Object.keys(MultiEditFields.fields), MAX_EDIT_IMAGES)
      const fields = yield* RequestBody.decode(MultiEditFields, input.fields)
      for (const [i, image] of input.images.entries()) {
        const { height, width } = yield* ImageEditor.inspect(image, "images")
        if (width * height < MIN_EDIT_PIXELS) {
          return yield* Errors.invalidField(
            "images",
            `Image ${i + 1} has ${width}x${height} pixels: at least ${MIN_EDIT_PIXELS} are needed`
          )
        }
      }
      const model = yield* Effect.mapError(
        editModel(models, fields.modelId),
        (error) => fields.modelId === undefined ? error : Errors.invalidField("modelId", `${fields.modelId} is not an image model`)
      )
      if (fields.prompt.length > model.promptCharacterLimit) {
        return yield* Errors.invalidField("prompt", `${model.id} reads at most ${model.promptCharacterLimit} characters`)
      }
      return { images: input.images as Editing<typeof fields>["images"], fields, model }
    }),
  respond: (produced, headers) => binary(produced, headers),
  what: (images) => `multi-edit of ${images} images`,
  docs: {
    summary: "Edit an image with layers",
    description: `A base image and up to ${MAX_EDIT_IMAGES - 1} more laid over it (images, in order), changed as prompt ` +
      "says by an image model (modelId, default the one with the default_edit trait), in output_format (png by default), " +
      "at the base image's size. Multipart (images file parts) or JSON (images as base64 strings; URLs are not supported), " +
      `each at most 25 MB, at least ${MIN_EDIT_PIXELS} and at most ${ImageEditor.MAX_PIXELS} pixels. Priced as one image ` +
      "of the model, like POST /image/edit.",
    tags: ["Image"],
    request: {
      contentType: "application/json",
      schema: Schema.Struct({
        images: Schema.Array(Schema.String).annotate({
          description: "The base image, then its layers: base64 or data URLs (file parts in multipart)"
        }),
        ...MultiEditFields.fields
      }).annotate({ identifier: "ImageMultiEditRequest" })
    },
    responses: {
      200: {
        ...imageResponse("The edited image (image/png, image/jpeg or image/webp)"),
        headers: [...Models.headerNames, "x-service-image-width", "x-service-image-height"]
      }
    }
  }
})

/** @category routes */
export const backgroundRemove = Endpoint.make({
  method: "POST",
  path: "/api/v1/image/background-remove",
  kind: "image",
  serve: Effect.gen(function*() {
    const quote = PricingEngine.operation(yield* PricingEngine.PricingEngine, "image-background-remove")
    const imageEditor = yield* ImageEditor.ImageEditor
    return {
      decode: Effect.gen(function*() {
        const input = yield* ImageInput.read([])
        const { height, width } = yield* ImageEditor.inspect(input.image)
        return { image: input.image, width, height }
      }),
      quote: () => quote,
      execute: ({ height, image, width }: { readonly image: Uint8Array; readonly width: number; readonly height: number }) =>
        Effect.map(imageEditor.removeBackground(image), (produced) => Endpoint.flat(quote, binary(produced), `${width}x${height}`))
    }
  }),
  docs: {
    summary: "Remove an image's background",
    description: "The image with its background transparent, as PNG. Multipart (image file) or JSON (image as base64), at most " +
      `25 MB and ${ImageEditor.MAX_PIXELS} pixels; image_url is not supported.`,
    tags: ["Image"],
    request: { contentType: "application/json", schema: jsonDoc({}, "ImageBackgroundRemoveRequest") },
    responses: { 200: imageResponse("The image with a transparent background (image/png)") }
  }
})

/** @category routes */
export const routes = [styles, upscale, edit, multiEdit, backgroundRemove, openAiEdit] as const
