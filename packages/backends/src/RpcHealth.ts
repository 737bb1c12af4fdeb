/**
 * What the RPC proxy knows of each upstream of a network, to choose where a call goes. `order` puts
 * the upstreams of a call best first: for a read, an upstream lagging more than `maxLagBlocks`
 * behind the best head is left out while a fresh one exists; a write may go to any upstream whose
 * chain is not wrong, since a lagging node still relays a transaction. The network's head and
 * finalized block, which the cache reads, are the best any upstream reported.
 *
 * **Details**
 *
 * Per upstream: its recent latencies and errors (a score), the head and the finalized block it last
 * reported, and whether its chain id was confirmed. The state is plain mutable records: it is read
 * and updated on every call, and a score is a few arithmetic steps that need no Effect.
 *
 * @since 0.1.0
 */

/** How many recent latencies are kept per upstream for its p90. */
const SAMPLES = 64

/** Below this many samples an upstream has no p90 yet (so no hedge by p90 either). */
const MIN_SAMPLES = 16

/** The weight of a new observation in the moving averages of latency and errors. */
const ALPHA = 0.2

/**
 * One upstream's observed state.
 *
 * @category models
 */
export interface Upstream {
  readonly url: string
  /** The URL without credentials, for logs, metrics and start-up errors. */
  readonly label: string
  /** Latest latencies in ms, a ring of `SAMPLES`. */
  readonly latencies: Array<number>
  samples: number
  latencyAverage: number
  errorAverage: number
  head: number | undefined
  headHash: string | undefined
  finalized: number | undefined
  /** `true` once `eth_chainId` matched; `false` after a mismatch (the upstream is never used). */
  chainConfirmed: boolean | undefined
}

/** @category constructors */
export const make = (url: string): Upstream => ({
  url,
  label: label(url),
  latencies: [],
  samples: 0,
  latencyAverage: 0,
  errorAverage: 0,
  head: undefined,
  headHash: undefined,
  finalized: undefined,
  chainConfirmed: undefined
})

/**
 * A URL as it may be shown: without the user and password of its userinfo.
 *
 * @category constructors
 */
export const label = (url: string): string => {
  const parsed = new URL(url)
  parsed.username = ""
  parsed.password = ""
  return parsed.toString()
}

/**
 * Records one exchange with the upstream: its latency, and whether it failed (refused, broken,
 * timed out or an HTTP error; an answer carrying JSON-RPC errors is not a failure of the node).
 *
 * @category recording
 */
export const record = (upstream: Upstream, latencyMs: number, failed: boolean): void => {
  upstream.latencies[upstream.samples % SAMPLES] = latencyMs
  upstream.samples += 1
  upstream.latencyAverage = upstream.samples === 1 ? latencyMs : upstream.latencyAverage + ALPHA * (latencyMs - upstream.latencyAverage)
  upstream.errorAverage += ALPHA * ((failed ? 1 : 0) - upstream.errorAverage)
}

/**
 * The 90th percentile of the recent latencies, or `undefined` before enough were seen.
 *
 * @category queries
 */
export const p90 = (upstream: Upstream): number | undefined => {
  if (upstream.samples < MIN_SAMPLES) return undefined
  const sorted = upstream.latencies.slice().sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))]
}

/**
 * Lower is better: the average latency, raised by the share of recent failures (an upstream
 * failing half its calls scores as if three times slower). An upstream not yet measured scores 0,
 * so it is tried and measured.
 *
 * @category queries
 */
export const score = (upstream: Upstream): number =>
  upstream.latencyAverage * (1 + 4 * upstream.errorAverage) + 1000 * upstream.errorAverage

/**
 * The highest head any upstream reported.
 *
 * @category queries
 */
export const bestHead = (upstreams: ReadonlyArray<Upstream>): number | undefined => {
  let best: number | undefined
  for (const upstream of upstreams) {
    if (upstream.chainConfirmed !== false && upstream.head !== undefined && (best === undefined || upstream.head > best))
      best = upstream.head
  }
  return best
}

/**
 * Whether the upstream is more than `maxLagBlocks` behind the best head.
 *
 * @category queries
 */
export const isLagging = (upstream: Upstream, best: number | undefined, maxLagBlocks: number): boolean =>
  best !== undefined && upstream.head !== undefined && best - upstream.head > maxLagBlocks

/**
 * The upstreams to try for a call, best first. Ties keep the configured order.
 *
 * @category queries
 */
export const order = <U extends Upstream>(upstreams: ReadonlyArray<U>, readOnly: boolean, maxLagBlocks: number): ReadonlyArray<U> => {
  const usable = upstreams.filter((upstream) => upstream.chainConfirmed !== false)
  const best = bestHead(usable)
  const fresh = readOnly ? usable.filter((upstream) => !isLagging(upstream, best, maxLagBlocks)) : usable
  const candidates = fresh.length > 0 ? fresh : usable
  return candidates.length < 2 ? candidates : candidates.slice().sort((a, b) => score(a) - score(b))
}

/**
 * What the network's upstreams say of its chain: the best head (and its hash, which changes on a
 * new block and on a reorg of the head) and the highest finalized block.
 *
 * @category models
 */
export interface ChainState {
  readonly head: number
  readonly headHash: string
  readonly finalized: number | undefined
}

/** @category queries */
export const chainState = (upstreams: ReadonlyArray<Upstream>): ChainState | undefined => {
  let best: Upstream | undefined
  let finalized: number | undefined
  for (const upstream of upstreams) {
    if (upstream.chainConfirmed === false || upstream.head === undefined || upstream.headHash === undefined) continue
    if (best === undefined || upstream.head > best.head!) best = upstream
    if (upstream.finalized !== undefined && (finalized === undefined || upstream.finalized > finalized)) finalized = upstream.finalized
  }
  return best === undefined ? undefined : { head: best.head!, headHash: best.headHash!, finalized }
}
