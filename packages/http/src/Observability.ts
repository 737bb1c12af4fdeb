/**
 * Metrics, defined in one place and served at `/metrics` in Prometheus text format. All of them
 * exist from the start, at zero (`initialize`), with the process's memory and CPU sampled on each
 * scrape.
 *
 * **Details**
 *
 * Every response updates the request counters and the latency histogram (labelled by route pattern
 * and status); the request log line is `RequestLog`'s. The other modules record their own events
 * through the metrics defined here, so the whole set is visible in one place.
 *
 * @since 0.1.0
 */
import * as RpcMetrics from "@tollgate/backends/RpcMetrics"
import * as WorkerPool from "@tollgate/documents/WorkerPool"
import { type Context, Effect, Metric } from "effect"

/**
 * How a labelled metric makes the series of one label set: the same metric created with its labels.
 * `Metric.withAttributes` adds its labels to the request's context on every update (a copy of
 * that context: about 1 % of a paid call's CPU profile on memory stores); a metric created with
 * its labels reads the context as it is.
 */
const seriesMakers = new WeakMap<object, (attributes: Readonly<Record<string, string>>) => Metric.Metric<any, any>>()

const labelledCounter = (name: string, options: { readonly description: string; readonly incremental: boolean }) => {
  const metric = Metric.counter(name, options)
  seriesMakers.set(metric, (attributes) => Metric.counter(name, { ...options, attributes }))
  return metric
}

/** @category metrics */
export const httpRequests = labelledCounter("tollgate_http_requests_total", {
  description: "HTTP requests by route and status",
  incremental: true
})

const labelledHistogram = (name: string, options: { readonly description: string; readonly boundaries: ReadonlyArray<number> }) => {
  const metric = Metric.histogram(name, options)
  seriesMakers.set(metric, (attributes) => Metric.histogram(name, { ...options, attributes }))
  return metric
}

/** @category metrics */
export const httpLatency = labelledHistogram("tollgate_http_request_duration_seconds", {
  description: "HTTP request latency by route",
  boundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
})

/**
 * Admission outcomes of the metered pipeline: `outcome` is `admitted` or a rejection reason
 * (`rate_limit`, `balance`, `idempotency_conflict`, `abuse_guard`).
 *
 * @category metrics
 */
export const admissions = labelledCounter("tollgate_admissions_total", {
  description: "Admissions and rejections of metered calls by outcome",
  incremental: true
})

/** @category metrics */
export const creditsCaptured = labelledCounter("tollgate_credits_captured_nano_usd_total", {
  description: "Nano-USD captured from holds",
  incremental: true
})

/** @category metrics */
export const holdsOpen = Metric.gauge("tollgate_holds_open", {
  description: "Credit holds open in the ledger (all accounts, from the store)"
})

/** @category metrics */
export const heldNanoUsd = Metric.gauge("tollgate_held_nano_usd", {
  description: "Nano-USD (and today's allowance) held by open credit holds in the ledger (all accounts, from the store)"
})

/** @category metrics */
export const redisErrors = labelledCounter("tollgate_redis_errors_total", {
  description: "Redis errors by service and the failure policy applied",
  incremental: true
})

/** @category metrics */
export const upstreamErrors = labelledCounter("tollgate_upstream_errors_total", {
  description: "Upstream errors by network or model",
  incremental: true
})

/**
 * `batch-settlement` claims sent (`ChannelClaims`), by outcome.
 *
 * @category metrics
 */
export const channelClaims = labelledCounter("tollgate_channel_claims_total", {
  description: "batch-settlement claim transactions sent, by outcome",
  incremental: true
})

/** @category metrics */
export const channelClaimedUnits = Metric.counter("tollgate_channel_claimed_usdc_units_total", {
  description: "USDC base units claimed from batch-settlement channels",
  incremental: true
})

/** @category metrics */
export const channelRefunds = Metric.counter("tollgate_channel_refunds_total", {
  description: "Idle batch-settlement channels refunded to their payer",
  incremental: true
})

/**
 * Recorded by the extraction worker pool, which defines them (`@tollgate/documents` does not depend
 * on this package).
 *
 * @category metrics
 */
export const extractionQueueDepth = WorkerPool.queueDepth

/** @category metrics */
export const extractionChildRestarts = WorkerPool.childRestarts

/**
 * The RPC proxy's, per network and upstream: calls, failures, latency, head lag, cache hits and
 * misses, hedges sent and won. Recorded by `@tollgate/backends`, which defines them.
 *
 * @category metrics
 */
export const rpc = RpcMetrics.all

/** @category metrics */
export const processResidentMemory = Metric.gauge("process_resident_memory_bytes", { description: "Resident set size of the process" })

/** @category metrics */
export const processCpuSeconds = Metric.gauge("process_cpu_seconds_total", {
  description: "User and system CPU time of the process, in seconds"
})

/** @category metrics */
export const processStartTime = Metric.gauge("process_start_time_seconds", {
  description: "Start of the process, in seconds since the Unix epoch"
})

/** @category metrics */
export const heapUsed = Metric.gauge("nodejs_heap_size_used_bytes", { description: "V8 heap in use" })

/** @category metrics */
export const heapTotal = Metric.gauge("nodejs_heap_size_total_bytes", { description: "V8 heap allocated" })

/** @category metrics */
export const externalMemory = Metric.gauge("nodejs_external_memory_bytes", {
  description: "Memory of C++ objects bound to JavaScript objects, array buffers included"
})

/** @category metrics */
export const arrayBuffers = Metric.gauge("nodejs_array_buffers_bytes", { description: "Memory of ArrayBuffers and SharedArrayBuffers" })

/**
 * Reads the process's memory and CPU into their gauges (at start, and on each scrape).
 *
 * @category recording
 */
