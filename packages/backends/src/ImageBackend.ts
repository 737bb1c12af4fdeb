/**
 * Image generation backends. A backend draws the images of a resolved `ImageRequest` and reports
 * the content-safety flags of what it drew; the finishing step shared by every backend then
 * enforces the request: the asked size and format, a blur over an image flagged adult when
 * `safe_mode` is on (and over any content violation), and EXIF with the generation info only when
 * `embed_exif_metadata` asks for it.
 *
 * **When to use**
 *
 * Two layers: `layerLocal`, a renderer that needs nothing (the dev default: abstract shapes drawn
 * from the seed and the prompt, so the same request always gives the same bytes), and `layer`,
 * which sends each model that lists upstreams to an OpenAI-compatible images API and draws the
 * others locally.
 *
 * @since 0.1.0
 */
import { Errors, type ImageRequest } from "@tollgate/core"
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient } from "effect/http"
import Sharp from "sharp"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

/**
 * What a backend says about an image it drew.
 *
 * @category models
 */
export interface Classification {
  readonly adult: boolean
  readonly minor: boolean
  /** Content that must not be shown at all (adult content involving a minor, or a provider's refusal). */
  readonly violation: boolean
  /** A violation of an adult-content model's own rules. */
  readonly adultModelViolation: boolean
}

/**
 * An image as drawn: any format sharp reads, any size, and its classification.
 *
 * @category models
 */
export interface Drawn {
  readonly bytes: Uint8Array
  readonly classification: Classification
}

/**
 * The content-safety flags of a response, each the OR over its images, as the
 * `x-service-is-*` / `x-service-contains-minor` headers report them.
 *
 * @category models
 */
export interface SafetyFlags {
  readonly isBlurred: boolean
  readonly isContentViolation: boolean
  readonly isAdultModelContentViolation: boolean
  readonly containsMinor: boolean
}

/**
 * The finished images, in the asked format and size.
 *
 * @category models
 */
export interface Generation {
  readonly images: ReadonlyArray<Uint8Array>
  readonly contentType: string
  readonly flags: SafetyFlags
}

/**
 * @category services
 */
export class ImageBackend extends Context.Service<ImageBackend, {
  /** Draws `request.variants` images of `prompt` (the request's prompt, or its enhanced form). */
  readonly generate: (
    request: ImageRequest.ImageRequest,
    prompt: string
  ) => Effect.Effect<Generation, Errors.ApiError>
}>()("@tollgate/backends/ImageBackend") {}

/** @category constants */
export const contentTypes: { readonly [F in ImageRequest.Format]: string } = {
  jpeg: "image/jpeg",
  png: "image/png",
  webp: "image/webp"
}

const ADULT = /\b(nsfw|nude|nudity|naked|explicit|porn\w*|erotic\w*|sex|sexual)\b/iu
const MINOR = /\b(child|children|kid|kids|minor|minors|toddler|baby|babies|teen|teens|teenager|schoolgirl|schoolboy)\b/iu

/**
 * The local renderer's classifier: words of the prompt. An adult prompt involving a minor is a
 * violation.
 *
 * @category classification
 */
export const classifyPrompt = (prompt: string): Classification => {
  const adult = ADULT.test(prompt)
  const minor = MINOR.test(prompt)
  return { adult, minor, violation: adult && minor, adultModelViolation: false }
}

const BLUR_SIGMA = 40

const generationInfo = (request: ImageRequest.ImageRequest, prompt: string, variant: number) =>
  JSON.stringify({
    model: request.model.id,
    prompt,
    negative_prompt: request.negativePrompt,
    seed: request.seed,
    variant,
    steps: request.steps,
    cfg_scale: request.cfgScale,
    width: request.width,
    height: request.height,
    quality: request.quality,
    style_preset: request.stylePreset
  })

