/**
 * Video generation as a job. `POST /video/queue` checks the request against the model, holds the
 * job's worst-case price (its duration at the model's price per second) under the video kind's
 * limit, submits the job and answers its `queue_id`; the hold is handed to the job (`Deferred`),
 * living as long as the job may. `POST /video/retrieve` polls the job under the retrieval limit:
 * while it runs the answer is its state as JSON; the poll that sees it complete captures the hold
 * and every poll after that gets the video itself; the poll that sees it fail, or finds it past its
 * expiry, releases the hold. A job nobody polls again is released when its hold expires.
 *
 * `POST /video/quote` answers the price a queue request would hold, without queueing. `POST
 * /video/complete` releases a job that has ended once the caller has its video: the job is
 * removed, and a later retrieval is a 404 (an upstream keeps its own copy for its own retention).
 *
 * The queue takes an `Idempotency-Key` (a retried queue request gets the same job, not a second
 * hold). Jobs are per account: another account's `queue_id` is a 404.
 *
 * @since 0.1.0
 */
import * as VideoBackend from "@tollgate/backends/VideoBackend"
import { Errors, Models, Money, PricingEngine, VideoJobs } from "@tollgate/core"
import * as CreditLedger from "@tollgate/core/CreditLedger"
import { Clock, Effect, Option, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import * as Endpoint from "../Endpoint.ts"
import { Metered, type Outcome, type StreamingOutcome } from "../Metered.ts"
import * as RequestBody from "../RequestBody.ts"
import * as Route from "../Route.ts"

/**
 * The queue request. `duration` is in seconds (`5` or `"5s"`); `duration` and `size` default to
 * the model's first.
 *
 * @category schemas
 */
export const QueueRequest = Schema.Struct({
  model: Schema.String,
  prompt: Schema.String.check(Schema.isMinLength(1)),
  duration: Schema.optionalKey(Schema.Union([
    Schema.Int.check(Schema.isGreaterThan(0)),
    Schema.String.check(Schema.isPattern(/^[1-9]\d{0,3}s?$/u, { message: "must be a number of seconds, e.g. 5 or \"5s\"" }))
  ])),
  size: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "VideoQueueRequest" })

/**
 * The quote request: the queue request's priced fields.
 *
 * @category schemas
 */
export const QuoteRequest = QueueRequest.mapFields(({ prompt: _, ...fields }) => fields).annotate({ identifier: "VideoQuoteRequest" })

/** @category schemas */
export const QueueResponse = Schema.Struct({
  model: Schema.String,
  queue_id: Schema.String,
  status: Schema.Literal("queued"),
  expires_at: Schema.Int
}).annotate({ identifier: "VideoQueueResponse" })

/** @category schemas */
export const RetrieveRequest = Schema.Struct({
  queue_id: Schema.String.check(Schema.isMinLength(1)),
  model: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "VideoRetrieveRequest" })

/** @category schemas */
export const RetrieveResponse = Schema.Struct({
  model: Schema.String,
  queue_id: Schema.String,
  status: Schema.Literals(["queued", "failed", "expired"]),
  progress: Schema.optionalKey(Schema.Finite),
  error: Schema.optionalKey(Schema.String),
  expires_at: Schema.Int
}).annotate({ identifier: "VideoRetrieveResponse" })

const secondsOf = (duration: number | string) => typeof duration === "number" ? duration : Number(duration.replace(/s$/u, ""))

const unix = (ms: number) => Math.floor(ms / 1000)

const stateOf = (job: VideoJobs.Job, extra: { readonly progress?: number | undefined } = {}) =>
  HttpServerResponse.jsonUnsafe({
    model: job.model,
    queue_id: job.id,
    status: job.state,
    ...(extra.progress === undefined ? {} : { progress: extra.progress }),
    ...(job.error === undefined ? {} : { error: job.error }),
    expires_at: unix(job.expiresAt)
  })

/**
 * The job a request describes, checked against its model (duration and size), and its price: what
 * the queue holds and the quote answers.
 */
const pricer = Effect.gen(function*() {
  const models = yield* Models.ModelList
  const tables = yield* PricingEngine.PricingEngine
  return (body: typeof QuoteRequest.Type) =>
    Effect.gen(function*() {
      const model = yield* models.ofType("video", body.model)
      const seconds = body.duration === undefined ? model.durations[0]! : secondsOf(body.duration)
      const size = body.size ?? model.sizes[0]!
      if (!model.durations.includes(seconds)) return yield* Errors.invalidField("duration", `${model.id} renders ${model.durations.join(", ")} seconds`)
      if (!model.sizes.includes(size)) return yield* Errors.invalidField("size", `Expected one of ${model.sizes.join(", ")}`)
      const quote = PricingEngine.media(tables, "video", model.id, seconds)
      if (PricingEngine.isUnpriced(quote)) return yield* Errors.invalidField(quote.field, quote.message)
      return { model, seconds, size, quote }
    })
})

/** @category routes */
export const queue = Route.metered(Route.make(
  "POST",
  "/api/v1/video/queue",
  Effect.gen(function*() {
    const metered = yield* Metered
    const price = yield* pricer
    const backend = yield* VideoBackend.VideoBackend
    const jobs = yield* VideoJobs.VideoJobs
    return Effect.gen(function*() {
      const key = yield* Effect.fromResult(Endpoint.idempotencyKey(yield* HttpServerRequest.HttpServerRequest))
      const raw = yield* RequestBody.json()
      const body = yield* RequestBody.decode(QueueRequest, raw)
      const { model, quote, seconds, size } = yield* price(body)
      if (body.prompt.length > model.promptCharacterLimit) {
        return yield* Errors.invalidField("prompt", `${model.id} reads at most ${model.promptCharacterLimit} characters`)
      }
      const ttlMs = model.jobTtlSeconds * 1000
      return yield* metered.run({
        sku: quote.sku,
        kind: "video",
        quote,
        holdTtlMs: ttlMs + VideoJobs.HOLD_GRACE_MS,
        idempotency: key === undefined
          ? undefined
          : { key, fingerprint: Crypto.createHash("sha256").update("video/queue\n").update(JSON.stringify(raw)).digest("base64url") },
        execute: ({ holdReference, principal }) =>
          Effect.gen(function*() {
            const submitted = yield* backend.submit({ model, prompt: body.prompt, seconds, size })
            const now = yield* Clock.currentTimeMillis
            const job: VideoJobs.Job = {
              id: `vid_${Crypto.randomUUID()}`,
              accountId: principal.accountId,
              model: model.id,
              // only the local renderer needs the prompt again; an upstream job keeps its own
              prompt: submitted.upstream === undefined ? body.prompt : "",
              seconds,
              size,
              holdReference,
              quotedAmount: quote.amount,
              upstream: submitted.upstream,
              upstreamJobId: submitted.upstreamJobId,
              state: "queued",
              createdAt: now,
              expiresAt: now + ttlMs
            }
            yield* jobs.create(job)
            return {
              _tag: "Deferred" as const,
              response: HttpServerResponse.jsonUnsafe(
                { model: model.id, queue_id: job.id, status: "queued", expires_at: unix(job.expiresAt) },
                { headers: { ...Models.headersOf(model), "x-service-video-hold-usd": Money.formatUsd(quote.amount) } }
              )
            }
          })
      })
    })
  }),
  {
    summary: "Queue a video",
    description: "Starts a video job and answers its queue_id. The worst-case price (duration x the model's price per " +
      "second) is held until the job ends: captured when it completes, released when it fails or expires. " +
      "Idempotency-Key makes a retried request return the same job.",
    tags: ["Video"],
    security: "metered",
    request: { contentType: "application/json", schema: QueueRequest },
    headers: [{ name: "Idempotency-Key", description: "[A-Za-z0-9_-]{1,255}; replays the first response for 24 hours" }],
    responses: {
      200: { description: "The job", schema: QueueResponse, headers: [...Models.headerNames, "x-service-video-hold-usd"] }
    }
  }
))

/** @category routes */
export const retrieve = Route.metered(Route.make(
  "POST",
  "/api/v1/video/retrieve",
  Effect.gen(function*() {
    const metered = yield* Metered
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* VideoBackend.VideoBackend
    const jobs = yield* VideoJobs.VideoJobs
    const ledger = yield* CreditLedger.CreditLedger
    return Effect.gen(function*() {
      const body = yield* RequestBody.schema(RetrieveRequest)
      const quote: PricingEngine.Quote = { amount: Money.zero, version: tables.version, sku: "video_retrieve", units: 0, pricePerUnit: Money.zero }
      return yield* metered.run({
        sku: quote.sku,
        kind: "video_retrieve",
        quote,
        execute: ({ principal, requestId }) =>
          Effect.gen(function*(): Effect.fn.Return<Outcome | StreamingOutcome, Errors.ApiError> {
            const found = yield* jobs.get(principal.accountId, body.queue_id)
            if (Option.isNone(found) || (body.model !== undefined && body.model !== found.value.model)) {
              return yield* new Errors.NotFound({ message: `No video job ${body.queue_id}` })
            }
            let job = found.value
            const model = yield* models.ofType("video", job.model).pipe(
              Effect.mapError(() => new Errors.ServiceUnavailable({ message: `The model ${job.model} is no longer served`, retryAfterSeconds: 60 }))
            )
            let progress: number | undefined
            const ending = (end: Parameters<typeof VideoJobs.end>[1]) =>
              VideoJobs.end(job, end).pipe(
                Effect.provideService(VideoJobs.VideoJobs, jobs),
                Effect.provideService(CreditLedger.CreditLedger, ledger)
              )
            if (job.state === "queued") {
              const now = yield* Clock.currentTimeMillis
              if (now > job.expiresAt) {
                job = yield* ending({ state: "expired" })
              } else {
                const status = yield* backend.poll(model, job)
                if (status.state === "completed") {
                  const price = PricingEngine.media(tables, "video", model.id, job.seconds)
                  const pricePerUnit = PricingEngine.isUnpriced(price) ? Money.zero : price.pricePerUnit
                  job = yield* ending({ state: "completed", requestId, pricePerUnit })
                } else if (status.state === "failed") {
                  job = yield* ending({ state: "failed", error: status.error })
                } else {
                  progress = status.progress
                }
              }
            }
            const usage = { units: 0, pricePerUnit: Money.zero, notes: `video job ${job.id} ${job.state}` }
            if (job.state !== "completed") return { response: stateOf(job, { progress }), charge: Money.zero, usage }
            const video = yield* backend.content(model, job)
            return {
              _tag: "Streaming" as const,
              stream: video.video,
              contentType: video.contentType,
              headers: {
                ...Models.headersOf(model),
                "content-encoding": "identity",
                "content-disposition": `inline; filename="${job.id}.${video.contentType === "video/mp4" ? "mp4" : "y4m"}"`,
                "x-service-video-status": "completed"
              },
              produced: Effect.succeed({ charge: Money.zero, usage })
            }
          })
      })
    })
  }),
  {
    summary: "Retrieve a video",
    description: "The state of a video job as JSON while it runs (and when it failed or expired), or the video itself " +
      "once it completed. The poll that sees the job complete captures its hold; polling is not charged.",
    tags: ["Video"],
    security: "metered",
    request: { contentType: "application/json", schema: RetrieveRequest },
    responses: {
      200: {
        description: "The job's state (application/json), or the video (video/*) once completed",
        schema: RetrieveResponse,
        headers: [...Models.headerNames, "x-service-video-status"]
      },
      404: { description: "No such job for this account", schema: Errors.StandardError }
    }
  }
))

/** @category schemas */
export const CompleteRequest = Schema.Struct({
  queue_id: Schema.String.check(Schema.isMinLength(1)),
  model: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "VideoCompleteRequest" })

/** @category routes */
export const quote = Route.make(
  "POST",
  "/api/v1/video/quote",
  Effect.gen(function*() {
    const price = yield* pricer
    return Effect.gen(function*() {
      const { quote } = yield* price(yield* RequestBody.schema(QuoteRequest))
      return HttpServerResponse.jsonUnsafe({ quote: Money.toUsdNumber(quote.amount) })
    })
  }),
  {
    summary: "Quote a video",
    description: "The price in USD of the video a queue request with these fields would render (duration x the model's " +
      "price per second): what the queue holds and a completed job is charged. Public, like the model list.",
    tags: ["Video"],
    security: "public",
    request: { contentType: "application/json", schema: QuoteRequest },
    responses: {
      200: { description: "The price", schema: Schema.Struct({ quote: Schema.Finite }).annotate({ identifier: "VideoQuoteResponse" }) }
    }
  }
)

/** @category routes */
export const complete = Route.metered(Route.make(
  "POST",
  "/api/v1/video/complete",
  Effect.gen(function*() {
    const metered = yield* Metered
    const tables = yield* PricingEngine.PricingEngine
    const jobs = yield* VideoJobs.VideoJobs
    return Effect.gen(function*() {
      const body = yield* RequestBody.schema(CompleteRequest)
      const quote: PricingEngine.Quote = { amount: Money.zero, version: tables.version, sku: "video_complete", units: 0, pricePerUnit: Money.zero }
      return yield* metered.run({
        sku: quote.sku,
        kind: "video_retrieve",
        quote,
        execute: ({ principal }) =>
          Effect.gen(function*() {
            const found = yield* jobs.get(principal.accountId, body.queue_id)
            if (Option.isNone(found) || (body.model !== undefined && body.model !== found.value.model)) {
              return yield* new Errors.NotFound({ message: `No video job ${body.queue_id}` })
            }
            const removal = yield* jobs.remove(principal.accountId, body.queue_id)
            if (removal === "running") {
              return yield* Errors.invalidField("queue_id", "The job is still running: retrieve it until it completes, fails or expires")
            }
            if (removal === "unknown") return yield* new Errors.NotFound({ message: `No video job ${body.queue_id}` })
            return {
              response: HttpServerResponse.jsonUnsafe({ success: true }),
              charge: Money.zero,
              usage: { units: 0, pricePerUnit: Money.zero, notes: `video job ${body.queue_id} released` }
            }
          })
      })
    })
  }),
  {
    summary: "Complete a video",
    description: "Releases a job that has ended (completed, failed or expired) once its video was retrieved: the job and its " +
      "record are removed, and retrieving it again is a 404. A job still running is a 400. Not charged.",
    tags: ["Video"],
    security: "metered",
    request: { contentType: "application/json", schema: CompleteRequest },
    responses: {
      200: { description: "The job was released", schema: Schema.Struct({ success: Schema.Literal(true) }).annotate({ identifier: "VideoCompleteResponse" }) },
      404: { description: "No such job for this account", schema: Errors.StandardError }
    }
  }
))

/** @category routes */
export const routes = [queue, retrieve, quote, complete] as const