export const sampleProcess: Effect.Effect<void> = Effect.withFiber((fiber) => {
  const memory = process.memoryUsage()
  const cpu = process.cpuUsage()
  const context = fiber.context
  processResidentMemory.updateUnsafe(memory.rss, context)
  processCpuSeconds.updateUnsafe((cpu.user + cpu.system) / 1e6, context)
  processStartTime.updateUnsafe(Math.round(Date.now() / 1000 - process.uptime()), context)
  heapUsed.updateUnsafe(memory.heapUsed, context)
  heapTotal.updateUnsafe(memory.heapTotal, context)
  externalMemory.updateUnsafe(memory.external, context)
  arrayBuffers.updateUnsafe(memory.arrayBuffers, context)
  return Effect.void
})

/** The series an operator sees from the start, at zero: every metric, and the label sets known in advance. */
const knownSeries = (): ReadonlyArray<Metric.Metric<any, any>> => [
  httpRequests,
  httpLatency,
  ...["admitted", "rate_limit", "balance", "idempotency_conflict", "abuse_guard"].map((outcome) => labelled(admissions, { outcome })),
  creditsCaptured,
  holdsOpen,
  heldNanoUsd,
  ...["auth", "idempotency", "admission"].map((service) => labelled(redisErrors, { service, policy: "fail-closed" })),
  labelled(redisErrors, { service: "rate_limiter", policy: "fail-open" }),
  upstreamErrors,
  labelled(channelClaims, { outcome: "claimed" }),
  channelClaimedUnits,
  channelRefunds,
  extractionQueueDepth,
  extractionChildRestarts,
  ...rpc
]

/**
 * Registers every documented metric, so that a scrape right after start lists all of them at zero
 * (a counter that has not moved yet would otherwise be missing), and takes a first sample of the
 * process metrics.
 *
 * @category recording
 */
export const initialize: Effect.Effect<void> = Effect.withFiber((fiber) => {
  for (const metric of knownSeries()) metric.valueUnsafe(fiber.context)
  return sampleProcess
})

/**
 * Counts one event of a labelled counter.
 *
 * @category recording
 */
export const count = (metric: Metric.Counter<number>, attributes: Readonly<Record<string, string>>, by = 1) =>
  Metric.update(labelled(metric, attributes), by)

/**
 * Counts one event of a labelled counter in the metric registry of `context`, building no Effect:
 * for code on the per-request path that already holds the request fiber's context.
 *
 * @category recording
 */
export const countUnsafe = (
  metric: Metric.Counter<number>,
  attributes: Readonly<Record<string, string>>,
  context: Context.Context<never>,
  by = 1
): void => labelled(metric, attributes).updateUnsafe(by, context)

/**
 * A counter's series for fixed labels, resolved once: counting through it builds neither the
 * labels nor their key, for counts on the per-request path whose labels are known in advance.
 *
 * @category recording
 */
export const counterOf = (
  metric: Metric.Counter<number>,
  attributes: Readonly<Record<string, string>>
): (context: Context.Context<never>, by?: number) => void => {
  const resolved = labelled(metric, attributes)
  return (context, by = 1) => resolved.updateUnsafe(by, context)
}

const series = new WeakMap<object, Map<string, Metric.Metric<any, any>>>()

/**
 * The metric with these labels, made once per label set (`seriesMakers`), so the key's sorting and
 * encoding stay off the per-request path.
 */
const labelled = <M extends Metric.Metric<any, any>>(metric: M, attributes: Readonly<Record<string, string>>): M => {
  let byLabels = series.get(metric)
  if (byLabels === undefined) {
    byLabels = new Map()
    series.set(metric, byLabels)
  }
  let key = ""
  for (const name in attributes) key += `${name}\u0000${attributes[name]}\u0001`
  let found = byLabels.get(key)
  if (found === undefined) {
    found = seriesMakers.get(metric)?.(attributes) ?? Metric.withAttributes(metric, attributes)
    byLabels.set(key, found)
  }
  return found as M
}

/** A finished request as the request metrics see it. */
type Finished = { readonly method: string; readonly route: string; readonly status: number; readonly latencyMs: number }

type RequestSeries = readonly [Metric.Counter<number>, Metric.Histogram<number>]

/** The series of each route, method and status, nested so that finding one builds no key. */
const requestSeries = new Map<string, Map<string, Map<number, RequestSeries>>>()
let requestSeriesCount = 0

const SERIES_MEMORY = 10_000

/**
 * Records a finished request in the request counters and the latency histogram, in the registry
 * of `context` (the request fiber's). It runs on every request, so it builds no Effect and finds
 * the series of a route, method and status without building a key.
 *
 * @category recording
 */
export const recordRequest = (entry: Finished, context: Context.Context<never>): void => {
  let byMethod = requestSeries.get(entry.route)
  if (byMethod === undefined) {
    byMethod = new Map()
    requestSeries.set(entry.route, byMethod)
  }
  let byStatus = byMethod.get(entry.method)
  if (byStatus === undefined) {
    byStatus = new Map()
    byMethod.set(entry.method, byStatus)
  }
  let found = byStatus.get(entry.status)
  if (found === undefined) {
    if (requestSeriesCount >= SERIES_MEMORY) {
      requestSeries.clear()
      requestSeriesCount = 0
    }
    found = [
      labelled(httpRequests, { route: entry.route, method: entry.method, status: String(entry.status) }),
      labelled(httpLatency, { route: entry.route })
    ]
    byStatus.set(entry.status, found)
    requestSeriesCount += 1
  }
  found[0].updateUnsafe(1, context)
  found[1].updateUnsafe(entry.latencyMs / 1000, context)
}
