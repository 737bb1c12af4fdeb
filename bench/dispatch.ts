/**
 * The request path's own cost in process, without sockets: CPU time per request of the HTTP
 * application (`App.layer` through `Handlers.toWebHandler`) serving `GET /crypto/rpc/networks`
 * with the global middleware as shipped (request id, service headers, request log, metrics, abuse
 * guard), and the young-generation collections per 1,000 requests. 50 requests at a time, best
 * and median of 8 rounds of 20,000. CPU time, unlike throughput, moves little when other work
 * shares the machine, so this is the number for the routing and middleware step of the peers
 * benchmark. It uses only `App`, `Handlers` and the services' public layers, so the same file can
 * be run from an older checkout for a before/after comparison (`node bench/dispatch.ts`).
 */
import { AbuseGuard } from "@tollgate/core"
import { App, Handlers, RequestLog, ServiceInfo } from "@tollgate/http"
import * as Networks from "@tollgate/http/routes/Networks"
import { Layer } from "effect"
import { constants, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"

const CONCURRENCY = 50
const REQUESTS = 20_000
const ROUNDS = 8

let scavenges = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) scavenges += 1
  }
}).observe({ entryTypes: ["gc"] })

let logged = 0
const app = App.layer([Networks.route]).pipe(
  Layer.provide(Layer.mergeAll(ServiceInfo.layer(), AbuseGuard.layerMemory, RequestLog.layerWith((line) => (logged += line.length))))
)
const { dispose, handler } = Handlers.toWebHandler(app)
const url = "http://localhost/api/v1/crypto/rpc/networks"

const worker = async (count: number) => {
  for (let i = 0; i < count; i++) {
    const response = await handler(new Request(url))
    if (response.status !== 200) throw new Error(`status ${response.status}`)
    await response.arrayBuffer()
  }
}

const perRequest: Array<number> = []
const scavengesPer1k: Array<number> = []
for (let round = 0; round <= ROUNDS; round++) {
  const before = process.cpuUsage()
  const scavengesBefore = scavenges
  await Promise.all(Array.from({ length: CONCURRENCY }, () => worker(REQUESTS / CONCURRENCY)))
  await new Promise((resolve) => setImmediate(resolve))
  const used = process.cpuUsage(before)
  if (round === 0) continue // warm-up
  perRequest.push((used.user + used.system) / REQUESTS)
  scavengesPer1k.push((scavenges - scavengesBefore) * 1000 / REQUESTS)
}
await dispose()
const sorted = [...perRequest].sort((a, b) => a - b)
const median = sorted[Math.floor(sorted.length / 2)]!
console.log(
  `GET /crypto/rpc/networks in process (${logged > 0 ? "request log on" : "no log"}): CPU per request best ${sorted[0]!.toFixed(1)} us, ` +
    `median ${median.toFixed(1)} us; rounds ${perRequest.map((us) => us.toFixed(1)).join(" / ")}; ` +
    `scavenges per 1k requests ${[...scavengesPer1k].sort((a, b) => a - b)[Math.floor(scavengesPer1k.length / 2)]!.toFixed(2)}`
)