const finishOne = (request: ImageRequest.ImageRequest, prompt: string, drawn: Drawn, variant: number, blur: boolean) =>
  Effect.tryPromise({
    try: async () => {
      let image = Sharp(drawn.bytes)
      const { height, width } = await image.metadata()
      if (width !== request.width || height !== request.height) {
        image = image.resize(request.width, request.height, { fit: "cover" })
      }
      if (blur) image = image.blur(BLUR_SIGMA)
      image = image.toFormat(request.format)
      if (request.embedExifMetadata) {
        image = image.withExif({
          IFD0: {
            ImageDescription: generationInfo(request, prompt, variant),
            Software: "tollgate"
          }
        })
      }
      return new Uint8Array(await image.toBuffer())
    },
    catch: (cause) => cause
  }).pipe(Effect.catch((cause) =>
    // The encoder's own text names internals; the caller gets a stable message, the log the cause.
    Effect.andThen(
      Effect.logWarning("image encoding failed", { cause: String(cause) }),
      Effect.fail(new Errors.InferenceFailed({ message: "The image could not be encoded" }))
    )
  ))

/**
 * The step every backend shares: size, format, safety blur and EXIF.
 *
 * @category finishing
 */
export const finish = Effect.fn("ImageBackend.finish")(function*(
  request: ImageRequest.ImageRequest,
  prompt: string,
  drawn: ReadonlyArray<Drawn>
) {
  const any = (f: (c: Classification) => boolean) => drawn.some((d) => f(d.classification))
  const blurOf = (c: Classification) => c.violation || (request.safeMode && c.adult)
  const images = yield* Effect.forEach(
    drawn,
    (d, i) => finishOne(request, prompt, d, i, blurOf(d.classification)),
    { concurrency: "unbounded" }
  )
  return {
    images,
    contentType: contentTypes[request.format],
    flags: {
      isBlurred: any(blurOf),
      isContentViolation: any((c) => c.violation),
      isAdultModelContentViolation: any((c) => c.adultModelViolation),
      containsMinor: any((c) => c.minor)
    }
  } satisfies Generation
})

