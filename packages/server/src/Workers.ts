/**
 * Every core of the machine: with `TOLLGATE_WORKERS` above one, the process `pnpm start` runs
 * becomes a supervisor that forks that many server processes with `node:cluster`, sharing the port
 * and all their state through Redis. A start that fails prints its one line once; a worker that
 * dies later is started again; SIGTERM or SIGINT lets every worker finish its requests.
 *
 * **Details**
 *
 * The supervisor hands each new connection to a worker in turn. State is shared only through Redis,
 * which is why the configuration refuses more than one worker on memory stores. The first worker
 * starts alone and the others once it listens, so a start that fails (Redis unreachable) prints its
 * one line once and stops the server. A worker that dies later is started again after a second; on
 * SIGTERM or SIGINT each worker shuts down gracefully and the supervisor exits when the last one
 * has.
 *
 * @since 0.1.0
 */
import { Data, Deferred, Effect, Schedule } from "effect"
import Cluster from "node:cluster"

/**
 * The first worker exited before it listened. It has printed why; the supervisor only stops.
 *
 * @category errors
 */
export class WorkerStartFailed extends Data.TaggedError("WorkerStartFailed")<{ readonly code: number | null }> {}

/** @category models */
export interface Options {
  readonly workers: number
  /** Called with each line the supervisor logs (the worker that started, died, was replaced). */
  readonly log: (message: string, fields: Record<string, unknown>) => Effect.Effect<void>
}

/** Whether this process is a worker forked by the supervisor. @category predicates */
export const isWorker = (): boolean => Cluster.isWorker

const RESTART_DELAY_MS = 1_000

/**
 * Runs the supervisor until it is interrupted (a signal), then stops every worker and waits for
 * them. Fails with `WorkerStartFailed` if the first worker exits before it listens.
 *
 * @category constructors
 */
export const supervise = (options: Options) =>
  Effect.gen(function*() {
    let stopping = false
    let listened = false
    const failedStart = yield* Deferred.make<never, WorkerStartFailed>()
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const fork = () => {
      const worker = Cluster.fork()
      worker.once("listening", () => {
        if (listened) return
        listened = true
        for (let i = 1; i < options.workers; i++) fork()
      })
      worker.once("exit", (code, signal) => {
        if (stopping) return
        if (!listened) {
          Deferred.doneUnsafe(failedStart, Effect.fail(new WorkerStartFailed({ code })))
          return
        }
        runFork(
          options.log("worker exited, starting another", { pid: worker.process.pid, code, signal }).pipe(
            Effect.andThen(Effect.sleep(RESTART_DELAY_MS)),
            Effect.andThen(Effect.sync(fork))
          )
        )
      })
    }
    yield* Effect.acquireRelease(
      Effect.sync(fork),
      () =>
        Effect.gen(function*() {
          stopping = true
          const workers = Object.values(Cluster.workers ?? {}).filter((worker) => worker !== undefined)
          for (const worker of workers) worker.process.kill("SIGTERM")
          yield* Effect.sync(() => workers.every((worker) => worker.isDead())).pipe(
            Effect.repeat({ until: (dead) => dead, schedule: Schedule.spaced("50 millis") })
          )
        })
    )
    return yield* Deferred.await(failedStart)
  })
