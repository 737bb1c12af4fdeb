/**
 * Operations on an image the caller sends: upscaling, editing by a prompt, and background removal.
 * The service's image routes check the image first (`inspect`: it must decode, within the pixel
 * limits) and then call one of these; every result is a PNG (or the asked format, for an edit).
 *
 * **Details**
 *
 * Upscaling and background removal are image processing, done here with sharp whatever the
 * configuration: a Lanczos resampling, and an alpha mask of the pixels close to the border's color
 * (the background of a product shot or a drawing). An edit is generative: a model with upstreams
 * sends it to their OpenAI-compatible `POST /images/edits`; a model without is edited locally,
 * deterministically, by the prompt (a black-and-white prompt desaturates, any other turns the hues
 * by an angle drawn from the prompt), so the dev server's results can be checked by decoding them.
 * A multi-edit sends layers with the base image: locally they are laid over it (each stretched to
 * the base's size, alpha kept) before the prompt's change; upstream they go as further `image[]`
 * parts, as OpenAI's edit takes several images.
 *
 * @since 0.1.0
 */
import { Errors, type ImageRequest, type Models } from "@tollgate/core"
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import Sharp, { type Sharp as SharpImage } from "sharp"
import * as ImageBackend from "./ImageBackend.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

/**
 * The most pixels an image may have, sent or produced (4096 x 4096).
 *
 * @category constants
 */
export const MAX_PIXELS = 16_777_216

/**
 * What an image the caller sent is.
 *
 * @category models
 */
export interface Inspected {
  readonly width: number
  readonly height: number
  readonly format: string
}

/**
 * An image produced.
 *
 * @category models
 */
export interface Produced {
  readonly bytes: Uint8Array
  readonly contentType: string
  readonly width: number
  readonly height: number
}

/** @category models */
export interface EditCall {
  readonly model: Models.ImageModel
  readonly image: Uint8Array
  /** Images laid over `image`, in order (a multi-edit); none for a plain edit. */
  readonly layers?: ReadonlyArray<Uint8Array>
  readonly prompt: string
  readonly format: ImageRequest.Format
}

/** @category services */
export class ImageEditor extends Context.Service<ImageEditor, {
  /** Scales both sides by `scale`. */
  readonly upscale: (image: Uint8Array, scale: number) => Effect.Effect<Produced, Errors.ApiError>
  readonly edit: (call: EditCall) => Effect.Effect<Produced, Errors.ApiError>
  /** The image with its background transparent, as PNG. */
  readonly removeBackground: (image: Uint8Array) => Effect.Effect<Produced, Errors.ApiError>
}>()("@tollgate/backends/ImageEditor") {}

const unreadable = (field = "image") => Errors.invalidField(field, "Not an image that can be read (PNG, JPEG, WebP, GIF, AVIF or TIFF)")

const sharpOf = (bytes: Uint8Array) => Sharp(bytes, { limitInputPixels: MAX_PIXELS, failOn: "error" })

/**
 * Reads an image's size and format without decoding its pixels; an unreadable one, or one over
 * `MAX_PIXELS`, is a 400 naming `field` (`image` unless told).
 *
 * @category inspection
 */
export const inspect = (bytes: Uint8Array, field = "image"): Effect.Effect<Inspected, Errors.InvalidRequest> =>
  // The header alone is read, so sharp's own pixel limit need not guard it: without lifting it, an
  // image over that limit would be called unreadable instead of too large.
  Effect.tryPromise({ try: () => Sharp(bytes, { limitInputPixels: false }).metadata(), catch: () => unreadable(field) }).pipe(
    Effect.flatMap(({ format, height, width }) => {
      if (width === undefined || height === undefined || width === 0 || height === 0) return Effect.fail(unreadable(field))
      if (width * height > MAX_PIXELS) {
        return Effect.fail(Errors.invalidField(field, `The image has more than ${MAX_PIXELS} pixels`))
      }
      return Effect.succeed({ width, height, format })
    })
  )

