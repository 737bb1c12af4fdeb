/**
 * `POST /audio/transcriptions`: OpenAI-compatible speech to text, a multipart upload (`file`,
 * `model`, optional `response_format`, `language`, `prompt`, `temperature`) billed per second of
 * audio under the audio kind's rate limit. The file is read under a 25 MB cap (the text parser's,
 * and the OpenAI API's) and the form checked before anything is held.
 *
 * **Details**
 *
 * The hold needs the duration before the audio is decoded: a WAV's comes from its header; for any
 * other format the hold assumes the lowest bitrate speech is sent at (8 kbps, 1000 bytes a second),
 * so it is never below the truth. The charge is the model's own duration (rounded up to the second),
 * else the WAV's, else the hold. The answer is rendered here from the model's verbose transcript,
 * so every format (json, text, srt, vtt, verbose_json) works the same with every upstream.
 *
 * @since 0.1.0
 */
import * as TranscriptionBackend from "@tollgate/backends/TranscriptionBackend"
import * as Wav from "@tollgate/backends/Wav"
import { Models, PricingEngine } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as MultipartUpload from "../MultipartUpload.ts"

/** The spec's upload cap, the text parser's. */
const MAX_FILE_BYTES = DocumentExtractor.MAX_BYTES

/** The lowest bitrate the hold assumes for audio whose duration cannot be read, in bytes a second. */
const FLOOR_BYTES_PER_SECOND = 1000

/**
 * The multipart request, for the OpenAPI document.
 *
 * @category schemas
 */

export const TranscriptionForm = Schema.Struct({
  file: Schema.String.annotate({ contentEncoding: "binary", description: `The audio; at most ${MAX_FILE_BYTES / 1024 / 1024} MB` }),
  model: Schema.String,
  response_format: Schema.optionalKey(Models.TranscriptionFormat),
  language: Schema.optionalKey(Schema.String),
  prompt: Schema.optionalKey(Schema.String),
  temperature: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "TranscriptionRequest" })

const isFormat = Schema.is(Models.TranscriptionFormat)

const timestamp = (seconds: number, separator: "," | ".") => {
  const ms = Math.round(seconds * 1000)
  const pad = (n: number, width = 2) => String(n).padStart(width, "0")
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${
    pad(ms % 1000, 3)
  }`
}

/**
 * The transcript in a response format.
 *
 * @category encoding
 */
export const render = (
  transcript: TranscriptionBackend.Transcript,
  format: Models.TranscriptionFormat,
  seconds: number
): HttpServerResponse.HttpServerResponse => {
  switch (format) {
    case "json":
      return HttpServerResponse.jsonUnsafe({ text: transcript.text, usage: { type: "duration", seconds } })
    case "text":
      return HttpServerResponse.text(transcript.text, { contentType: "text/plain; charset=utf-8" })
    case "srt":
      return HttpServerResponse.text(
        transcript.segments.map((segment, i) =>
          `${i + 1}\n${timestamp(segment.start, ",")} --> ${timestamp(segment.end, ",")}\n${segment.text.trim()}\n`
        ).join("\n"),
        { contentType: "application/x-subrip; charset=utf-8" }
      )
    case "vtt":
      return HttpServerResponse.text(
        [
          "WEBVTT\n",
          ...transcript.segments.map((segment) =>
            `${timestamp(segment.start, ".")} --> ${timestamp(segment.end, ".")}\n${segment.text.trim()}\n`
          )
        ].join("\n"),
        { contentType: "text/vtt; charset=utf-8" }
      )
    case "verbose_json":
      return HttpServerResponse.jsonUnsafe({
        task: "transcribe",
        language: transcript.language,
        duration: transcript.duration ?? seconds,
        text: transcript.text,
        segments: transcript.segments.map((segment, id) => ({ id, start: segment.start, end: segment.end, text: segment.text })),
        usage: { type: "duration", seconds }
      })
  }
}

/** The form checked, with its model, format and the duration its hold assumes. */
interface Checked {
  readonly form: MultipartUpload.Upload
  readonly model: Models.TranscriptionModel
  readonly format: Models.TranscriptionFormat
  readonly temperature: number | undefined
  /** The WAV header's duration, when the file is a WAV. */
  readonly wavSeconds: number | undefined
  readonly heldSeconds: number
}

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/audio/transcriptions",
  kind: "audio",
  settlesActual: true,
  serve: Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* TranscriptionBackend.TranscriptionBackend
    return {
      decode: Effect.gen(function*() {
        const form = yield* MultipartUpload.read({
          maxBytes: MAX_FILE_BYTES,
          fields: ["model", "response_format", "language", "prompt", "temperature"]
        })
        const { fields } = form
        const format = fields["response_format"] ?? "json"
        const temperature = fields["temperature"] === undefined ? undefined : Number(fields["temperature"])
        yield* MultipartUpload.check([
          ...form.problems,
          ...(fields["model"] === undefined ? [{ path: ["model"], message: "Required" }] : []),
          ...(isFormat(format)
            ? []
            : [{ path: ["response_format"], message: `Expected one of ${Models.TranscriptionFormat.literals.join(", ")}` }]),
          ...(temperature === undefined || (temperature >= 0 && temperature <= 1)
            ? []
            : [{ path: ["temperature"], message: "Expected a number from 0 to 1" }])
        ])
        const model = yield* models.ofType("asr", fields["model"]!)
        const wavSeconds = Wav.duration(form.file)
        const heldSeconds = Math.max(1, Math.ceil(wavSeconds ?? form.file.length / FLOOR_BYTES_PER_SECOND))
        return { form, model, format: format as Models.TranscriptionFormat, temperature, wavSeconds, heldSeconds } satisfies Checked
      }),
      subject: ({ model }: Checked) => ({ models: [model.id] }),
      quote: ({ heldSeconds, model }: Checked) => PricingEngine.media(tables, "transcription", model.id, heldSeconds),
      execute: ({ form, format, heldSeconds, model, temperature, wavSeconds }: Checked, quote: PricingEngine.Quote) =>
        Effect.map(
          backend.transcribe({
            model,
            file: form.file,
            filename: form.filename,
            contentType: form.contentType,
            language: form.fields["language"],
            prompt: form.fields["prompt"],
            temperature
          }),
          (transcript) => {
            const seconds = Math.min(heldSeconds, Math.max(1, Math.ceil(transcript.duration ?? wavSeconds ?? heldSeconds)))
            const actual = PricingEngine.media(tables, "transcription", model.id, seconds)
            return {
              response: HttpServerResponse.setHeaders(render(transcript, format, seconds), Models.headersOf(model)),
              charge: PricingEngine.isUnpriced(actual) ? quote.amount : actual.amount,
              usage: { units: seconds, pricePerUnit: quote.pricePerUnit, notes: `${seconds} s of audio` }
            }
          }
        )
    }
  }),
  docs: {
    summary: "Transcribe audio (OpenAI-compatible)",
    description: `The text of an audio file (at most ${MAX_FILE_BYTES / 1024 / 1024} MB), as json, text, srt, vtt or verbose_json. ` +
      "Billed per second of audio, rounded up.",
    tags: ["Audio"],
    request: { contentType: "multipart/form-data", schema: TranscriptionForm },
    responses: {
      200: {
        description: "The transcript (JSON for json and verbose_json; text/plain, SRT or WebVTT otherwise)",
        headers: Models.headerNames
      }
    }
  }
})
