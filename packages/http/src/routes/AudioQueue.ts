/**
 * Queued speech, the published reference's audio job operations, over the speech models and
 * backend of `POST /audio/speech` and the job store and settlement of video (`VideoJobs`):
 *
 * - `POST /audio/queue` checks `prompt` (the text) and `voice` against the speech model, holds the
 *   exact price of the text (per input character, as `/audio/speech`) and records the job; the hold
 *   is handed to the job (`Deferred`) and lives as long as the job may.
 * - `POST /audio/retrieve` synthesizes the job's audio and streams it back. The retrieval that
 *   does so first completes the job and captures its hold; later ones synthesize it again, free,
 *   until the job is completed (`/audio/complete`, or `delete_media_on_completion`). A job past its
 *   expiry is released and answered 404, as one never queued is.
 * - `POST /audio/quote` answers the price a queue request would hold (`character_count` characters
 *   of the model), publicly like the model list.
 * - `POST /audio/complete` removes a completed job; its hold was settled by its retrieval.
 *
 * **Details**
 *
 * The speech is synthesized at retrieval rather than stored: the backend streams it, and nothing
 * holds a caller's audio between requests. That is also why every operation but the quote counts
 * against the audio kind's limit: a retrieval is a synthesis. The music fields of the reference
 * (`lyrics_prompt`, `duration_seconds`, ...) are 400s: no speech model takes them. Jobs are per
 * account: another account's `queue_id` is a 404.
 *
 * @since 0.1.0
 */
import * as SpeechBackend from "@tollgate/backends/SpeechBackend"
import { Errors, Models, PricingEngine, VideoJobs } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import type * as Metered from "../Metered.ts"
import * as QueuedJob from "../QueuedJob.ts"
import * as RequestBody from "../RequestBody.ts"

/**
 * How long a queued speech job may wait for its first retrieval before its hold is released.
 *
 * @category constants
 */
export const JOB_TTL_MS = 60 * 60_000

/** The reference's fields for music models, which no speech model takes. */
const MUSIC_FIELDS = ["lyrics_prompt", "duration_seconds", "force_instrumental", "lyrics_optimizer", "loop", "language_code"] as const

/** @category schemas */
export const QueueRequest = Schema.Struct({
  model: Schema.String,
  prompt: Schema.String.check(Schema.isMinLength(1)),
  voice: Schema.optionalKey(Schema.String),
  speed: Schema.optionalKey(Schema.Finite.check(Schema.isBetween({ minimum: 0.25, maximum: 4 })))
}).annotate({ identifier: "AudioQueueRequest" })

/** @category schemas */
export const QueueResponse = Schema.Struct({
  model: Schema.String,
  queue_id: Schema.String,
  status: Schema.Literal("QUEUED")
}).annotate({ identifier: "AudioQueueResponse" })

/** @category schemas */
export const QuoteRequest = Schema.Struct({
  model: Schema.String,
  character_count: Schema.Int.check(Schema.isGreaterThan(0))
}).annotate({ identifier: "AudioQuoteRequest" })

/** @category schemas */
export const RetrieveRequest = Schema.Struct({
  model: Schema.String,
  queue_id: Schema.String.check(Schema.isMinLength(1)),
  delete_media_on_completion: Schema.optionalKey(Schema.Boolean)
}).annotate({ identifier: "AudioRetrieveRequest" })

/** @category schemas */
export const CompleteRequest = Schema.Struct({
  model: Schema.String,
  queue_id: Schema.String.check(Schema.isMinLength(1))
}).annotate({ identifier: "AudioCompleteRequest" })

/** The price of `characters` of a speech model: what the queue holds, the quote answers, the job captures. */
const priceOf = (tables: PricingEngine.Tables, model: Models.SpeechModel, characters: number) => {
  const quote = PricingEngine.media(tables, "speech", model.id, characters)
  return PricingEngine.isUnpriced(quote) ? Effect.fail(Endpoint.unpriced(quote)) : Effect.succeed(quote)
}

/** The caller's speech job of `model`, or a 404 (none, another model's, or a video job). */
const findJob = (jobs: VideoJobs.VideoJobs["Service"], accountId: string, body: { readonly model: string; readonly queue_id: string }) =>
  QueuedJob.find(
    jobs,
    accountId,
    body.queue_id,
    (job) => job.speech !== undefined && job.model === body.model,
    () => new Errors.NotFound({ message: `No audio job ${body.queue_id} of ${body.model}` })
  )

/** A queue request checked against its speech model. */
interface Queueing {
  readonly prompt: string
  readonly speed: number
  readonly model: Models.SpeechModel
  readonly voice: string
  readonly characters: number
}

