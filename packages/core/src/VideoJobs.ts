/**
 * Video jobs: a video takes longer than a request, so `POST /video/queue` records a job and
 * `POST /video/retrieve` polls it. A job remembers whose it is, what it renders, where it runs (the
 * upstream and the upstream's job id, or the local dev renderer) and the credit hold placed for its
 * worst-case price when it was queued; the hold outlives the queue request and is settled by the
 * retrieval that sees the job end (captured when it completes, released when it fails or expires).
 *
 * A job ends once: `finish` moves it out of `queued` atomically and tells the caller whether it was
 * the one that did, so two retrievals racing on a finished job (or two instances) settle its hold
 * once and answer the same. Jobs are kept a day past their expiry, so a late poll is told the job
 * expired rather than that it never existed.
 *
 * Queued speech (`POST /audio/queue`) uses the same store and settlement: its job carries `speech`
 * (what to synthesize) and its capture is priced per input character under `tts:<model>`.
 *
 * `layerMemory` is for one process; `@tollgate/redis` has the shared layer (a Redis string per job,
 * `finish` as a Lua script). Both pass `packages/redis/test/VideoJobs.contract.test.ts`.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import * as CreditLedger from "./CreditLedger.ts"
import type { ServiceUnavailable } from "./Errors.ts"
import type * as Models from "./Models.ts"
import type * as Money from "./Money.ts"

/** @category models */
export type State = "queued" | "completed" | "failed" | "expired"

/** @category models */
export interface Job {
  readonly id: string
  readonly accountId: string
  readonly model: string
  readonly prompt: string
  readonly seconds: number
  readonly size: string
  /** The reference of the credit hold of the worst-case price. */
  readonly holdReference: string
  readonly quotedAmount: Money.Nano
  /** The base URL of the upstream rendering it; absent: the local dev renderer. */
  readonly upstream?: string | undefined
  readonly upstreamJobId?: string | undefined
  readonly state: State
  readonly createdAt: number
  /** When a job still queued counts as expired and its hold is released. */
  readonly expiresAt: number
  readonly finishedAt?: number | undefined
  /** Why a failed job failed, as the client is told. */
  readonly error?: string | undefined
  /** A speech job's synthesis (its text is `prompt`); absent on a video job. */
  readonly speech?: Speech | undefined
}

/** @category models */
export interface Speech {
  readonly voice: string
  readonly format: Models.SpeechFormat
  readonly speed: number
  /** The input characters billed. */
  readonly characters: number
}

/** @category models */
export interface Finished {
  readonly job: Job
  /** Whether this call ended the job (and so settles its hold). */
  readonly ended: boolean
}

/**
 * How long a job's record is kept after it expires.
 *
 * @category constants
 */
export const RETENTION_MS = 24 * 60 * 60_000

/** @category services */
export class VideoJobs extends Context.Service<VideoJobs, {
  readonly create: (job: Job) => Effect.Effect<void, ServiceUnavailable>
  readonly get: (accountId: string, id: string) => Effect.Effect<Option.Option<Job>, ServiceUnavailable>
  /**
   * Ends a queued job in `state`; a job that had already ended is returned as it is, with
   * `ended: false`. `None` when the job is unknown.
   */
  readonly finish: (
    accountId: string,
    id: string,
    end: { readonly state: Exclude<State, "queued">; readonly finishedAt: number; readonly error?: string | undefined }
  ) => Effect.Effect<Option.Option<Finished>, ServiceUnavailable>
  /**
   * Removes a job that has ended (the caller is done with it); a queued job is kept, its hold still
   * open. Ended is final, so reading the state and then deleting cannot remove a running job.
   */
  readonly remove: (accountId: string, id: string) => Effect.Effect<Removal, ServiceUnavailable>
}>()("@tollgate/core/VideoJobs") {}

/**
 * What `remove` did: removed the ended job, kept a running one, or found none.
 *
 * @category models
 */
export type Removal = "removed" | "running" | "unknown"