/** FNV-1a over the text, then a xorshift-multiply generator: deterministic and good enough for shapes. */
const randomOf = (text: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  let state = h >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const hsl = (next: () => number) => `hsl(${Math.floor(next() * 360)},${40 + Math.floor(next() * 50)}%,${30 + Math.floor(next() * 45)}%)`

/**
 * The local renderer's picture: a gradient and shapes whose colors and places follow from the
 * seed, the prompt and the variant index, with a small watermark unless hidden.
 *
 * @category rendering
 */
export const svgOf = (request: ImageRequest.ImageRequest, prompt: string, variant: number): string => {
  const next = randomOf(`${request.seed}\u0000${variant}\u0000${request.model.id}\u0000${prompt}`)
  const { height: h, width: w } = request
  const shapes: Array<string> = []
  const count = 6 + Math.floor(next() * 10)
  for (let i = 0; i < count; i++) {
    const x = Math.round(next() * w)
    const y = Math.round(next() * h)
    const size = Math.round((0.05 + next() * 0.3) * Math.min(w, h))
    const fill = `fill="${hsl(next)}" fill-opacity="${(0.35 + next() * 0.5).toFixed(2)}"`
    shapes.push(
      next() < 0.5
        ? `<circle cx="${x}" cy="${y}" r="${size}" ${fill}/>`
        : `<rect x="${x - size}" y="${y - size / 2}" width="${size * 2}" height="${size}" rx="${
          Math.round(size / 6)
        }" ${fill} transform="rotate(${Math.round(next() * 180)} ${x} ${y})"/>`
    )
  }
  const mark = Math.max(4, Math.round(Math.min(w, h) / 24))
  const watermark = request.hideWatermark
    ? ""
    : `<rect x="${w - mark * 3}" y="${h - mark * 2}" width="${mark * 2}" height="${mark}" fill="#ffffff" fill-opacity="0.6"/>`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">` +
    `<defs><linearGradient id="g" x1="0" y1="0" x2="${next().toFixed(2)}" y2="1">` +
    `<stop offset="0" stop-color="${hsl(next)}"/><stop offset="1" stop-color="${hsl(next)}"/></linearGradient></defs>` +
    `<rect width="${w}" height="${h}" fill="url(#g)"/>${shapes.join("")}${watermark}</svg>`
}

const drawLocal = (request: ImageRequest.ImageRequest, prompt: string): Effect.Effect<ReadonlyArray<Drawn>> => {
  const classification = classifyPrompt(prompt)
  return Effect.succeed(Array.from({ length: request.variants }, (_, variant) => ({
    bytes: new TextEncoder().encode(svgOf(request, prompt, variant)),
    classification
  })))
}

/**
 * The local renderer for every model.
 *
 * @category constructors
 */
export const makeLocal = (): ImageBackend["Service"] => ({
  generate: Effect.fn("ImageBackend.generate")(function*(request, prompt) {
    return yield* finish(request, prompt, yield* drawLocal(request, prompt))
  })
})

/**
 * The local renderer for every model: the dev default.
 *
 * @category layers
 */
export const layerLocal: Layer.Layer<ImageBackend> = Layer.sync(ImageBackend, makeLocal)

/** @category options */
export interface Options {
  /** Per upstream attempt; default 120 seconds. */
  readonly timeout?: Duration.Input
}

const flagOf = (flags: Record<string, unknown>, key: string) => flags[key] === true

/**
 * Reads an images response: `data[].b64_json`, with an optional `content_flags` object per item
 * (`adult`, `minor`, `violation`, `adult_model_violation`) for providers that classify their output.
 */
const drawnOf = (body: unknown, expected: number): ReadonlyArray<Drawn> | undefined => {
  const data = typeof body === "object" && body !== null && "data" in body ? body.data : undefined
  if (!Array.isArray(data) || data.length !== expected) return undefined
  const drawn: Array<Drawn> = []
  for (const item of data as Array<Record<string, unknown>>) {
    if (typeof item?.b64_json !== "string") return undefined
    const flags = typeof item.content_flags === "object" && item.content_flags !== null
      ? item.content_flags as Record<string, unknown>
      : {}
    drawn.push({
      bytes: new Uint8Array(Buffer.from(item.b64_json, "base64")),
      classification: {
        adult: flagOf(flags, "adult"),
        minor: flagOf(flags, "minor"),
        violation: flagOf(flags, "violation"),
        adultModelViolation: flagOf(flags, "adult_model_violation")
      }
    })
  }
  return drawn
}

const REFUSAL_CODES = new Set(["content_policy_violation", "moderation_blocked"])

/**
 * Draws through an OpenAI-compatible `POST /images/generations` upstream (base64 response), asking
 * for the pixel size the request resolved to.
 *
 * @category rendering
 */
export const drawUpstream = Effect.fn("ImageBackend.drawUpstream")(function*(
  request: ImageRequest.ImageRequest,
  prompt: string,
  options: Options = {}
) {
  const body = yield* OpenAiCompatible.postJson(
    request.model.upstreams,
    "/images/generations",
    request.model.id,
    {
      prompt,
      n: request.variants,
      size: `${request.width}x${request.height}`,
      response_format: "b64_json",
      output_format: request.format,
      ...(request.quality === undefined ? {} : { quality: request.quality })
    },
    {
      timeout: options.timeout ?? Duration.seconds(120),
      onRefusal: (refusal) =>
        new Errors.InvalidRequest({
          message: refusal.code !== undefined && REFUSAL_CODES.has(refusal.code)
            ? "The prompt was refused by the content policy"
            : `The image model refused the request: ${refusal.message}`
        })
    }
  )
  const drawn = drawnOf(body, request.variants)
  if (drawn === undefined) {
    return yield* new Errors.BadGateway({ message: "The upstream answered with an unexpected images body" })
  }
  return drawn
})

/**
 * Routes each model: those with upstreams through the OpenAI-compatible API, the rest locally.
 *
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<ImageBackend, never, HttpClient.HttpClient> =>
  Layer.effect(
    ImageBackend,
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      return ImageBackend.of({
        generate: Effect.fn("ImageBackend.generate")(function*(request, prompt) {
          const drawn = request.model.upstreams.length === 0
            ? yield* drawLocal(request, prompt)
            : yield* drawUpstream(request, prompt, options).pipe(Effect.provideService(HttpClient.HttpClient, client))
          return yield* finish(request, prompt, drawn)
        })
      })
    })
  )
