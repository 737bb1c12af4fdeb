/**
 * Killable extraction workers: a fixed set of long-lived child processes (one per core by default),
 * each running `Worker.ts`, with requests queued once all are busy. No document, however hostile,
 * can stall or crash the server: a worker over its memory or time budget is killed and replaced.
 *
 * **Details**
 *
 * Every format runs here, not only PDF: pdf.js has no cap on decoded stream sizes, and a 25 MB
 * spreadsheet keeps a core busy for seconds. The parent watches each job from outside the child: it
 * polls the child's resident memory and kills it over the limit (`worker_threads` resource limits
 * do not count the ArrayBuffers a bomb fills), kills it when the wall-clock budget (a base plus a
 * per-megabyte allowance, capped) runs out, and replaces any child that was killed, crashed or
 * served its quota of documents before the next job runs on it.
 *
 * @since 0.1.0
 */
import { Effect, Metric, Semaphore } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type DocumentRefused, refuse } from "./DocumentError.ts"
import type * as Extraction from "./Extraction.ts"
import * as Sniff from "./Sniff.ts"
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
  /**
   * A document at least this large, arriving while other workers are idle, is split across them:
   * a PDF by pages, any other document's token count by slices of its text.
   */
  readonly splitMinBytes: number
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
  pollMs: 20,
  splitMinBytes: 256 * 1024
}

/** @category models */
export interface Outcome extends Extraction.Extracted {
  /** The highest resident memory of a child during this job, when the platform reports it. */
  readonly peakRssBytes: number | undefined
  /** How many workers the document was extracted on (more than one for a split document). */
  readonly workers: number
}

/** @category metrics */
export const queueDepth = Metric.gauge("tollgate_extraction_queue_depth", {
  description: "Documents waiting for an extraction worker"
})

/** @category metrics */
export const childRestarts = Metric.counter("tollgate_extraction_child_restarts_total", {
  description: "Extraction worker processes replaced after a crash or a kill",
  incremental: true
})

/** @category models */
export interface WorkerPool {
  readonly run: (bytes: Uint8Array) => Effect.Effect<Outcome, DocumentRefused>
}

interface Slot {
  child: ChildProcess.ChildProcess
  /** Settles once the child has loaded its readers (pdf.js and the tokenizer take about a second). */
  ready: Promise<void>
  /** Whether `ready` has settled: only a warm idle worker is worth lending to a split PDF. */
  warm: boolean
  jobs: number
  healthy: boolean
}

// `Worker.ts` in the workspace, `Worker.js` once built to dist/.
const workerPath = new URL(`./Worker${Path.extname(import.meta.url)}`, import.meta.url).pathname

/**
 * The bytes as a plain `Uint8Array` over the same memory. Over `node:http` an upload arrives as a
 * Node `Buffer`, which the IPC channel delivers to the worker as a `Buffer` again, and pdf.js
 * refuses a `Buffer`; every container is normalized here, once, before any job is sent.
 */
const plainView = (bytes: Uint8Array): Uint8Array =>
  Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)

const fork = (config: Config): ChildProcess.ChildProcess =>
  ChildProcess.fork(workerPath, [], {
    execArgv: [`--max-old-space-size=${config.maxHeapMb}`],
    serialization: "advanced",
    stdio: ["ignore", "ignore", "ignore", "ipc"]
  })

// The first message a child sends is its ready signal; an exit settles too, so nothing waits forever.
const readyOf = (slot: Slot): Promise<void> => {
  const child = slot.child
  return new Promise<void>((resolve) => {
    const settle = () => {
      child.off("message", settle)
      child.off("exit", settle)
      if (slot.child === child) slot.warm = true
      resolve()
    }
    child.on("message", settle)
    child.once("exit", settle)
  })
}

const spawn = (config: Config): Slot => {
  const slot: Slot = { child: fork(config), ready: Promise.resolve(), warm: false, jobs: 0, healthy: true }
  slot.ready = readyOf(slot)
  return slot
}

