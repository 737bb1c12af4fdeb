/**
 * `POST /audio/speech`: OpenAI-compatible text to speech, billed per input character under the
 * audio kind's rate limit. The body is checked against the model (voice, format, input length)
 * before anything is held; the hold is the exact price of the input. The audio is streamed back
 * as the upstream sends it, under the format's Content-Type; the call is charged once the audio
 * has been sent, and not at all if the upstream broke off before sending any.
 *
 * @since 0.1.0
 */
import * as SpeechBackend from "@tollgate/backends/SpeechBackend"
import { Errors, Models, Money, PricingEngine } from "@tollgate/core"
import { Effect, Schema } from "effect"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"

/**
 * The request body.
 *
 * @category schemas
 */

export const SpeechRequest = Schema.Struct({
  model: Schema.String,
  input: Schema.String.check(Schema.isMinLength(1)),
  voice: Schema.String,
  response_format: Schema.optionalKey(Models.SpeechFormat),
  speed: Schema.optionalKey(Schema.Finite.check(Schema.isBetween(Models.SPEECH_SPEED))),
  instructions: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "SpeechRequest" })

/** The body checked against its model, with the format it asks for and its length in characters. */
interface Checked {
  readonly body: typeof SpeechRequest.Type
  readonly model: Models.SpeechModel
  readonly format: Models.SpeechFormat
  readonly characters: number
}

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/audio/speech",
  kind: "audio",
  settlesActual: true,
  serve: Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* SpeechBackend.SpeechBackend
    return {
      decode: Effect.gen(function*() {
        const body = yield* RequestBody.schema(SpeechRequest)
        const model = yield* models.ofType("tts", body.model)
        const format = body.response_format ?? model.responseFormats[0]!
        const characters = [...body.input].length
        if (characters > model.maxInputCharacters) {
          return yield* Errors.invalidField("input", `${model.id} reads at most ${model.maxInputCharacters} characters`)
        }
        if (!model.voices.includes(body.voice)) return yield* Errors.invalidField("voice", `Expected one of ${model.voices.join(", ")}`)
        if (!model.responseFormats.includes(format)) {
          return yield* Errors.invalidField("response_format", `${model.id} answers ${model.responseFormats.join(", ")}`)
        }
        return { body, model, format, characters } satisfies Checked
      }),
      subject: ({ model }: Checked) => ({ models: [model.id] }),
      quote: ({ characters, model }: Checked) => PricingEngine.media(tables, "speech", model.id, characters),
      execute: ({ body, characters, format, model }: Checked, quote: PricingEngine.Quote) =>
        Effect.map(
          backend.speak({ model, input: body.input, voice: body.voice, format, speed: body.speed ?? 1, instructions: body.instructions }),
          (speech) =>
            Endpoint.streaming({
              stream: speech.audio,
              contentType: speech.contentType,
              headers: { ...Models.headersOf(model), "content-encoding": "identity" },
              // Charged once audio was sent, and not at all if the upstream broke off before any.
              produced: (bytes) =>
                bytes === 0
                  ? { charge: Money.zero, usage: { units: 0, pricePerUnit: quote.pricePerUnit, notes: format } }
                  : {
                    charge: quote.amount,
                    usage: { units: characters, pricePerUnit: quote.pricePerUnit, notes: `${format}, ${bytes} bytes` }
                  }
            })
        )
    }
  }),
  docs: {
    summary: "Text to speech (OpenAI-compatible)",
    description: `Audio of the input text in the model's voice, streamed in response_format (${Models.SpeechFormat.literals.join(", ")}, ` +
      `as the model supports; see GET /models) at speed ${Models.SPEECH_SPEED.minimum} to ${Models.SPEECH_SPEED.maximum}. ` +
      "Billed per input character.",
    tags: ["Audio"],
    request: { contentType: "application/json", schema: SpeechRequest, example: { model: "tts-1", input: "Hello there", voice: "alloy" } },
    responses: {
      200: { description: "The audio, under the format's audio/* Content-Type", contentType: "audio/*", headers: Models.headerNames }
    }
  }
})
