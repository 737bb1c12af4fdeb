/**
 * Text to speech through an OpenAI-compatible `POST /audio/speech` upstream, the audio passed on
 * as it arrives, or, for a model with no upstreams, a short generated tone (the dev model): WAV or
 * raw PCM in the speech API's PCM format (24 kHz, 16-bit, mono), about 50 ms per character at
 * speed 1, at most three seconds, its pitch chosen by the voice.
 *
 * @since 0.1.0
 */
import { Errors, type Models } from "@tollgate/core"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"
import * as Wav from "./Wav.ts"

/**
 * The Content-Type of each format, as the OpenAI speech API answers them.
 *
 * @category constants
 */
export const contentTypes: { readonly [F in Models.SpeechFormat]: string } = {
  mp3: "audio/mpeg",
  opus: "audio/ogg",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm"
}

/** @category models */
export interface Call {
  readonly model: Models.SpeechModel
  readonly input: string
  readonly voice: string
  readonly format: Models.SpeechFormat
  readonly speed: number
  readonly instructions?: string | undefined
}

/** @category models */
export interface Speech {
  readonly contentType: string
  readonly audio: Stream.Stream<Uint8Array, Errors.ApiError>
}

/** @category services */
export class SpeechBackend extends Context.Service<SpeechBackend, {
  /** Connects and checks the status before it returns, so a refusal is known before any byte is sent. */
  readonly speak: (call: Call) => Effect.Effect<Speech, Errors.ApiError>
}>()("@tollgate/backends/SpeechBackend") {}

const MS_PER_CHARACTER = 50
const MAX_LOCAL_SECONDS = 3

/**
 * The dev model's audio.
 *
 * @category local
 */
export const localAudio = (call: Pick<Call, "input" | "voice" | "speed" | "format">): Uint8Array => {
  const seconds = Math.min(MAX_LOCAL_SECONDS, Math.max(0.1, (call.input.length * MS_PER_CHARACTER) / 1000 / call.speed))
  const voiceSeed = [...call.voice].reduce((sum, char) => sum + char.charCodeAt(0), 0)
  const pcm = Wav.tone(seconds, voiceSeed)
  return call.format === "wav" ? Wav.encode(pcm) : pcm
}

/** @category options */
export interface Options {
  /** How long the upstream may take to start answering. */
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
  return SpeechBackend.of({
    speak: Effect.fn("SpeechBackend.speak")(function*(call: Call) {
      const contentType = contentTypes[call.format]
      if (call.model.upstreams.length === 0) {
        return { contentType, audio: Stream.succeed(localAudio(call)) }
      }
      const answer = yield* OpenAiCompatible.call(call.model.upstreams, {
        timeout,
        request: (upstream, url) =>
          HttpClientRequest.post(url("/audio/speech")).pipe(HttpClientRequest.bodyJsonUnsafe({
            model: upstream.model ?? call.model.id,
            input: call.input,
            voice: call.voice,
            response_format: call.format,
            speed: call.speed,
            ...(call.instructions === undefined ? {} : { instructions: call.instructions })
          })),
        read: (response) => Effect.succeed(response),
        onRefusal: (refusal) => new Errors.InvalidRequest({ message: `The speech model refused the request: ${refusal.message}` })
      }).pipe(Effect.provideService(HttpClient.HttpClient, client))
      return {
        contentType,
        audio: answer.value.stream.pipe(
          Stream.mapError(() => new Errors.BadGateway({ message: "The upstream's audio stream broke off" }))
        )
      }
    })
  })
})

/** @category layers */
export const layer = (options: Options = {}): Layer.Layer<SpeechBackend, never, HttpClient.HttpClient> =>
  Layer.effect(SpeechBackend, make(options))
