/**
 * The Redis layer of `VideoJobs`: of two instances polling one finished job, exactly one settles
 * its hold. A job is kept until a day after it expires.
 *
 * **Details**
 *
 * One hash per job, under the account id as hash tag, holds the job as queued (JSON, never
 * rewritten) beside its `state`, `finishedAt` and `error` fields. `finish` is a Lua script
 * (`lua/video-jobs-finish.lua`) that moves the state out of `queued` only if it still is.
 *
 * @since 0.1.0
 */
import { Errors, VideoJobs } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"
import * as Lua from "./Lua.ts"

const finishScript = Redis.script(
  (key: string, state: string, finishedAt: number, error: string) => [key, state, finishedAt, error],
  {
    numberOfKeys: 1,
    lua: Lua.read("video-jobs-finish")
  }
).withReturnType<ReadonlyArray<string | number> | null>()

const unavailable = (error: unknown) => new Errors.ServiceUnavailable({ message: `Video job store unavailable: ${String(error)}` })

const jobOf = (json: string, state: string, finishedAt: string, error: string): VideoJobs.Job => ({
  ...(JSON.parse(json) as VideoJobs.Job),
  state: state as VideoJobs.State,
  ...(finishedAt === "" ? {} : { finishedAt: Number(finishedAt) }),
  ...(error === "" ? {} : { error })
})

/**
 * A store over the `Redis` service, its keys under `prefix`.
 *
 * @category constructors
 */
export const make = (options: { readonly prefix?: string } = {}) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const prefix = options.prefix ?? "tollgate:video"
    const finish = redis.eval(finishScript)
    const name = (accountId: string, id: string) => `${prefix}:{${accountId}}:${id}`
    return VideoJobs.VideoJobs.of({
      create: (job) => {
        const key = name(job.accountId, job.id)
        const ttlMs = Math.max(1, job.expiresAt + VideoJobs.RETENTION_MS - Date.now())
        const { state, ...queued } = job
        return redis.send("HSET", key, "job", JSON.stringify(queued), "state", state).pipe(
          Effect.andThen(redis.send("PEXPIRE", key, String(ttlMs))),
          Effect.asVoid,
          Effect.mapError(unavailable)
        )
      },
      get: (accountId, id) =>
        redis.send<ReadonlyArray<string | null>>("HMGET", name(accountId, id), "job", "state", "finishedAt", "error").pipe(
          Effect.map(([json, state, finishedAt, error]) =>
            json === null || json === undefined || state === null || state === undefined
              ? Option.none()
              : Option.some(jobOf(json, state, finishedAt ?? "", error ?? ""))
          ),
          Effect.mapError(unavailable)
        ),
      finish: (accountId, id, end) =>
        finish(name(accountId, id), end.state, end.finishedAt, end.error ?? "").pipe(
          Effect.map((reply) =>
            reply === null
              ? Option.none()
              : Option.some({
                ended: Number(reply[0]) === 1,
                job: jobOf(String(reply[1]), String(reply[2]), String(reply[3]), String(reply[4]))
              })
          ),
          Effect.mapError(unavailable)
        ),
      remove: (accountId, id) => {
        const key = name(accountId, id)
        return redis.send<string | null>("HGET", key, "state").pipe(
          Effect.flatMap((state): Effect.Effect<VideoJobs.Removal, Redis.RedisError> =>
            state === null || state === undefined
              ? Effect.succeed("unknown")
              : state === "queued"
              ? Effect.succeed("running")
              : Effect.as(redis.send("DEL", key), "removed")
          ),
          Effect.mapError(unavailable)
        )
      }
    })
  })

/**
 * The Redis layer, shared by every instance pointed at the same Redis.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<VideoJobs.VideoJobs, never, Redis.Redis> = Layer.effect(VideoJobs.VideoJobs, make())
