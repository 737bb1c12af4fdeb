/**
 * Video generation, which takes longer than a request: a job is submitted, polled, and its video
 * fetched once done. Upstreams speak the OpenAI videos API (`POST /videos`, `GET /videos/{id}`,
 * `GET /videos/{id}/content`). A model with no upstreams is the dev model: its job is done as soon
 * as it is polled, and its video is generated on the spot (a tiny moving gradient, uncompressed,
 * in the YUV4MPEG2 container that ffmpeg and mpv play), so nothing is stored.
 *
 * @since 0.1.0
 */
import { Errors, type Models, type VideoJobs } from "@tollgate/core"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

/** @category models */
export interface Submission {
  readonly model: Models.VideoModel
  readonly prompt: string
  readonly seconds: number
  readonly size: string
}

/** Where a submitted job runs: an upstream and its job id, or nothing for the local renderer. @category models */
export interface Submitted {
  readonly upstream?: string | undefined
  readonly upstreamJobId?: string | undefined
}

/** @category models */
export type Status =
  | { readonly state: "queued"; readonly progress?: number | undefined }
  | { readonly state: "completed" }
  | { readonly state: "failed"; readonly error: string }

/** @category models */
export interface Video {
  readonly contentType: string
  readonly video: Stream.Stream<Uint8Array, Errors.ApiError>
}

/** @category services */
export class VideoBackend extends Context.Service<VideoBackend, {
  readonly submit: (submission: Submission) => Effect.Effect<Submitted, Errors.ApiError>
  readonly poll: (model: Models.VideoModel, job: VideoJobs.Job) => Effect.Effect<Status, Errors.ApiError>
  readonly content: (model: Models.VideoModel, job: VideoJobs.Job) => Effect.Effect<Video, Errors.ApiError>
}>()("@tollgate/backends/VideoBackend") {}

const FPS = 8

/**
 * The dev model's video: `seconds` of a gradient that moves with the prompt's hash, 8 frames a
 * second, 4:2:0.
 *
 * @category local
 */
export const localVideo = (job: Pick<VideoJobs.Job, "prompt" | "seconds" | "size">): Uint8Array => {
  const [width, height] = job.size.split("x").map(Number) as [number, number]
  const frames = job.seconds * FPS
  const header = new TextEncoder().encode(`YUV4MPEG2 W${width} H${height} F${FPS}:1 Ip A1:1 C420jpeg\n`)
  const frameHeader = new TextEncoder().encode("FRAME\n")
  const luma = width * height
  const chroma = Math.ceil(width / 2) * Math.ceil(height / 2)
  const frameBytes = frameHeader.length + luma + 2 * chroma
  const out = new Uint8Array(header.length + frames * frameBytes)
  out.set(header, 0)
  const seed = [...job.prompt].reduce((sum, char) => (sum * 31 + char.charCodeAt(0)) >>> 0, 7)
  for (let f = 0; f < frames; f++) {
    let at = header.length + f * frameBytes
    out.set(frameHeader, at)
    at += frameHeader.length
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) out[at + y * width + x] = (x * 4 + y * 2 + f * 8 + seed) & 0xff
    }
    out.fill(64 + (seed % 128), at + luma, at + luma + chroma)
    out.fill(192 - (seed % 128), at + luma + chroma, at + luma + 2 * chroma)
  }
  return out
}

const upstreamOf = (model: Models.VideoModel, job: VideoJobs.Job) => model.upstreams.filter((upstream) => upstream.baseUrl === job.upstream)

const refused = (refusal: OpenAiCompatible.UpstreamRefusal) =>
  new Errors.InvalidRequest({ message: `The video model refused the request: ${refusal.message}` })

const lost = () => new Errors.BadGateway({ message: "The upstream that runs this job is no longer configured" })

/** @category options */
export interface Options {
  readonly timeout?: Duration.Input
}

/**
 * The adapter over an `HttpClient`.
 *
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options: Options = {}) {
  const client = yield* HttpClient.HttpClient
  const timeout = options.timeout ?? Duration.seconds(60)
  const json = (response: { readonly json: Effect.Effect<unknown, unknown> }) =>
    Effect.map(
      Effect.orElseSucceed(response.json, () => undefined),
      (body) => typeof body === "object" && body !== null ? body as Record<string, unknown> : undefined
    )
  const withClient = Effect.provideService(HttpClient.HttpClient, client)
  return VideoBackend.of({
    submit: Effect.fn("VideoBackend.submit")(function*(submission: Submission) {
      if (submission.model.upstreams.length === 0) return {}
      const answer = yield* OpenAiCompatible.call(submission.model.upstreams, {
        timeout,
        request: (upstream, url) =>
          HttpClientRequest.post(url("/videos")).pipe(HttpClientRequest.bodyJsonUnsafe({
            model: upstream.model ?? submission.model.id,
            prompt: submission.prompt,
            seconds: String(submission.seconds),
            size: submission.size
          })),
        read: (response) => Effect.map(json(response), (body) => typeof body?.["id"] === "string" ? body["id"] : undefined),
        onRefusal: refused
      }).pipe(withClient)
      return { upstream: answer.upstream.baseUrl, upstreamJobId: answer.value }
    }),
    poll: Effect.fn("VideoBackend.poll")(function*(model: Models.VideoModel, job: VideoJobs.Job) {
      if (job.upstream === undefined) return { state: "completed" } satisfies Status
      const upstreams = upstreamOf(model, job)
      if (upstreams.length === 0) return yield* lost()
      const answer = yield* OpenAiCompatible.call(upstreams, {
        timeout,
        request: (_, url) => HttpClientRequest.get(url(`/videos/${encodeURIComponent(job.upstreamJobId ?? "")}`)),
        read: (response) =>
          Effect.map(json(response), (body): Status | undefined => {
            switch (body?.["status"]) {
              case "completed":
                return { state: "completed" }
              case "failed": {
                const error = body["error"] as { message?: unknown } | undefined
                return { state: "failed", error: typeof error?.message === "string" ? error.message : "The video could not be generated" }
              }
              case "queued":
              case "in_progress":
                return { state: "queued", progress: typeof body["progress"] === "number" ? body["progress"] : undefined }
              default:
                return undefined
            }
          }),
        onRefusal: refused
      }).pipe(withClient)
      return answer.value
    }),
    content: Effect.fn("VideoBackend.content")(function*(model: Models.VideoModel, job: VideoJobs.Job) {
      if (job.upstream === undefined) {
        return { contentType: "video/x-yuv4mpeg", video: Stream.succeed(localVideo(job)) } satisfies Video
      }
      const upstreams = upstreamOf(model, job)
      if (upstreams.length === 0) return yield* lost()
      const answer = yield* OpenAiCompatible.call(upstreams, {
        timeout,
        request: (_, url) => HttpClientRequest.get(url(`/videos/${encodeURIComponent(job.upstreamJobId ?? "")}/content`)),
        read: (response) => Effect.succeed(response),
        onRefusal: refused
      }).pipe(withClient)
      return {
        contentType: answer.value.headers["content-type"] ?? "video/mp4",
        video: answer.value.stream.pipe(Stream.mapError(() => new Errors.BadGateway({ message: "The upstream's video stream broke off" })))
      } satisfies Video
    })
  })
})

/** @category layers */
export const layer = (options: Options = {}): Layer.Layer<VideoBackend, never, HttpClient.HttpClient> =>
  Layer.effect(VideoBackend, make(options))
