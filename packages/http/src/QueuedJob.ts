/**
 * What the routes of a queued job share: video's (`routes/Video.ts`) and queued speech's
 * (`routes/AudioQueue.ts`). A job outlives the request that queues it, so:
 *
 * - the queue call holds the job's price and hands the hold to the job (`Deferred`), living as long
 *   as the job may and a grace after (`holdFor`, `start`);
 * - the job's other operations (retrieve, complete) are free calls under the kind's limits
 *   (`operation`): authenticated, limited and logged like the paid ones, never charged. The one
 *   that sees the job end settles its hold (`Jobs.end`, over `VideoJobs.end`); complete removes
 *   a job that has ended (`remove`);
 * - the price a queue request would hold is answered publicly, like the model list (`quote`).
 *
 * @since 0.1.0
 */
import { Errors, Money, PricingEngine, VideoJobs } from "@tollgate/core"
import * as CreditLedger from "@tollgate/core/CreditLedger"
import { Clock, Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import * as Endpoint from "./Endpoint.ts"
import type * as Metered from "./Metered.ts"
import * as RequestBody from "./RequestBody.ts"
import * as Route from "./Route.ts"

/**
 * The schema of a JSON request body: what it is decoded with and what the OpenAPI document shows.
 *
 * @category models
 */
export type Request = Schema.Top & Schema.Decoder<unknown>

/**
 * The life of the hold of a job that may run `ttlMs`: the job's, and a grace for a poll that sees
 * it complete just before it expires.
 *
 * @category constructors
 */
export const holdFor = (ttlMs: number): Endpoint.Shape => ({ holdTtlMs: ttlMs + VideoJobs.HOLD_GRACE_MS })

/**
 * What a job is besides what queuing it sets (its id, owner, hold, state and times).
 *
 * @category models
 */
export type Work = Omit<VideoJobs.Job, "id" | "accountId" | "holdReference" | "quotedAmount" | "state" | "createdAt" | "expiresAt">

/**
 * Records the job a queue call started, as `<prefix>_<uuid>` expiring in `ttlMs`, with the call's
 * hold of `quote`, and answers the queue request with `respond`: the hold is left open for the job.
 *
 * @category constructors
 */
export const start = (
  jobs: VideoJobs.VideoJobs["Service"],
  options: {
    readonly prefix: string
    readonly ttlMs: number
    readonly quote: PricingEngine.Quote
    readonly context: Metered.CallContext
    readonly work: Work
    readonly respond: (job: VideoJobs.Job) => HttpServerResponse.HttpServerResponse
  }
): Effect.Effect<Metered.DeferredOutcome, Errors.ServiceUnavailable> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const job: VideoJobs.Job = {
      ...options.work,
      id: `${options.prefix}_${Crypto.randomUUID()}`,
      accountId: options.context.principal.accountId,
      holdReference: options.context.holdReference,
      quotedAmount: options.quote.amount,
      state: "queued",
      createdAt: now,
      expiresAt: now + options.ttlMs
    }
    return Effect.as(jobs.create(job), { _tag: "Deferred" as const, response: options.respond(job) })
  })

/**
 * What a free operation used: nothing, noted in the usage log.
 *
 * @category constructors
 */
export const free = (notes: string): Metered.Produced => ({ charge: Money.zero, usage: { units: 0, pricePerUnit: Money.zero, notes } })

/**
 * A free operation on a job (retrieve, complete): its JSON `request` decoded, the call quoted at
 * zero under `sku` and counted against `kind`'s limits, and what `serve` runs for it on the jobs.
 *
 * @category constructors
 */
export const operation = <S extends Request, R>(declaration: {
  readonly path: `/${string}`
  readonly kind: Metered.Kind
  readonly sku: string
  readonly request: S
  readonly serve: (jobs: Jobs) => Effect.Effect<
    (body: S["Type"], context: Metered.CallContext) => Effect.Effect<Metered.Outcome | Metered.StreamingOutcome, Errors.ApiError>,
    never,
    R
  >
  readonly docs: Omit<Route.Docs, "security" | "request">
}) =>
  Endpoint.make({
    method: "POST",
    path: declaration.path,
    kind: declaration.kind,
    serve: Effect.gen(function*() {
      const tables = yield* PricingEngine.PricingEngine
      const quote: PricingEngine.Quote = {
        amount: Money.zero,
        version: tables.version,
        sku: declaration.sku,
        units: 0,
        pricePerUnit: Money.zero
      }
      const execute = yield* declaration.serve(yield* jobsOf)
      return {
        decode: RequestBody.schema(declaration.request),
        quote: () => quote,
        execute: (body: S["Type"], _quote: PricingEngine.Quote, context: Metered.CallContext) => execute(body, context)
      }
    }),
    docs: { ...declaration.docs, request: { contentType: "application/json", schema: declaration.request } }
  })

