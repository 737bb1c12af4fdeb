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
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import type * as Metered from "../Metered.ts"
import * as QueuedJob from "../QueuedJob.ts"
import * as RequestBody from "../RequestBody.ts"

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

const notFound = (queueId: string) => new Errors.NotFound({ message: `No video job ${queueId}` })

/** The caller's job a request names, of the model it names if it names one, or a 404. */
const findJob = (jobs: VideoJobs.VideoJobs["Service"], accountId: string, body: { readonly queue_id: string; readonly model?: string }) =>
  QueuedJob.find(
    jobs,
    accountId,
    body.queue_id,
    (job) => body.model === undefined || body.model === job.model,
    () => notFound(body.queue_id)
  )

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
      if (!model.durations.includes(seconds))
        return yield* Errors.invalidField("duration", `${model.id} renders ${model.durations.join(", ")} seconds`)
      if (!model.sizes.includes(size))
        return yield* Errors.invalidField("size", `Expected one of ${model.sizes.join(", ")}`)
      const quote = PricingEngine.media(tables, "video", model.id, seconds)
      if (PricingEngine.isUnpriced(quote))
        return yield* Endpoint.unpriced(quote)
      return { model, seconds, size, quote }
    })
})

/** A queue request, checked and priced; `raw` is what makes two requests under one `Idempotency-Key` the same. */
interface Queueing {
  readonly raw: unknown
  readonly prompt: string
  readonly model: Models.VideoModel
  readonly seconds: number
  readonly size: string
  readonly quote: PricingEngine.Quote
}

/** @category routes */
export const queue = Endpoint.make({
  method: "POST",
  path: "/api/v1/video/queue",
  kind: "video",
  idempotency: true,
  serve: Effect.gen(function*() {
    const price = yield* pricer
    const backend = yield* VideoBackend.VideoBackend
    const jobs = yield* VideoJobs.VideoJobs
    return {
      decode: Effect.gen(function*() {
        const raw = yield* RequestBody.json()
        const body = yield* RequestBody.decode(QueueRequest, raw)
        const priced = yield* price(body)
        if (body.prompt.length > priced.model.promptCharacterLimit) {
          return yield* Errors.invalidField("prompt", `${priced.model.id} reads at most ${priced.model.promptCharacterLimit} characters`)
        }
        return { raw, prompt: body.prompt, ...priced } satisfies Queueing
      }),
      quote: ({ quote }: Queueing) => quote,
      subject: ({ model }: Queueing) => ({ models: [model.id] }),
      fingerprint: ({ raw }: Queueing) => JSON.stringify(raw),
      shape: ({ model }: Queueing) => QueuedJob.holdFor(model.jobTtlSeconds * 1000),
      execute: ({ model, prompt, seconds, size }: Queueing, quote: PricingEngine.Quote, context: Metered.CallContext) =>
        Effect.flatMap(backend.submit({ model, prompt, seconds, size }), (submitted) =>
          QueuedJob.start(jobs, {
            prefix: "vid",
            ttlMs: model.jobTtlSeconds * 1000,
            quote,
            context,
            work: {
              model: model.id,
              // only the local renderer needs the prompt again; an upstream job keeps its own
              prompt: submitted.upstream === undefined ? prompt : "",
              seconds,
              size,
              upstream: submitted.upstream,
              upstreamJobId: submitted.upstreamJobId
            },
            respond: (job) =>
              HttpServerResponse.jsonUnsafe(
                { model: model.id, queue_id: job.id, status: "queued", expires_at: unix(job.expiresAt) },
                { headers: { ...Models.headersOf(model), "x-service-video-hold-usd": Money.formatUsd(quote.amount) } }
              )
          }))
    }
  }),
  docs: {
    summary: "Queue a video",
    description: "Starts a video job and answers its queue_id. The worst-case price (duration x the model's price per " +
      "second) is held until the job ends: captured when it completes, released when it fails or expires. " +
      "Idempotency-Key makes a retried request return the same job.",
    tags: ["Video"],
    request: { contentType: "application/json", schema: QueueRequest },
    responses: {
      200: { description: "The job", schema: QueueResponse, headers: [...Models.headerNames, "x-service-video-hold-usd"] }
    }
  }
})

