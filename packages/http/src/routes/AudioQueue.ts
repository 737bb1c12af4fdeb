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
 * The speech is synthesized at retrieval rather than stored: the backend streams it, and nothing
 * holds a caller's audio between requests. That is also why every operation but the quote counts
 * against the audio kind's limit: a retrieval is a synthesis. The music fields of the reference
 * (`lyrics_prompt`, `duration_seconds`, ...) are 400s: no speech model takes them. Jobs are per
 * account: another account's `queue_id` is a 404.
 *
 * @since 0.1.0
 */
import * as SpeechBackend from "@tollgate/backends/SpeechBackend"
import { Errors, Models, Money, PricingEngine, VideoJobs } from "@tollgate/core"
import * as CreditLedger from "@tollgate/core/CreditLedger"
import { Clock, Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import { Metered } from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"

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
  return PricingEngine.isUnpriced(quote) ? Effect.fail(Errors.invalidField(quote.field, quote.message)) : Effect.succeed(quote)
}

/** The caller's speech job of `model`, or a 404 (none, another model's, or a video job). */
const findJob = (jobs: VideoJobs.VideoJobs["Service"], accountId: string, body: { readonly model: string; readonly queue_id: string }) =>
  Effect.flatMap(jobs.get(accountId, body.queue_id), (found) =>
    Option.isSome(found) && found.value.speech !== undefined && found.value.model === body.model
      ? Effect.succeed({ job: found.value, speech: found.value.speech })
      : Effect.fail(new Errors.NotFound({ message: `No audio job ${body.queue_id} of ${body.model}` })))

/** @category routes */
export const queue = Route.metered(Route.make(
  "POST",
  "/api/v1/audio/queue",
  Effect.gen(function*() {
    const metered = yield* Metered
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const jobs = yield* VideoJobs.VideoJobs
    return Effect.gen(function*() {
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
      const quote = yield* priceOf(tables, model, characters)
      return yield* metered.run({
        sku: quote.sku,
        kind: "audio",
        quote,
        holdTtlMs: JOB_TTL_MS + VideoJobs.HOLD_GRACE_MS,
        execute: ({ holdReference, principal }) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const job: VideoJobs.Job = {
              id: `aud_${Crypto.randomUUID()}`,
              accountId: principal.accountId,
              model: model.id,
              prompt: body.prompt,
              seconds: 0,
              size: "",
              speech: { voice, format: model.responseFormats[0]!, speed: body.speed ?? 1, characters },
              holdReference,
              quotedAmount: quote.amount,
              state: "queued",
              createdAt: now,
              expiresAt: now + JOB_TTL_MS
            }
            yield* jobs.create(job)
            return {
              _tag: "Deferred" as const,
              response: HttpServerResponse.jsonUnsafe({ model: model.id, queue_id: job.id, status: "QUEUED" }, { headers: Models.headersOf(model) })
            }
          })
      })
    })
  }),
  {
    summary: "Queue speech",
    description: "Records a speech job: prompt is the text, spoken in voice (default the model's first; see GET " +
      "/audio/voices) at speed 0.25 to 4, in the model's first response format. Its price (per input character, as " +
      "POST /audio/speech) is held until the first retrieval captures it, or released if the job expires unretrieved " +
      "(an hour). The reference's music fields are 400s.",
    tags: ["Audio"],
    security: "metered",
    request: { contentType: "application/json", schema: QueueRequest },
    responses: { 200: { description: "The job", schema: QueueResponse, headers: Models.headerNames } }
  }
))

