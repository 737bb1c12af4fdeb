/**
 * Proxied `eth_blockNumber`: anvil directly, a minimal node:http pass-through proxy, Effect's router
 * doing the same proxying with none of tollgate's pipeline (`servers/rpc-effect.ts`), and tollgate's
 * RPC route with auth, rate limits and billing on (memory layers, then Redis), same run, same
 * anvil. Throughput at 50 connections; added latency at 1 connection (p50 over anvil directly,
 * timed per request with a sub-millisecond clock, since autocannon reports whole milliseconds).
 * Targets: tollgate >= 0.7x the pass-through (memory), >= 0.5x (Redis); added p50 < 1 ms.
 *
 * A target that fails more than 1 % of its requests (a non-2xx status or no answer) stops the run
 * with its statuses and exit status 1: its numbers would measure its errors.
 *
 * Options: --duration 6 (seconds of the measured load at 50 connections, after a 2 s warm-up).
 */
import { Anvil, RedisServer } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Http from "node:http"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { dir, freePort, load, type LoadResult, requireAnswered, startServer, table, untilListening } from "./Harness.ts"

const duration = Number(parseArgs({ options: { duration: { type: "string", default: "6" } } }).values.duration)
if (!(duration > 0)) throw new Error("usage: node bench/rpc.ts [--duration <seconds>]")

const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })

const startTollgate = async (env: Record<string, string>) => {
  const port = await freePort()
  const child = ChildProcess.spawn(process.execPath, [Path.join(dir, "servers/rpc-tollgate.ts"), String(port)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const key = /key (\S+)\n/.exec(await untilListening(child, "rpc-tollgate"))?.[1] ?? ""
  return {
    url: `http://127.0.0.1:${port}/api/v1/crypto/rpc/ethereum-mainnet`,
    headers: { authorization: `Bearer ${key}` },
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGKILL")
      await exited
    }
  }
}

interface Latency {
  readonly ok: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly non2xx: number
  readonly statuses: Readonly<Record<string, number>>
}

// One connection, one request at a time: each request timed on its own.
const sequential = async (url: string, headers: Record<string, string>, count = 2_000): Promise<Latency> => {
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
  const samples: Array<number> = []
  let non2xx = 0
  const statuses: Record<string, number> = {}
  for (let i = 0; i < count; i++) {
    const started = performance.now()
    const status = await new Promise<number>((resolve, reject) => {
      const request = Http.request(url, { method: "POST", agent, headers }, (response) => {
        response.resume()
        response.once("end", () => resolve(response.statusCode ?? 0))
      })
      request.once("error", reject)
      request.end(body)
    })
    samples.push(performance.now() - started)
    if (status < 200 || status > 299) non2xx++
    statuses[status] = (statuses[status] ?? 0) + 1
  }
  agent.destroy()
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? 0
  return { ok: count - non2xx, p50Ms: at(0.5), p99Ms: at(0.99), non2xx, statuses }
}

const measure = async (name: string, url: string, headers: Record<string, string> = {}) => {
  const all = { "content-type": "application/json", ...headers }
  const options = { url, method: "POST" as const, body, headers: all }
  await load({ ...options, duration: 2 })
  const throughput = await load({ ...options, duration })
  requireAnswered(`${name} (50 connections)`, throughput)
  const latency = await sequential(url, all)
  requireAnswered(`${name} (1 connection)`, { ...latency, errors: 0 })
  return { name, throughput, latency }
}

const anvil = await Anvil.start({ chainId: 1 })
const redis = await RedisServer.start()
const rows: Array<{ readonly name: string; readonly throughput: LoadResult; readonly latency: Latency }> = []
try {
  rows.push(await measure("anvil directly", anvil.url))
  const passThrough = await startServer("servers/rpc-passthrough.ts", { RPC_UPSTREAM: anvil.url })
  try {
    rows.push(await measure("node:http pass-through (baseline)", passThrough.url))
  } finally {
    await passThrough.stop()
  }
  const effectOnly = await startServer("servers/rpc-effect.ts", { RPC_UPSTREAM: anvil.url })
  try {
    rows.push(await measure("Effect HttpRouter, proxy route only", `${effectOnly.url}/api/v1/crypto/rpc/ethereum-mainnet`))
  } finally {
    await effectOnly.stop()
  }
  for (
    const [name, env] of [
      ["tollgate, memory", { STORE: "memory" }],
      ["tollgate, memory, request logs off", { STORE: "memory", LOG_LEVEL: "none" }],
      ["tollgate, Redis", { STORE: "redis", REDIS_URL: redis.url }]
    ] as const
  ) {
    const tollgate = await startTollgate({ RPC_UPSTREAM: anvil.url, ...env })
    try {
      rows.push(await measure(name, tollgate.url, tollgate.headers))
    } finally {
      await tollgate.stop()
    }
  }
} finally {
  await anvil.stop()
  await redis.stop()
}

const direct = rows[0]!
const baseline = rows[1]!
table(rows.map((row) => ({
  target: row.name,
  "req/s (50 conn)": Math.round(row.throughput.requestsPerSecond),
  "x pass-through": (row.throughput.requestsPerSecond / baseline.throughput.requestsPerSecond).toFixed(2),
  "p50 ms (1 conn)": row.latency.p50Ms.toFixed(3),
  "p99 ms (1 conn)": row.latency.p99Ms.toFixed(3),
  "added p50 ms": (row.latency.p50Ms - direct.latency.p50Ms).toFixed(3),
  "non-2xx": row.throughput.non2xx + row.latency.non2xx,
  errors: row.throughput.errors
})))