/** @category routes */
export const retrieve = QueuedJob.operation({
  path: "/api/v1/video/retrieve",
  kind: "video_retrieve",
  sku: "video_retrieve",
  request: RetrieveRequest,
  serve: ({ end, store: jobs }) =>
    Effect.gen(function*() {
      const models = yield* Models.ModelList
      const tables = yield* PricingEngine.PricingEngine
      const backend = yield* VideoBackend.VideoBackend
      return (body: typeof RetrieveRequest.Type, { principal, requestId }: Metered.CallContext) =>
        Effect.gen(function*(): Effect.fn.Return<Metered.Outcome | Metered.StreamingOutcome, Errors.ApiError> {
          let job = yield* findJob(jobs, principal.accountId, body)
          const model = yield* QueuedJob.stillServed(job, models.ofType("video", job.model))
          let progress: number | undefined
          if (yield* QueuedJob.overdue(job)) {
            job = yield* end(job, { state: "expired" })
          } else if (job.state === "queued") {
            const status = yield* backend.poll(model, job)
            if (status.state === "completed") {
              const price = PricingEngine.media(tables, "video", model.id, job.seconds)
              const pricePerUnit = PricingEngine.isUnpriced(price) ? Money.zero : price.pricePerUnit
              job = yield* end(job, { state: "completed", requestId, pricePerUnit })
            } else if (status.state === "failed") {
              job = yield* end(job, { state: "failed", error: status.error })
            } else {
              progress = status.progress
            }
          }
          const used = QueuedJob.free(`video job ${job.id} ${job.state}`)
          if (job.state !== "completed") return { response: stateOf(job, { progress }), ...used }
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
            produced: Effect.succeed(used)
          }
        })
    }),
  docs: {
    summary: "Retrieve a video",
    description: "The state of a video job as JSON while it runs (and when it failed or expired), or the video itself " +
      "once it completed. The poll that sees the job complete captures its hold; polling is not charged.",
    tags: ["Video"],
    responses: {
      200: {
        description: "The job's state (application/json), or the video (video/*) once completed",
        schema: RetrieveResponse,
        headers: [...Models.headerNames, "x-service-video-status"]
      },
      404: { description: "No such job for this account", schema: Errors.StandardError }
    }
  }
})

/** @category schemas */
export const CompleteRequest = Schema.Struct({
  queue_id: Schema.String.check(Schema.isMinLength(1)),
  model: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "VideoCompleteRequest" })

/** @category routes */
export const quote = QueuedJob.quote({
  path: "/api/v1/video/quote",
  request: QuoteRequest,
  price: Effect.map(pricer, (price) => (body: typeof QuoteRequest.Type) => Effect.map(price(body), ({ quote }) => quote)),
  response: "VideoQuoteResponse",
  docs: {
    summary: "Quote a video",
    description: "The price in USD of the video a queue request with these fields would render (duration x the model's " +
      "price per second): what the queue holds and a completed job is charged. Public, like the model list.",
    tags: ["Video"]
  }
})

/** @category routes */
export const complete = QueuedJob.operation({
  path: "/api/v1/video/complete",
  kind: "video_retrieve",
  sku: "video_complete",
  request: CompleteRequest,
  serve: ({ store: jobs }) =>
    Effect.succeed((body: typeof CompleteRequest.Type, { principal }: Metered.CallContext) =>
      Effect.gen(function*() {
        const job = yield* findJob(jobs, principal.accountId, body)
        const removal = yield* QueuedJob.remove(jobs, job, "The job is still running: retrieve it until it completes, fails or expires")
        if (removal === "unknown") return yield* notFound(body.queue_id)
        return { response: HttpServerResponse.jsonUnsafe({ success: true }), ...QueuedJob.free(`video job ${body.queue_id} released`) }
      })
    ),
  docs: {
    summary: "Complete a video",
    description: "Releases a job that has ended (completed, failed or expired) once its video was retrieved: the job and its " +
      "record are removed, and retrieving it again is a 404. A job still running is a 400. Not charged.",
    tags: ["Video"],
    responses: {
      200: {
        description: "The job was released",
        schema: Schema.Struct({ success: Schema.Literal(true) }).annotate({ identifier: "VideoCompleteResponse" })
      },
      404: { description: "No such job for this account", schema: Errors.StandardError }
    }
  }
})

/** @category routes */
export const routes = [queue, retrieve, quote, complete] as const