const respawn = (slot: Slot, config: Config): void => {
  slot.child.kill("SIGKILL")
  slot.child = fork(config)
  slot.warm = false
  slot.jobs = 0
  slot.healthy = true
  slot.ready = readyOf(slot)
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

interface Done<A> {
  readonly result: A
  readonly peakRssBytes: number | undefined
}

let nextId = 0

// Below this many characters a text is counted faster on one worker than shipped to two.
const SLICED_COUNT_MIN_CHARS = 1_000_000

/** Runs one job on a slot under the watchdog; the budget is that of a document of `inputBytes`. */
const runOn = <J extends Worker.Job>(slot: Slot, job: J, inputBytes: number, config: Config) =>
  Effect.callback<Done<Worker.Results[J["_tag"]]>, DocumentRefused>((resume) => {
    const child = slot.child
    const pid = child.pid ?? -1
    const id = ++nextId
    let done = false
    const kill = () => {
      slot.healthy = false
      child.kill("SIGKILL")
    }
    const finish = (effect: Effect.Effect<Done<Worker.Results[J["_tag"]]>, DocumentRefused>) => {
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
          ? Effect.succeed({
            result: reply.result as Worker.Results[J["_tag"]],
            peakRssBytes: statusField(pid, "VmHWM")
          })
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
      }, budgetMs(config, inputBytes))
      watchdog = setInterval(() => {
        const rss = statusField(pid, "VmRSS")
        if (rss !== undefined && rss > config.maxRssBytes) {
          kill()
          finish(Effect.fail(refuse("memory-limit", "The document needs more memory than allowed to process")))
        }
      }, config.pollMs)
      resetPeak(pid)
      slot.jobs++
      child.send({ id, job } satisfies Worker.Request)
    })
    return Effect.sync(() => {
      if (!done) kill()
      finish(Effect.interrupt)
    })
  })

const peakOf = (peaks: ReadonlyArray<number | undefined>): number | undefined => {
  const known = peaks.filter((peak) => peak !== undefined)
  return known.length === 0 ? undefined : Math.max(...known)
}