/**
 * Jobs in process memory; a job is dropped on the first access after its retention.
 *
 * @category constructors
 */
export const makeMemory = Effect.sync(() => {
  const jobs = new Map<string, Job>()
  const name = (accountId: string, id: string) => `${accountId}\u0000${id}`
  const live = (key: string, now: number) => {
    const job = jobs.get(key)
    if (job !== undefined && now > job.expiresAt + RETENTION_MS) {
      jobs.delete(key)
      return undefined
    }
    return job
  }
  return VideoJobs.of({
    create: (job) => Effect.sync(() => void jobs.set(name(job.accountId, job.id), job)),
    get: (accountId, id) => Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullishOr(live(name(accountId, id), now))),
    finish: (accountId, id, end) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const key = name(accountId, id)
        const job = live(key, now)
        if (job === undefined) return Option.none()
        if (job.state !== "queued") return Option.some({ job, ended: false })
        const ended: Job = {
          ...job,
          state: end.state,
          finishedAt: end.finishedAt,
          ...(end.error === undefined ? {} : { error: end.error })
        }
        jobs.set(key, ended)
        return Option.some({ job: ended, ended: true })
      }),
    remove: (accountId, id) =>
      Effect.map(Clock.currentTimeMillis, (now): Removal => {
        const key = name(accountId, id)
        const job = live(key, now)
        if (job === undefined) return "unknown"
        if (job.state === "queued") return "running"
        jobs.delete(key)
        return "removed"
      })
  })
})

/** @category layers */
export const layerMemory: Layer.Layer<VideoJobs> = Layer.effect(VideoJobs, makeMemory)

/**
 * How long a job's hold outlives the job, so a poll that sees the job complete just before it
 * expires can still capture it.
 *
 * @category constants
 */
export const HOLD_GRACE_MS = 5 * 60_000

/**
 * Ends a job and settles its hold when this call is the one that ended it: a completed job's hold
 * is captured at its price (`pricePerUnit` per second of video or character of speech, the usage
 * entry naming the request that saw it complete), a failed or expired job's released. A hold the ledger already closed (it expired)
 * is left as it is: the job's outcome stands and nothing is charged. Returns the job as it ended.
 *
 * @category settlement
 */
export const end = Effect.fn("VideoJobs.end")(function*(
  job: Job,
  outcome:
    | { readonly state: "completed"; readonly requestId: string; readonly pricePerUnit: Money.Nano }
    | { readonly state: "failed"; readonly error: string }
    | { readonly state: "expired" }
) {
  const jobs = yield* VideoJobs
  const ledger = yield* CreditLedger.CreditLedger
  const now = yield* Clock.currentTimeMillis
  const finished = yield* jobs.finish(job.accountId, job.id, {
    state: outcome.state,
    finishedAt: now,
    error: outcome.state === "failed" ? outcome.error : undefined
  })
  if (Option.isNone(finished)) return job
  if (!finished.value.ended) return finished.value.job
  const settled: Effect.Effect<unknown, CreditLedger.LedgerError | ServiceUnavailable> = outcome.state === "completed"
    ? ledger.capture({
      accountId: job.accountId,
      reference: job.holdReference,
      amount: job.quotedAmount,
      usage: {
        ...(job.speech === undefined
          ? { sku: `video:${job.model}`, units: job.seconds, notes: `${job.seconds} s ${job.size} video, job ${job.id}` }
          : { sku: `tts:${job.model}`, units: job.speech.characters, notes: `${job.speech.format} speech, job ${job.id}` }),
        pricePerUnit: outcome.pricePerUnit,
        requestId: outcome.requestId,
        executionMs: now - job.createdAt
      }
    })
    : ledger.release(job.accountId, job.holdReference)
  yield* settled.pipe(
    Effect.catchTag("LedgerError", (error) => Effect.logWarning("a job's hold could not be settled", { job: job.id, reason: error.reason }))
  )
  return finished.value.job
})
