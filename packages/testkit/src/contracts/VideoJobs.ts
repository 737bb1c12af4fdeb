/**
 * The contract of `VideoJobs`: a job is kept per account and ends once. Written once;
 * `@tollgate/core` runs it against the memory layer and `@tollgate/redis` against Redis and Redis
 * Cluster.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { CreditLedger, Money, VideoJobs } from "@tollgate/core"
import { Effect, Option } from "effect"
import * as Contract from "../Contract.ts"

let counter = 0
const job = (overrides: Partial<VideoJobs.Job> = {}): VideoJobs.Job => {
  const now = Date.now()
  return {
    id: `vid_${now}_${counter++}`,
    accountId: "acct_video",
    model: "sora-2",
    prompt: "",
    seconds: 8,
    size: "1280x720",
    holdReference: `hold-${now}-${counter}`,
    quotedAmount: Money.usd(1),
    upstream: "http://127.0.0.1:9/v1",
    upstreamJobId: "video_1",
    state: "queued",
    createdAt: now,
    expiresAt: now + 60_000,
    ...overrides
  }
}

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<VideoJobs.VideoJobs, E>>) =>
  Contract.contract(
    "VideoJobs contract: a job is kept per account and ends once",
    backends,
    (it) => {
      it.effect("a created job reads back as it was, only under its own account", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const created = job()
          yield* jobs.create(created)
          assert.deepStrictEqual(yield* jobs.get(created.accountId, created.id), Option.some(created))
          assert.deepStrictEqual(yield* jobs.get("acct_other", created.id), Option.none())
        }))

      it.effect("a speech job (POST /audio/queue) reads back with its speech, as it ended", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const created = job({
            model: "tts-1",
            prompt: "Hello.",
            seconds: 0,
            size: "",
            speech: { voice: "nova", format: "wav", speed: 1.5, characters: 6 }
          })
          yield* jobs.create(created)
          assert.deepStrictEqual(yield* jobs.get(created.accountId, created.id), Option.some(created))
          const ended = yield* jobs.finish(created.accountId, created.id, { state: "completed", finishedAt: 5 })
          assert.deepStrictEqual(ended, Option.some({ ended: true, job: { ...created, state: "completed" as const, finishedAt: 5 } }))
        }))

      it.effect("the first finish ends the job; later ones get the job as it ended, ended: false", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const created = job()
          yield* jobs.create(created)
          const first = yield* jobs.finish(created.accountId, created.id, { state: "failed", finishedAt: 5, error: "boom" })
          assert.deepStrictEqual(
            first,
            Option.some({ ended: true, job: { ...created, state: "failed" as const, finishedAt: 5, error: "boom" } })
          )
          const second = yield* jobs.finish(created.accountId, created.id, { state: "completed", finishedAt: 6 })
          assert.deepStrictEqual(
            second,
            Option.some({ ended: false, job: { ...created, state: "failed" as const, finishedAt: 5, error: "boom" } })
          )
          assert.deepStrictEqual(yield* jobs.finish(created.accountId, "vid_unknown", { state: "expired", finishedAt: 7 }), Option.none())
        }))

      it.effect("remove: an ended job is removed, a running one kept, an unknown or another account's one not found", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const created = job()
          yield* jobs.create(created)
          assert.strictEqual(yield* jobs.remove(created.accountId, created.id), "running")
          assert.isTrue(Option.isSome(yield* jobs.get(created.accountId, created.id)))
          yield* jobs.finish(created.accountId, created.id, { state: "completed", finishedAt: 5 })
          assert.strictEqual(yield* jobs.remove("acct_other", created.id), "unknown")
          assert.strictEqual(yield* jobs.remove(created.accountId, created.id), "removed")
          assert.deepStrictEqual(yield* jobs.get(created.accountId, created.id), Option.none())
          assert.strictEqual(yield* jobs.remove(created.accountId, created.id), "unknown")
        }))

      it.effect("of concurrent finishes exactly one ends the job", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const created = job()
          yield* jobs.create(created)
          const results = yield* Effect.all(
            Array.from({ length: 10 }, (_, i) => jobs.finish(created.accountId, created.id, { state: "completed", finishedAt: i })),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((result) => Option.isSome(result) && result.value.ended).length, 1)
        }))

      it.effect("end: a completed job's hold is captured once at the quoted price; a failed job's released", () =>
        Effect.gen(function*() {
          const jobs = yield* VideoJobs.VideoJobs
          const ledger = yield* CreditLedger.CreditLedger
          yield* ledger.grant({ accountId: "acct_video", amount: Money.usd(10), reference: `grant-${Date.now()}-${counter++}` })
          const done = job()
          const failed = job()
          for (const each of [done, failed]) {
            yield* ledger.hold({ accountId: each.accountId, amount: each.quotedAmount, reference: each.holdReference, priceVersion: "v" })
            yield* jobs.create(each)
          }
          assert.strictEqual((yield* ledger.balance("acct_video")).availableUsd, Money.usd(8))
          const completed = { state: "completed" as const, requestId: "req", pricePerUnit: Money.unsafeNano(125_000_000) }
          yield* VideoJobs.end(done, completed)
          yield* VideoJobs.end(done, completed)
          yield* VideoJobs.end(failed, { state: "failed", error: "boom" })
          const balance = yield* ledger.balance("acct_video")
          assert.strictEqual(balance.usd, Money.usd(9))
          assert.strictEqual(balance.availableUsd, Money.usd(9))
          const usage = yield* ledger.usage("acct_video", { order: "asc", limit: 10 })
          assert.deepStrictEqual(usage.entries.map((entry) => [entry.sku, entry.units, entry.amount]), [["video:sora-2", 8, Money.usd(1)]])
        }).pipe(Effect.provide(CreditLedger.layerMemory)))
    }
  )