/**
 * Encodes the processed image. Sharp decodes lazily, so damaged pixels behind a readable header
 * fail only here: for the caller's image that is the caller's 400, for an upstream's answer the
 * upstream's failure.
 */
const encode = (image: SharpImage, format: ImageRequest.Format, failure: () => Errors.ApiError) =>
  Effect.tryPromise({
    try: async () => {
      const { data, info } = await image.toFormat(format).toBuffer({ resolveWithObject: true })
      return { bytes: new Uint8Array(data), contentType: ImageBackend.contentTypes[format], width: info.width, height: info.height }
    },
    catch: failure
  })

/**
 * Lanczos resampling to `scale` times each side, as PNG.
 *
 * @category processing
 */
export const upscale = (image: Uint8Array, scale: number): Effect.Effect<Produced, Errors.ApiError> =>
  Effect.flatMap(
    inspect(image),
    ({ height, width }) =>
      encode(sharpOf(image).resize(Math.round(width * scale), Math.round(height * scale), { kernel: "lanczos3", fit: "fill" }), "png", () =>
        unreadable())
  )

/** How far (RGB distance) a pixel may be from the background color and still count as background. */
const BACKGROUND_DISTANCE = 48

/** Pixels masked between two yields to the event loop: a 4096x4096 image would otherwise block it for a second. */
const PIXELS_PER_SLICE = 1 << 20

/**
 * The alpha mask of the background: the mean color of the border pixels is the background, and
 * every pixel within `BACKGROUND_DISTANCE` of it becomes transparent. PNG out.
 *
 * @category processing
 */
