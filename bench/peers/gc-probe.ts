/**
 * Preloaded into each benchmarked server (`node --import`): sums the garbage collector's pauses
 * (perf_hooks `gc` entries) and counts the young-generation collections (scavenges), and writes the
 * running totals to `<GC_PROBE_FILE>.<pid>.json` every 100 ms (one file per process, since a server
 * with workers is several processes that inherit the same setting), so the harness can read the GC of a measured
 * window without touching the server's code. The pauses are wall time, so a busy machine inflates
 * them; the scavenge count follows the bytes allocated per request and does not depend on the load.
 * It also writes the young generation's size (V8's new space): V8 shrinks it to 1 MB when a process
 * that has been idle runs its memory reducer, and at one connection it grows back only slowly, so a
 * target with a shrunk young generation collects ten times as often as one without.
 */
import * as Fs from "node:fs"
import { constants, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"
import * as V8 from "node:v8"

const prefix = process.env["GC_PROBE_FILE"]
if (prefix !== undefined && prefix !== "") {
  const file = `${prefix}.${process.pid}.json`
  let pauseMs = 0
  let count = 0
  let scavenges = 0
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      pauseMs += entry.duration
      count += 1
      if ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) scavenges += 1
    }
  }).observe({ entryTypes: ["gc"] })
  // Written aside and renamed, so a reader never sees a half-written file.
  setInterval(() => {
    const young = V8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.space_size ?? Number.NaN
    Fs.writeFileSync(`${file}.tmp`, JSON.stringify({ pauseMs, count, scavenges, youngMb: young / 1048576 }))
    Fs.renameSync(`${file}.tmp`, file)
  }, 100).unref()
}
