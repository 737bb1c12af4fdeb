/**
 * The RPC proxy's metrics, per network and per upstream (the URL without credentials): calls,
 * failures, latency, head lag, cache hits and misses, hedges sent and won. They are defined here,
 * where they are recorded, and listed by the http package's `Observability` with every other
 * metric (this package does not depend on it).
 *
 * A series is made once per network (and upstream) and kept, so the per-call path builds no labels.
 *
 * @since 0.1.0
 */
import { type Context, Metric } from "effect"

const LATENCY_BOUNDARIES = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

type Labels = Readonly<Record<string, string>>

/**
 * The series of one metric by network, and by upstream within it: found in two `Map`s by the
 * label values themselves, so a call finds its series without building a label object or a key.
 */
const family = <M>(make: (attributes: Labels | undefined) => M) => {
  const series = new Map<string, Map<string | undefined, M>>()
  const of = (network: string, upstream?: string): M => {
    let byUpstream = series.get(network)
    if (byUpstream === undefined) {
      byUpstream = new Map()
      series.set(network, byUpstream)
    }
    let found = byUpstream.get(upstream)
    if (found === undefined) {
      found = make(upstream === undefined ? { network } : { network, upstream })
      byUpstream.set(upstream, found)
    }
    return found
  }
  return { base: make(undefined), of }
}

/** @category metrics */
export const upstreamCalls = family((attributes) =>
  Metric.counter("tollgate_rpc_upstream_calls_total", {
    description: "Exchanges with an RPC upstream (hedges and health polls included), by network and upstream",
    incremental: true,
    attributes
  })
)

/** @category metrics */
export const upstreamFailures = family((attributes) =>
  Metric.counter("tollgate_rpc_upstream_failures_total", {
    description: "Exchanges with an RPC upstream that failed (refused, broken, timed out, HTTP error), by network and upstream",
    incremental: true,
    attributes
  })
)

/** @category metrics */
export const upstreamLatency = family((attributes) =>
  Metric.histogram("tollgate_rpc_upstream_duration_seconds", {
    description: "Latency of exchanges with an RPC upstream, by network and upstream",
    boundaries: LATENCY_BOUNDARIES,
    attributes
  })
)

/** @category metrics */
export const headLag = family((attributes) =>
  Metric.gauge("tollgate_rpc_upstream_head_lag_blocks", {
    description: "Blocks an RPC upstream's head is behind the best head of its network",
    attributes
  })
)

/** @category metrics */
export const cacheHits = family((attributes) =>
  Metric.counter("tollgate_rpc_cache_hits_total", {
    description: "RPC calls answered from the cache, by network",
    incremental: true,
    attributes
  })
)

/** @category metrics */
export const cacheMisses = family((attributes) =>
  Metric.counter("tollgate_rpc_cache_misses_total", {
    description: "Cacheable RPC calls that went upstream, by network",
    incremental: true,
    attributes
  })
)

/** @category metrics */
export const hedgesSent = family((attributes) =>
  Metric.counter("tollgate_rpc_hedges_sent_total", {
    description: "Reads sent to a second upstream after the hedge delay, by network",
    incremental: true,
    attributes
  })
)

/** @category metrics */
export const hedgesWon = family((attributes) =>
  Metric.counter("tollgate_rpc_hedges_won_total", {
    description: "Hedged reads answered first by the second upstream, by network",
    incremental: true,
    attributes
  })
)

/**
 * Every RPC metric without labels, for `Observability` to list at zero from the start.
 *
 * @category metrics
 */
export const all: ReadonlyArray<Metric.Metric<any, any>> = [
  upstreamCalls.base,
  upstreamFailures.base,
  upstreamLatency.base,
  headLag.base,
  cacheHits.base,
  cacheMisses.base,
  hedgesSent.base,
  hedgesWon.base
]

/**
 * Records one exchange with an upstream.
 *
 * @category recording
 */
export const recordExchange = (
  context: Context.Context<never>,
  network: string,
  upstream: string,
  latencyMs: number,
  failed: boolean
): void => {
  upstreamCalls.of(network, upstream).updateUnsafe(1, context)
  upstreamLatency.of(network, upstream).updateUnsafe(latencyMs / 1000, context)
  if (failed) upstreamFailures.of(network, upstream).updateUnsafe(1, context)
}