export const removeBackground = (image: Uint8Array): Effect.Effect<Produced, Errors.ApiError> =>
  Effect.tryPromise({
    try: async () => {
      const { data, info } = await sharpOf(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
      const { channels, height, width } = info
      const border: Array<number> = []
      for (let x = 0; x < width; x++) border.push(x, (height - 1) * width + x)
      for (let y = 1; y < height - 1; y++) border.push(y * width, y * width + width - 1)
      const background = [0, 1, 2].map((c) => border.reduce((sum, pixel) => sum + data[pixel * channels + c]!, 0) / border.length)
      const [r, g, b] = background as [number, number, number]
      const limit = BACKGROUND_DISTANCE * BACKGROUND_DISTANCE
      for (let start = 0; start < data.length; start += PIXELS_PER_SLICE * channels) {
        const end = Math.min(data.length, start + PIXELS_PER_SLICE * channels)
        for (let i = start; i < end; i += channels) {
          const dr = data[i]! - r
          const dg = data[i + 1]! - g
          const db = data[i + 2]! - b
          if (dr * dr + dg * dg + db * db <= limit) data[i + 3] = 0
        }
        if (end < data.length) await new Promise((resolve) => setImmediate(resolve))
      }
      const png = await Sharp(data, { raw: { width, height, channels } }).png().toBuffer()
      return { bytes: new Uint8Array(png), contentType: "image/png", width, height }
    },
    catch: () => unreadable()
  })

const MONOCHROME = /\b(black and white|black-and-white|grayscale|greyscale|monochrome)\b/iu

/** The prompt's hash as an angle, so one prompt always turns the hues the same way. */
const hueOf = (prompt: string) => {
  let hash = 0x811c9dc5
  for (let i = 0; i < prompt.length; i++) hash = Math.imul(hash ^ prompt.charCodeAt(i), 0x01000193)
  return 30 + ((hash >>> 0) % 300)
}

/**
 * The local edit: desaturated for a black-and-white prompt, hues turned by the prompt's angle
 * otherwise; same size, the asked format.
 *
 * @category processing
 */
export const editLocal = (call: EditCall): Effect.Effect<Produced, Errors.ApiError> =>
  Effect.flatMap(
    inspect(call.image),
    ({ height, width }) =>
      Effect.flatMap(layered(call.image, call.layers ?? [], width, height), (base) => {
        const image = sharpOf(base)
        return encode(
          MONOCHROME.test(call.prompt) ? image.grayscale() : image.modulate({ hue: hueOf(call.prompt) }),
          call.format,
          () => unreadable()
        )
      })
  )

/** The base with each layer, stretched to its size, composited over it in order (PNG). */
const layered = (base: Uint8Array, layers: ReadonlyArray<Uint8Array>, width: number, height: number) =>
  layers.length === 0 ? Effect.succeed(base) : Effect.tryPromise({
    try: async () => {
      const inputs = await Promise.all(layers.map((layer) => sharpOf(layer).resize(width, height, { fit: "fill" }).png().toBuffer()))
      return new Uint8Array(await sharpOf(base).composite(inputs.map((input) => ({ input }))).png().toBuffer())
    },
    catch: () => unreadable("images")
  })

const REFUSAL_CODES = new Set(["content_policy_violation", "moderation_blocked"])

/**
 * An edit through the model's OpenAI-compatible upstreams (`POST /images/edits`, multipart, one
 * base64 image back), re-encoded to the asked format.
 *
 * @category processing
 */
export const editUpstream = Effect.fn("ImageEditor.editUpstream")(function*(call: EditCall, timeout: Duration.Input) {
  const answer = yield* OpenAiCompatible.call(call.model.upstreams, {
    timeout,
    request: (upstream, url) => {
      const form = new FormData()
      const images = [call.image, ...(call.layers ?? [])]
      images.forEach((image, i) =>
        form.append(
          images.length === 1 ? "image" : "image[]",
          new Blob([image as Uint8Array<ArrayBuffer>], { type: "image/png" }),
          `image-${i}.png`
        )
      )
      form.append("prompt", call.prompt)
      form.append("model", upstream.model ?? call.model.id)
      form.append("n", "1")
      form.append("response_format", "b64_json")
      return HttpClientRequest.post(url("/images/edits")).pipe(HttpClientRequest.bodyFormData(form))
    },
    read: (response) =>
      Effect.map(Effect.orElseSucceed(response.json, () => undefined), (body) => {
        const data = typeof body === "object" && body !== null && "data" in body ? body.data : undefined
        const first: unknown = Array.isArray(data) ? data[0] : undefined
        return typeof first === "object" && first !== null && "b64_json" in first && typeof first.b64_json === "string"
          ? new Uint8Array(Buffer.from(first.b64_json, "base64"))
          : undefined
      }),
    onRefusal: (refusal) =>
      new Errors.InvalidRequest({
        message: refusal.code !== undefined && REFUSAL_CODES.has(refusal.code)
          ? "The prompt was refused by the content policy"
          : `The image model refused the request: ${refusal.message}`
      })
  })
  return yield* encode(
    sharpOf(answer.value),
    call.format,
    () => new Errors.BadGateway({ message: "The image model answered with an image that could not be read" })
  )
})

/** @category options */
export interface Options {
  /** Per upstream attempt of an edit; default 120 seconds. */
  readonly timeout?: Duration.Input
}

/**
 * Every operation local: the dev default.
 *
 * @category layers
 */
export const layerLocal: Layer.Layer<ImageEditor> = Layer.succeed(ImageEditor, { upscale, edit: editLocal, removeBackground })

/**
 * Edits of models with upstreams go to them; the rest, and upscaling and background removal, are
 * done here.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<ImageEditor, never, HttpClient.HttpClient> =>
  Layer.effect(
    ImageEditor,
    Effect.map(HttpClient.HttpClient, (client) =>
      ImageEditor.of({
        upscale,
        removeBackground,
        edit: (call) =>
          call.model.upstreams.length === 0
            ? editLocal(call)
            : editUpstream(call, options.timeout ?? Duration.seconds(120)).pipe(Effect.provideService(HttpClient.HttpClient, client))
      }))
  )