/**
 * The jobs a job operation acts on: the store, and `end`, which ends a job and settles its hold
 * (`VideoJobs.end`) on the store and ledger the route was built with.
 *
 * @category models
 */
export interface Jobs {
  readonly store: VideoJobs.VideoJobs["Service"]
  readonly end: (
    job: VideoJobs.Job,
    outcome: Parameters<typeof VideoJobs.end>[1]
  ) => Effect.Effect<VideoJobs.Job, Errors.ServiceUnavailable>
}

const jobsOf = Effect.gen(function*() {
  const store = yield* VideoJobs.VideoJobs
  const ledger = yield* CreditLedger.CreditLedger
  return {
    store,
    end: (job, outcome) =>
      VideoJobs.end(job, outcome).pipe(
        Effect.provideService(VideoJobs.VideoJobs, store),
        Effect.provideService(CreditLedger.CreditLedger, ledger)
      )
  } satisfies Jobs
})

/**
 * The caller's job `queueId`, when it is one the route serves (`serves`); otherwise, or when there
 * is none, `notFound`.
 *
 * @category decoding
 */
export const find = (
  jobs: VideoJobs.VideoJobs["Service"],
  accountId: string,
  queueId: string,
  serves: (job: VideoJobs.Job) => boolean,
  notFound: () => Errors.NotFound
): Effect.Effect<VideoJobs.Job, Errors.NotFound | Errors.ServiceUnavailable> =>
  Effect.flatMap(
    jobs.get(accountId, queueId),
    (found) => Option.isSome(found) && serves(found.value) ? Effect.succeed(found.value) : Effect.fail(notFound())
  )

/**
 * Whether the job is still queued past its expiry, so its hold is to be released.
 *
 * @category settlement
 */
export const overdue = (job: VideoJobs.Job): Effect.Effect<boolean> =>
  Effect.map(Clock.currentTimeMillis, (now) => job.state === "queued" && now > job.expiresAt)

/**
 * The model of a job, which the service may have stopped serving since it was queued: a 503.
 *
 * @category decoding
 */
export const stillServed = <M>(job: VideoJobs.Job, model: Effect.Effect<M, Errors.ApiError>): Effect.Effect<M, Errors.ServiceUnavailable> =>
  Effect.mapError(
    model,
    () => new Errors.ServiceUnavailable({ message: `The model ${job.model} is no longer served`, retryAfterSeconds: 60 })
  )

/**
 * Removes a job that has ended; one still queued is a 400 naming `queue_id` that says `running`.
 *
 * @category settlement
 */
export const remove = (
  jobs: VideoJobs.VideoJobs["Service"],
  job: Pick<VideoJobs.Job, "accountId" | "id">,
  running: string
): Effect.Effect<Exclude<VideoJobs.Removal, "running">, Errors.ApiError> =>
  Effect.flatMap(
    jobs.remove(job.accountId, job.id),
    (removal) => removal === "running" ? Effect.fail(Errors.invalidField("queue_id", running)) : Effect.succeed(removal)
  )

/**
 * The public quote of a queued job: the price in USD a queue request with the `request`'s fields
 * would hold, as `price` says.
 *
 * @category constructors
 */
export const quote = <S extends Request, R>(declaration: {
  readonly path: `/${string}`
  readonly request: S
  readonly price: Effect.Effect<(body: S["Type"]) => Effect.Effect<PricingEngine.Quote, Errors.ApiError>, never, R>
  /** The OpenAPI identifier of the `{quote}` answer. */
  readonly response: string
  readonly docs: Pick<Route.Docs, "summary" | "description" | "tags">
}): Route.Route<R> =>
  Route.make(
    "POST",
    declaration.path,
    Effect.map(declaration.price, (price) =>
      RequestBody.schema(declaration.request).pipe(
        Effect.flatMap(price),
        Effect.map((quote) => HttpServerResponse.jsonUnsafe({ quote: Money.toUsdNumber(quote.amount) }))
      )),
    {
      ...declaration.docs,
      security: "public",
      request: { contentType: "application/json", schema: declaration.request },
      responses: {
        200: { description: "The price", schema: Schema.Struct({ quote: Schema.Finite }).annotate({ identifier: declaration.response }) }
      }
    }
  )
