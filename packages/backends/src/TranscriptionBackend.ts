/**
 * Speech to text through an OpenAI-compatible `POST /audio/transcriptions` upstream, or, for a
 * model with no upstreams, the dev model, which reads a WAV's duration and answers a fixed text.
 * The upstream is always asked for `verbose_json`: its `duration` is what the call is billed by,
 * and its segments let the route answer `srt` and `vtt` itself, the same way for every upstream.
 *
 * @since 0.1.0
 */
import { Errors, type Models } from "@tollgate/core"
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"
import * as Wav from "./Wav.ts"

/** @category models */
export interface Call {
  readonly model: Models.TranscriptionModel
  readonly file: Uint8Array
  readonly filename: string
  readonly contentType: string
  readonly language?: string | undefined
  readonly prompt?: string | undefined
  readonly temperature?: number | undefined
}

/** @category models */
export interface Segment {
  readonly start: number
  readonly end: number
  readonly text: string
}

/** @category models */
export interface Transcript {
  readonly text: string
  readonly language: string
  /** Seconds of audio, when the model said (the dev model always does). */
  readonly duration: number | undefined
  readonly segments: ReadonlyArray<Segment>
}

/** @category services */
export class TranscriptionBackend extends Context.Service<TranscriptionBackend, {
  readonly transcribe: (call: Call) => Effect.Effect<Transcript, Errors.ApiError>
}>()("@tollgate/backends/TranscriptionBackend") {}

/**
 * What the dev model hears in any WAV.
 *
 * @category constants
 */
export const localText = "This is the tollgate dev transcription model; it hears no words."

/**
 * The dev model: WAV only (it reads the duration from the header).
 *
 * @category local
 */
export const transcribeLocal = (call: Pick<Call, "file" | "language">): Effect.Effect<Transcript, Errors.InvalidRequest> => {
  const duration = Wav.duration(call.file)
  if (duration === undefined) {
    return Effect.fail(Errors.invalidParameters([{ path: ["file"], message: "The dev transcription model reads PCM WAV files only" }]))
  }
  return Effect.succeed({
    text: localText,
    language: call.language ?? "english",
    duration,
    segments: [{ start: 0, end: duration, text: localText }]
  })
}

const readTranscript = (body: unknown): Transcript | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  const fields = body as Record<string, unknown>
  if (typeof fields["text"] !== "string") return undefined
  const usage = fields["usage"] as { type?: unknown; seconds?: unknown } | undefined
  const duration = typeof fields["duration"] === "number"
    ? fields["duration"]
    : usage?.type === "duration" && typeof usage.seconds === "number"
    ? usage.seconds
    : undefined
  const segments = Array.isArray(fields["segments"])
    ? (fields["segments"] as Array<Record<string, unknown>>).flatMap((segment) =>
      typeof segment["start"] === "number" && typeof segment["end"] === "number" && typeof segment["text"] === "string"
        ? [{ start: segment["start"], end: segment["end"], text: segment["text"] }]
        : []
    )
    : []
  return {
    text: fields["text"],
    language: typeof fields["language"] === "string" ? fields["language"] : "unknown",
    duration,
    segments: segments.length > 0 || duration === undefined ? segments : [{ start: 0, end: duration, text: fields["text"] }]
  }
}

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
  const timeout = options.timeout ?? Duration.minutes(5)
  return TranscriptionBackend.of({
    transcribe: Effect.fn("TranscriptionBackend.transcribe")(function*(call: Call) {
      if (call.model.upstreams.length === 0) return yield* transcribeLocal(call)
      const answer = yield* OpenAiCompatible.call(call.model.upstreams, {
        timeout,
        request: (upstream, url) => {
          const form = new FormData()
          form.append("file", new Blob([call.file as Uint8Array<ArrayBuffer>], { type: call.contentType }), call.filename)
          form.append("model", upstream.model ?? call.model.id)
          form.append("response_format", "verbose_json")
          if (call.language !== undefined) form.append("language", call.language)
          if (call.prompt !== undefined) form.append("prompt", call.prompt)
          if (call.temperature !== undefined) form.append("temperature", String(call.temperature))
          return HttpClientRequest.post(url("/audio/transcriptions")).pipe(HttpClientRequest.bodyFormData(form))
        },
        read: (response) => Effect.map(Effect.orElseSucceed(response.json, () => undefined), readTranscript),
        onRefusal: (refusal) => new Errors.InvalidRequest({ message: `The transcription model refused the request: ${refusal.message}` })
      }).pipe(Effect.provideService(HttpClient.HttpClient, client))
      return answer.value
    })
  })
})

/** @category layers */
export const layer = (options: Options = {}): Layer.Layer<TranscriptionBackend, never, HttpClient.HttpClient> =>
  Layer.effect(TranscriptionBackend, make(options))