/** @category routes */
export const queue = Endpoint.make({
  method: "POST",
  path: "/api/v1/audio/queue",
  kind: "audio",
  serve: Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const jobs = yield* VideoJobs.VideoJobs
    return {
      decode: Effect.gen(function*() {
        const raw = yield* RequestBody.json()
        const body = yield* RequestBody.decode(QueueRequest, raw)
        const music = MUSIC_FIELDS.find((field) => typeof raw === "object" && raw !== null && field in raw)
        if (music !== undefined) return yield* Errors.invalidField(music, "Not supported: the audio models are speech models")
        const model = yield* models.ofType("tts", body.model)
        const voice = body.voice ?? model.voices[0]!
        if (!model.voices.includes(voice)) return yield* Errors.invalidField("voice", `Expected one of ${model.voices.join(", ")}`)
        const characters = [...body.prompt].length
        if (characters > model.maxInputCharacters) {
          return yield* Errors.invalidField("prompt", `${model.id} reads at most ${model.maxInputCharacters} characters`)
        }
        return { prompt: body.prompt, speed: body.speed ?? 1, model, voice, characters } satisfies Queueing
      }),
      subject: ({ model }: Queueing) => ({ models: [model.id] }),
      quote: ({ characters, model }: Queueing) => PricingEngine.media(tables, "speech", model.id, characters),
      shape: () => QueuedJob.holdFor(JOB_TTL_MS),
      execute: ({ characters, model, prompt, speed, voice }: Queueing, quote: PricingEngine.Quote, context: Metered.CallContext) =>
        QueuedJob.start(jobs, {
          prefix: "aud",
          ttlMs: JOB_TTL_MS,
          quote,
          context,
          work: {
            model: model.id,
            prompt,
            seconds: 0,
            size: "",
            speech: { voice, format: model.responseFormats[0]!, speed, characters }
          },
          respond: (job) =>
            HttpServerResponse.jsonUnsafe({ model: model.id, queue_id: job.id, status: "QUEUED" }, { headers: Models.headersOf(model) })
        })
    }
  }),
  docs: {
    summary: "Queue speech",
    description: "Records a speech job: prompt is the text, spoken in voice (default the model's first; see GET " +
      "/audio/voices) at speed 0.25 to 4, in the model's first response format. Its price (per input character, as " +
      "POST /audio/speech) is held until the first retrieval captures it, or released if the job expires unretrieved " +
      "(an hour). The reference's music fields are 400s.",
    tags: ["Audio"],
    request: { contentType: "application/json", schema: QueueRequest },
    responses: { 200: { description: "The job", schema: QueueResponse, headers: Models.headerNames } }
  }
})

/** @category routes */
export const retrieve = QueuedJob.operation({
  path: "/api/v1/audio/retrieve",
  kind: "audio",
  sku: "audio_retrieve",
  request: RetrieveRequest,
  serve: ({ end, store: jobs }) =>
    Effect.gen(function*() {
      const models = yield* Models.ModelList
      const tables = yield* PricingEngine.PricingEngine
      const backend = yield* SpeechBackend.SpeechBackend
      return (body: typeof RetrieveRequest.Type, { principal, requestId }: Metered.CallContext) =>
        Effect.gen(function*() {
          const job = yield* findJob(jobs, principal.accountId, body)
          const speech = job.speech!
          const gone = new Errors.NotFound({ message: `Audio job ${job.id} expired before it was retrieved` })
          if (job.state === "expired" || job.state === "failed") return yield* gone
          if (yield* QueuedJob.overdue(job)) {
            yield* end(job, { state: "expired" })
            return yield* gone
          }
          const model = yield* QueuedJob.stillServed(job, models.ofType("tts", job.model))
          const audio = yield* backend.speak({ model, input: job.prompt, voice: speech.voice, format: speech.format, speed: speech.speed })
          if (job.state === "queued") {
            const price = yield* priceOf(tables, model, speech.characters)
            yield* end(job, { state: "completed", requestId, pricePerUnit: price.pricePerUnit })
          }
          if (body.delete_media_on_completion === true) yield* jobs.remove(principal.accountId, job.id)
          return {
            _tag: "Streaming" as const,
            stream: audio.audio,
            contentType: audio.contentType,
            headers: { ...Models.headersOf(model), "content-encoding": "identity" },
            produced: Effect.succeed(QueuedJob.free(`audio job ${job.id}`))
          }
        })
    }),
  docs: {
    summary: "Retrieve queued speech",
    description: "The job's audio, synthesized and streamed under its format's audio/* Content-Type. The first retrieval " +
      "captures the job's hold; later ones are free until the job is completed (POST /audio/complete, or " +
      "delete_media_on_completion true on this call). A job that expired unretrieved, or that is not the caller's, is a 404.",
    tags: ["Audio"],
    responses: {
      200: { description: "The audio", contentType: "audio/*", headers: Models.headerNames },
      404: { description: "No such job for this account and model, or it expired" }
    }
  }
})

/** @category routes */
export const quote = QueuedJob.quote({
  path: "/api/v1/audio/quote",
  request: QuoteRequest,
  price: Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    return (body: typeof QuoteRequest.Type) =>
      Effect.flatMap(models.ofType("tts", body.model), (model) => priceOf(tables, model, body.character_count))
  }),
  response: "AudioQuoteResponse",
  docs: {
    summary: "Quote queued speech",
    description: "The price in USD of character_count characters of the speech model: what a queue request with a " +
      "prompt that long holds and its retrieval is charged. Public, like the model list.",
    tags: ["Audio"]
  }
})

/** @category routes */
export const complete = QueuedJob.operation({
  path: "/api/v1/audio/complete",
  kind: "audio",
  sku: "audio_complete",
  request: CompleteRequest,
  serve: ({ store: jobs }) =>
    Effect.succeed((body: typeof CompleteRequest.Type, { principal }: Metered.CallContext) =>
      Effect.gen(function*() {
        const job = yield* findJob(jobs, principal.accountId, body)
        const removal = yield* QueuedJob.remove(jobs, job, "The job was never retrieved: retrieve its audio first")
        return {
          response: HttpServerResponse.jsonUnsafe({ success: removal === "removed" }),
          ...QueuedJob.free(`audio job ${job.id} completed`)
        }
      })
    ),
  docs: {
    summary: "Complete queued speech",
    description: "Removes a job whose audio was retrieved: retrieving it again is a 404. A job never retrieved is a 400 " +
      "(its hold is still open). Not charged.",
    tags: ["Audio"],
    responses: {
      200: {
        description: "The job was removed",
        schema: Schema.Struct({ success: Schema.Boolean }).annotate({ identifier: "AudioCompleteResponse" })
      },
      404: { description: "No such job for this account and model" }
    }
  }
})

/** @category routes */
export const routes = [queue, retrieve, quote, complete] as const