/**
 * Starts the workers; they are killed when the scope closes.
 *
 * A document of at least `splitMinBytes` that arrives while other workers are idle and no document
 * is waiting is split across the idle workers. A PDF is split by pages: each worker opens it and
 * extracts its share of the pages, and the first worker joins the shares in page order and their
 * token counts (`Tokens.countJoined`). Any other document is extracted on one worker, and then, if
 * its text is long and workers are still idle, its tokens are counted in slices on them. Either way
 * the text and the count are exactly those of one worker. Every job runs under its own watchdog
 * with the whole document's budget; a refusal of any job refuses the document and kills the other
 * jobs' workers. Borrowed workers are given back as soon as their job is done, and a pool with a
 * document waiting never lends, so a split never keeps another document waiting longer than one
 * share takes.
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
        const slot = spawn(config)
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
      if (crashed || slot.jobs >= config.maxJobsPerWorker) respawn(slot, config)
      idle.push(slot)
      return crashed ? Metric.update(childRestarts, 1) : Effect.void
    })
  // A warm worker is preferred: a replaced one is still loading its readers.
  const take = (): Slot => {
    const warm = idle.findLastIndex((slot) => slot.warm)
    return idle.splice(warm === -1 ? idle.length - 1 : warm, 1)[0]!
  }
  // Documents that have not yet got their first worker.
  let waiting = 0
  const wait = (delta: 1 | -1) => Effect.suspend(() => Metric.update(queueDepth, waiting += delta))

  const canBorrow = () => waiting === 0 && idle.some((slot) => slot.warm)
  // Idle warm workers, each with its permit, borrowed only while nothing is waiting for one.
  const borrow = Effect.gen(function*() {
    const lent = new Set<Slot>()
    while (lent.size < slots.length - 1 && canBorrow() && (yield* semaphore.takeIfAvailable(1))) lent.add(take())
    return lent
  })
  const giveBack = (lent: Set<Slot>, slot: Slot) =>
    Effect.suspend(() => lent.delete(slot) ? Effect.andThen(release(slot), semaphore.release(1)) : Effect.void)
  // Runs `use` on the main worker and whatever `borrow` lends; each lent worker goes back as soon
  // as its own job ends.
  const withLent = <A>(
    main: Slot,
    lend: boolean,
    use: (
      workers: ReadonlyArray<Slot>,
      job: <J extends Worker.Job>(slot: Slot, job: J) => Effect.Effect<Done<Worker.Results[J["_tag"]]>, DocumentRefused>
    ) => Effect.Effect<A, DocumentRefused>,
    inputBytes: number
  ) =>
    Effect.acquireUseRelease(
      lend ? borrow : Effect.sync(() => new Set<Slot>()),
      (lent) => use([main, ...lent], (slot, job) => runOn(slot, job, inputBytes, config).pipe(Effect.ensuring(giveBack(lent, slot)))),
      (lent) => Effect.forEach([...lent], (slot) => giveBack(lent, slot), { discard: true })
    )

  const whole = (slot: Slot, bytes: Uint8Array) =>
    Effect.map(
      runOn(slot, { _tag: "Extract", bytes }, bytes.length, config),
      ({ peakRssBytes, result }): Outcome => ({ ...result, peakRssBytes, workers: 1 })
    )

  const pdf = (main: Slot, bytes: Uint8Array) =>
    withLent(main, true, (workers, job) => {
      if (workers.length === 1) return whole(main, bytes)
      return Effect.gen(function*() {
        const shares = yield* Effect.forEach(
          workers,
          (slot, part) => job(slot, { _tag: "PdfShare", bytes, share: { part, parts: workers.length } }),
          { concurrency: "unbounded" }
        )
        const joined = yield* job(main, {
          _tag: "PdfJoin",
          shares: shares.map((share) => share.result),
          inputBytes: bytes.length
        })
        return {
          ...joined.result,
          peakRssBytes: peakOf([...shares.map((share) => share.peakRssBytes), joined.peakRssBytes]),
          workers: workers.length
        } satisfies Outcome
      })
    }, bytes.length)

  // Any other large document: the text on one worker, then its tokens counted in slices on the
  // workers idle by then (a long text takes longer to count than to extract).
  const countedInSlices = (main: Slot, bytes: Uint8Array) =>
    Effect.gen(function*() {
      const extracted = yield* runOn(main, { _tag: "ExtractText", bytes }, bytes.length, config)
      const { text } = extracted.result
      return yield* withLent(main, text.length >= SLICED_COUNT_MIN_CHARS, (workers, job) =>
        Effect.gen(function*() {
          const slices = yield* Effect.forEach(workers, (slot, i) => {
            const from = Math.floor(i * text.length / workers.length)
            const to = Math.floor((i + 1) * text.length / workers.length)
            return job(slot, { _tag: "CountPiece", text: text.slice(from, to) })
          }, { concurrency: "unbounded" })
          const tokens = yield* job(main, { _tag: "CountJoined", pieces: slices.map((slice) => slice.result) })
          return {
            ...extracted.result,
            tokens: tokens.result,
            peakRssBytes: peakOf([extracted.peakRssBytes, ...slices.map((slice) => slice.peakRssBytes), tokens.peakRssBytes]),
            workers: workers.length
          } satisfies Outcome
        }), bytes.length)
    })

  const dispatch = (slot: Slot, bytes: Uint8Array) => {
    if (bytes.length < config.splitMinBytes || !canBorrow()) return whole(slot, bytes)
    return Sniff.sniff(bytes) === "pdf" ? pdf(slot, bytes) : countedInSlices(slot, bytes)
  }

  const run = (input: Uint8Array) =>
    Effect.suspend(() => {
      const bytes = plainView(input)
      let queued = true
      const leave = Effect.suspend(() => {
        if (!queued) return Effect.void
        queued = false
        return wait(-1)
      })
      return wait(1).pipe(
        Effect.andThen(
          semaphore.withPermits(1)(
            Effect.andThen(
              leave,
              Effect.acquireUseRelease(
                Effect.sync(take),
                (slot) => dispatch(slot, bytes),
                release
              )
            )
          )
        ),
        Effect.ensuring(leave)
      )
    })
  return { run } satisfies WorkerPool
})
