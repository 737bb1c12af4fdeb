/**
 * GET /api/v1/crypto/rpc/networks through tollgate (all global middleware on) against a bare
 * node:http server returning the same bytes, same run. Target: tollgate >= 0.8x.
 */
import { load, startServer, table } from "./Harness.ts"

const path = "/api/v1/crypto/rpc/networks"
const rows = []
for (const [name, script] of [["node:http (baseline)", "servers/raw-networks.ts"], ["tollgate", "servers/tollgate.ts"]] as const) {
  const server = await startServer(script)
  try {
    await load({ url: server.url + path, duration: 2 })
    const result = await load({ url: server.url + path })
    rows.push({ name, ...result })
  } finally {
    await server.stop()
  }
}
const [baseline, tollgate] = rows
table(rows.map((row) => ({
  server: row.name,
  "req/s": Math.round(row.requestsPerSecond),
  "p50 ms": row.p50Ms,
  "p99 ms": row.p99Ms,
  "non-2xx": row.non2xx,
  ratio: baseline === undefined ? "-" : (row.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)
})))
if (baseline !== undefined && tollgate !== undefined) {
  console.log(`\ntollgate / node:http = ${(tollgate.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)}x (target >= 0.80x)`)
}
