/**
 * GET /api/v1/crypto/rpc/networks through tollgate (all global middleware on) against a bare
 * node:http server returning the same bytes, same run: the server process's CPU per request
 * (utime + stime from /proc over the 2xx answers) and req/s. Target (#21): tollgate's CPU per
 * request <= 2x the bare server's. A third server, Effect's router serving the same route with
 * none of tollgate's middleware, splits the distance into Effect's share and tollgate's. The three
 * run in turn, twice, and each row is the mean of its two runs, so a slow spell of the machine does
 * not land on one server only. `pnpm bench peers` measures the same pair beside the paid path.
 * A server that fails more than 1 % of its requests stops the run (`Harness.requireAnswered`).
 */
import { cpuSeconds, load, type LoadResult, requireAnswered, startServer, table } from "./Harness.ts"

const path = "/api/v1/crypto/rpc/networks"
const servers = [
  ["node:http (baseline)", "servers/raw-networks.ts"],
  ["Effect HttpRouter, route only", "servers/networks-effect.ts"],
  ["tollgate", "servers/tollgate.ts"]
] as const
const rounds = 2
interface Run extends LoadResult {
  readonly cpuUs: number
}
const runs = new Map<string, Array<Run>>()
for (let round = 0; round < rounds; round++) {
  for (const [name, script] of servers) {
    const server = await startServer(script)
    try {
      await load({ url: server.url + path, duration: 2 })
      const cpuBefore = cpuSeconds(server.pid)
      const result = await load({ url: server.url + path, duration: 6 })
      requireAnswered(name, result)
      const cpuUs = (cpuSeconds(server.pid) - cpuBefore) * 1e6 / Math.max(1, result.ok)
      runs.set(name, [...(runs.get(name) ?? []), { ...result, cpuUs }])
    } finally {
      await server.stop()
    }
  }
}
const mean = (results: ReadonlyArray<Run>, pick: (result: Run) => number) =>
  results.reduce((sum, result) => sum + pick(result), 0) / results.length
const rows = servers.map(([name]) => {
  const results = runs.get(name) ?? []
  return {
    name,
    requestsPerSecond: mean(results, (result) => result.requestsPerSecond),
    runs: results.map((result) => Math.round(result.requestsPerSecond)).join(" / "),
    cpuUs: mean(results, (result) => result.cpuUs),
    p50Ms: mean(results, (result) => result.p50Ms),
    p99Ms: mean(results, (result) => result.p99Ms),
    non2xx: results.reduce((sum, result) => sum + result.non2xx, 0)
  }
})
const baseline = rows[0]!
const tollgate = rows[rows.length - 1]!
table(rows.map((row) => ({
  server: row.name,
  "req/s (mean)": Math.round(row.requestsPerSecond),
  "req/s per run": row.runs,
  "p50 ms": row.p50Ms,
  "p99 ms": row.p99Ms,
  "non-2xx": row.non2xx,
  "req/s vs node:http": (row.requestsPerSecond / baseline.requestsPerSecond).toFixed(2),
  "CPU us/req": row.cpuUs.toFixed(1),
  "CPU vs node:http": `${(row.cpuUs / baseline.cpuUs).toFixed(2)}x`
})))
const ratio = tollgate.cpuUs / baseline.cpuUs
console.log(`\ntollgate CPU per request / node:http's = ${ratio.toFixed(2)}x (target <= 2x: ${ratio <= 2 ? "met" : "NOT met"})`)
