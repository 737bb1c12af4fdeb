/**
 * GET /api/v1/crypto/rpc/networks through tollgate (all global middleware on) against a bare
 * node:http server returning the same bytes, same run. Target: tollgate >= 0.8x. A third server,
 * Effect's router serving the same route with none of tollgate's middleware, splits the distance
 * into Effect's share and tollgate's. The three run in turn, twice, and each row is the mean of
 * its two runs, so a slow spell of the machine does not land on one server only.
 */
import { load, type LoadResult, startServer, table } from "./Harness.ts"

const path = "/api/v1/crypto/rpc/networks"
const servers = [
  ["node:http (baseline)", "servers/raw-networks.ts"],
  ["Effect HttpRouter, route only", "servers/networks-effect.ts"],
  ["tollgate", "servers/tollgate.ts"]
] as const
const rounds = 2
const runs = new Map<string, Array<LoadResult>>()
for (let round = 0; round < rounds; round++) {
  for (const [name, script] of servers) {
    const server = await startServer(script)
    try {
      await load({ url: server.url + path, duration: 2 })
      const result = await load({ url: server.url + path, duration: 6 })
      runs.set(name, [...(runs.get(name) ?? []), result])
    } finally {
      await server.stop()
    }
  }
}
const mean = (results: ReadonlyArray<LoadResult>, pick: (result: LoadResult) => number) =>
  results.reduce((sum, result) => sum + pick(result), 0) / results.length
const rows = servers.map(([name]) => {
  const results = runs.get(name) ?? []
  return {
    name,
    requestsPerSecond: mean(results, (result) => result.requestsPerSecond),
    runs: results.map((result) => Math.round(result.requestsPerSecond)).join(" / "),
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
  ratio: (row.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)
})))
console.log(`\ntollgate / node:http = ${(tollgate.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)}x (target >= 0.80x)`)