/** @category routes */
export const retrieve = Route.metered(Route.make(
  "POST",
  "/api/v1/audio/retrieve",
  Effect.gen(function*() {
    const metered = yield* Metered
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* SpeechBackend.SpeechBackend
    const jobs = yield* VideoJobs.VideoJobs
    const ledger = yield* CreditLedger.CreditLedger
    const ending = (job: VideoJobs.Job, outcome: Parameters<typeof VideoJobs.end>[1]) =>
      VideoJobs.end(job, outcome).pipe(
        Effect.provideService(VideoJobs.VideoJobs, jobs),
        Effect.provideService(CreditLedger.CreditLedger, ledger)
      )
    return Effect.gen(function*() {
      const body = yield* RequestBody.schema(RetrieveRequest)
      const quote: PricingEngine.Quote = { amount: Money.zero, version: tables.version, sku: "audio_retrieve", units: 0, pricePerUnit: Money.zero }
      return yield* metered.run({
        sku: quote.sku,
        kind: "audio",
        quote,
        execute: ({ principal, requestId }) =>
          Effect.gen(function*() {
            const { job, speech } = yield* findJob(jobs, principal.accountId, body)
            const gone = new Errors.NotFound({ message: `Audio job ${job.id} expired before it was retrieved` })
            if (job.state === "expired" || job.state === "failed") return yield* gone
            if (job.state === "queued" && (yield* Clock.currentTimeMillis) > job.expiresAt) {
              yield* ending(job, { state: "expired" })
              return yield* gone
            }
            const model = yield* models.ofType("tts", job.model).pipe(
              Effect.mapError(() => new Errors.ServiceUnavailable({ message: `The model ${job.model} is no longer served`, retryAfterSeconds: 60 }))
            )
            const audio = yield* backend.speak({ model, input: job.prompt, voice: speech.voice, format: speech.format, speed: speech.speed })
            if (job.state === "queued") {
              const price = yield* priceOf(tables, model, speech.characters)
              yield* ending(job, { state: "completed", requestId, pricePerUnit: price.pricePerUnit })
            }
            if (body.delete_media_on_completion === true) yield* jobs.remove(principal.accountId, job.id)
            return {
              _tag: "Streaming" as const,
              stream: audio.audio,
              contentType: audio.contentType,
              headers: { ...Models.headersOf(model), "content-encoding": "identity" },
              produced: Effect.succeed({ charge: Money.zero, usage: { units: 0, pricePerUnit: Money.zero, notes: `audio job ${job.id}` } })
            }
          })
      })
    })
  }),
  {
    summary: "Retrieve queued speech",
    description: "The job's audio, synthesized and streamed under its format's audio/* Content-Type. The first retrieval " +
      "captures the job's hold; later ones are free until the job is completed (POST /audio/complete, or " +
      "delete_media_on_completion true on this call). A job that expired unretrieved, or that is not the caller's, is a 404.",
    tags: ["Audio"],
    security: "metered",
    request: { contentType: "application/json", schema: RetrieveRequest },
    responses: {
      200: { description: "The audio", contentType: "audio/*", headers: Models.headerNames },
      404: { description: "No such job for this account and model, or it expired" }
    }
  }
))

/** @category routes */
export const quote = Route.make(
  "POST",
  "/api/v1/audio/quote",
  Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    return Effect.gen(function*() {
      const body = yield* RequestBody.schema(QuoteRequest)
      const model = yield* models.ofType("tts", body.model)
      const quote = yield* priceOf(tables, model, body.character_count)
      return HttpServerResponse.jsonUnsafe({ quote: Money.toUsdNumber(quote.amount) })
    })
  }),
  {
    summary: "Quote queued speech",
    description: "The price in USD of character_count characters of the speech model: what a queue request with a " +
      "prompt that long holds and its retrieval is charged. Public, like the model list.",
    tags: ["Audio"],
    security: "public",
    request: { contentType: "application/json", schema: QuoteRequest },
    responses: {
      200: { description: "The price", schema: Schema.Struct({ quote: Schema.Finite }).annotate({ identifier: "AudioQuoteResponse" }) }
    }
  }
)

/** @category routes */
export const complete = Route.metered(Route.make(
  "POST",
  "/api/v1/audio/complete",
  Effect.gen(function*() {
    const metered = yield* Metered
    const tables = yield* PricingEngine.PricingEngine
    const jobs = yield* VideoJobs.VideoJobs
    return Effect.gen(function*() {
      const body = yield* RequestBody.schema(CompleteRequest)
      const quote: PricingEngine.Quote = { amount: Money.zero, version: tables.version, sku: "audio_complete", units: 0, pricePerUnit: Money.zero }
      return yield* metered.run({
        sku: quote.sku,
        kind: "audio",
        quote,
        execute: ({ principal }) =>
          Effect.gen(function*() {
            const { job } = yield* findJob(jobs, principal.accountId, body)
            const removal = yield* jobs.remove(principal.accountId, job.id)
            if (removal === "running") return yield* Errors.invalidField("queue_id", "The job was never retrieved: retrieve its audio first")
            return {
              response: HttpServerResponse.jsonUnsafe({ success: removal === "removed" }),
              charge: Money.zero,
              usage: { units: 0, pricePerUnit: Money.zero, notes: `audio job ${job.id} completed` }
            }
          })
      })
    })
  }),
  {
    summary: "Complete queued speech",
    description: "Removes a job whose audio was retrieved: retrieving it again is a 404. A job never retrieved is a 400 " +
      "(its hold is still open). Not charged.",
    tags: ["Audio"],
    security: "metered",
    request: { contentType: "application/json", schema: CompleteRequest },
    responses: {
      200: { description: "The job was removed", schema: Schema.Struct({ success: Schema.Boolean }).annotate({ identifier: "AudioCompleteResponse" }) },
      404: { description: "No such job for this account and model" }
    }
  }
))

/** @category routes */
export const routes = [queue, retrieve, quote, complete] as const
