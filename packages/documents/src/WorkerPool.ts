/**
 * Killable extraction workers: a fixed set of long-lived child processes (one per core by default),
 * each running `Worker.ts`, with requests queued once all are busy. Every format runs here, not only
 * PDF: pdf.js has no cap on decoded stream sizes, a 25 MB spreadsheet keeps a core busy for
 * seconds, and neither may stall or crash the server. The parent watches each job from outside
 * the child: it polls the child's resident memory and kills it over the limit (`worker_threads`
 * resource limits do not count the ArrayBuffers a bomb fills), kills it when the wall-clock budget
 * (a base plus a per-megabyte allowance, capped) runs out, and replaces any child that was killed,
 * crashed or served its quota of documents before the next job runs on it.
 *
 * @since 0.1.0
 */
import { Effect, Metric, Semaphore } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import { DocumentRefused, refuse } from "./DocumentError.ts"
import type * as Extraction from "./Extraction.ts"
import type * as Worker from "./Worker.ts"

/** @category models */
export interface Config {
  readonly workers: number
  /** A child whose resident memory passes this is killed. */
  readonly maxRssBytes: number
  /** V8 heap cap of each child (`--max-old-space-size`). */
  readonly maxHeapMb: number
  readonly baseTimeoutMs: number
  readonly timeoutMsPerMb: number
  readonly maxTimeoutMs: number
  /** A child is replaced after this many documents, so no heap grows without bound. */
  readonly maxJobsPerWorker: number
  /** How often the watchdog samples a busy child's memory. */
  readonly pollMs: number
}

/** @category defaults */
export const defaultConfig: Config = {
  workers: Os.availableParallelism(),
  maxRssBytes: 1024 * 1024 * 1024,
  maxHeapMb: 512,
  baseTimeoutMs: 5_000,
  timeoutMsPerMb: 2_000,
  maxTimeoutMs: 60_000,
  maxJobsPerWorker: 500,
  pollMs: 20
}

/** @category models */
export interface Outcome extends Extraction.Extracted {
  /** The child's peak resident memory during this job, when the platform reports it. */
  readonly peakRssBytes: number | undefined
}

/** @category models */
/** @category metrics */
export const queueDepth = Metric.gauge("tollgate_extraction_queue_depth", {
  description: "Documents waiting for an extraction worker"
})

/** @category metrics */
export const childRestarts = Metric.counter("tollgate_extraction_child_restarts_total", {
  description: "Extraction worker processes replaced after a crash or a kill",
  incremental: true
})

export interface WorkerPool {
  readonly run: (bytes: Uint8Array) => Effect.Effect<Outcome, DocumentRefused>
}

interface Slot {
  child: ChildProcess.ChildProcess
  /** Settles once the child has loaded its readers (pdf.js and the tokenizer take about a second). */
  ready: Promise<void>
  jobs: number
  healthy: boolean
}

const workerPath = new URL("./Worker.ts", import.meta.url).pathname

const spawn = (config: Config): Pick<Slot, "child" | "ready"> => {
  const child = ChildProcess.fork(workerPath, [], {
    execArgv: [`--max-old-space-size=${config.maxHeapMb}`],
    serialization: "advanced",
    stdio: ["ignore", "ignore", "ignore", "ipc"]
  })
  const ready = new Promise<void>((resolve) => {
    const settle = () => {
      child.off("message", settle)
      child.off("exit", settle)
      resolve()
    }
    child.on("message", settle)
    child.once("exit", settle)
  })
  return { child, ready }
}

const statusField = (pid: number, field: string): number | undefined => {
  try {
    const status = Fs.readFileSync(`/proc/${pid}/status`, "latin1")
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)
    return match === null ? undefined : Number(match[1]) * 1024
  } catch {
    return undefined
  }
}

// Resets the kernel's high-water mark so VmHWM reports this job's peak only.
const resetPeak = (pid: number): void => {
  try {
    Fs.writeFileSync(`/proc/${pid}/clear_refs`, "5")
  } catch {
    return
  }
}

const budgetMs = (config: Config, bytes: number): number =>
  Math.min(config.maxTimeoutMs, config.baseTimeoutMs + config.timeoutMsPerMb * (bytes / 1_048_576))

let nextId = 0

const runOn = (slot: Slot, bytes: Uint8Array, config: Config) =>
  Effect.callback<Outcome, DocumentRefused>((resume) => {
    const child = slot.child
    const pid = child.pid ?? -1
    const id = ++nextId
    let done = false
    const kill = () => {
      slot.healthy = false
      child.kill("SIGKILL")
    }
    const finish = (effect: Effect.Effect<Outcome, DocumentRefused>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      clearInterval(watchdog)
      child.off("message", onMessage)
      child.off("exit", onExit)
      resume(effect)
    }
    const onMessage = (reply: Worker.Reply) => {
      if (reply.id !== id) return
      finish(
        reply.ok
          ? Effect.succeed({ ...reply.result, peakRssBytes: statusField(pid, "VmHWM") })
          : Effect.fail(refuse(reply.reason, reply.message))
      )
    }
    const onExit = () => {
      slot.healthy = false
      finish(Effect.fail(refuse("crashed", "The document could not be processed")))
    }
    let timer: ReturnType<typeof setTimeout> | undefined
    let watchdog: ReturnType<typeof setInterval> | undefined
    child.on("message", onMessage)
    child.once("exit", onExit)
    void slot.ready.then(() => {
      if (done) return
      if (!child.connected) return onExit()
      timer = setTimeout(() => {
        kill()
        finish(Effect.fail(refuse("time-limit", "The document took too long to process")))
      }, budgetMs(config, bytes.length))
      watchdog = setInterval(() => {
        const rss = statusField(pid, "VmRSS")
        if (rss !== undefined && rss > config.maxRssBytes) {
          kill()
          finish(Effect.fail(refuse("memory-limit", "The document needs more memory than allowed to process")))
        }
      }, config.pollMs)
      resetPeak(pid)
      slot.jobs++
      child.send({ id, bytes } satisfies Worker.Request)
    })
    return Effect.sync(() => {
      if (!done) kill()
      finish(Effect.interrupt)
    })
  })

/**
 * Starts the workers; they are killed when the scope closes.
 *
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(overrides: Partial<Config> = {}) {
  const config: Config = { ...defaultConfig, ...overrides }
  const slots: Array<Slot> = []
  const idle: Array<Slot> = []
  yield* Effect.acquireRelease(
    Effect.sync(() => {
      for (let i = 0; i < Math.max(1, config.workers); i++) {
        const slot: Slot = { ...spawn(config), jobs: 0, healthy: true }
        slots.push(slot)
        idle.push(slot)
      }
    }),
    () => Effect.sync(() => slots.forEach((slot) => slot.child.kill("SIGKILL")))
  )
  yield* Effect.promise(() => Promise.all(slots.map((slot) => slot.ready)))
  const semaphore = yield* Semaphore.make(slots.length)
  const release = (slot: Slot) =>
    Effect.suspend(() => {
      const crashed = !slot.healthy
      if (crashed || slot.jobs >= config.maxJobsPerWorker) {
        slot.child.kill("SIGKILL")
        Object.assign(slot, spawn(config))
        slot.jobs = 0
        slot.healthy = true
      }
      idle.push(slot)
      return crashed ? Metric.update(childRestarts, 1) : Effect.void
    })
  // Documents in the pool beyond one per worker are the ones waiting.
  let pending = 0
  const track = (delta: 1 | -1) =>
    Effect.suspend(() => Metric.update(queueDepth, Math.max(0, (pending += delta) - slots.length)))
  const run = (bytes: Uint8Array) =>
    Effect.acquireUseRelease(
      track(1),
      () =>
        semaphore.withPermits(1)(
          Effect.acquireUseRelease(
            Effect.sync(() => idle.pop()!),
            (slot) => runOn(slot, bytes, config),
            release
          )
        ),
      () => track(-1)
    )
  return { run } satisfies WorkerPool
})
