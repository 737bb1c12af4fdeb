/**
 * The RPC cache, same run, same anvil: the CPU of a paid cache hit against the CPU of the
 * node:http pass-through proxying the same call (target: a hit at most 1.5x, since it makes no
 * upstream call), and the throughput of cached reads against uncached ones through tollgate.
 *
 * - cached: `eth_getBlockByNumber` of a block below anvil's finalized one, answered from the
 *   cache after the first call (memory, then Redis);
 * - uncached, merged: `eth_getBlockByNumber("latest")`, which the cache never keeps (`headTtlMs`
 *   0). The load sends one body over 50 connections, so identical reads in flight are merged (one
 *   upstream call answers many): the number is what a crowd asking for the head gets;
 * - uncached, each forwarded: `eth_getBlockByNumber` of the blocks above the finalized one, in
 *   turn, so no two reads in flight are identical and every call goes upstream: what a miss costs;
 * - pass-through: the cached call's body through `servers/rpc-passthrough.ts` to anvil.
 *
 * CPU is the server process's utime + stime over the measured load, per answered request.
 *
 * Options: --duration 6 (seconds of each measured load at 50 connections, after a 2 s warm-up),
 * --profile <dir> (the memory tollgate runs under `node --cpu-prof` and takes only cached reads;
 * its profile is written there and its heaviest functions printed).
 */
import { Anvil, RedisServer } from "@tollgate/testkit"
import type autocannon from "autocannon"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { cpuSeconds, dir, freePort, load, type LoadResult, requireAnswered, startServer, table, untilListening } from "./Harness.ts"

const args = parseArgs({ options: { duration: { type: "string", default: "6" }, profile: { type: "string", default: "" } } }).values
const duration = Number(args.duration)
const profile = args.profile
if (!(duration > 0)) throw new Error("usage: node bench/rpc-cache.ts [--duration <seconds>] [--profile <dir>]")

const rpc = async (url: string, method: string, params: ReadonlyArray<unknown>) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  return (await response.json() as { result: unknown }).result
}

const startTollgate = async (env: Record<string, string>, flags: ReadonlyArray<string> = []) => {
  const port = await freePort()
  const child = ChildProcess.spawn(process.execPath, [...flags, Path.join(dir, "servers/rpc-tollgate.ts"), String(port)], {
    env: { ...process.env, LOG_LEVEL: "none", ...env },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const key = /key (\S+)\n/.exec(await untilListening(child, "rpc-tollgate"))?.[1] ?? ""
  return {
    url: `http://127.0.0.1:${port}/api/v1/crypto/rpc/ethereum-mainnet`,
    pid: child.pid!,
    headers: { authorization: `Bearer ${key}` },
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      // SIGTERM lets a profiled server exit and write its profile.
      child.kill("SIGTERM")
      await exited
    }
  }
}

interface Row {
  readonly name: string
  readonly throughput: LoadResult
  readonly cpuUsPerCall: number
}

/** The load of one target: one body for every request, or a list of bodies sent in turn. */
const loadOf = (url: string, body: string | ReadonlyArray<string>, headers: Record<string, string>) => {
  const bodies = typeof body === "string" ? [body] : body
  let next = 0
  return {
    url,
    method: "POST" as const,
    headers: { "content-type": "application/json", ...headers },
    requests: [{ setupRequest: (request: autocannon.Request) => ({ ...request, body: bodies[next++ % bodies.length]! }) }]
  }
}

const measure = async (
  name: string,
  pid: number,
  url: string,
  body: string | ReadonlyArray<string>,
  headers: Record<string, string> = {}
): Promise<Row> => {
  const options = loadOf(url, body, headers)
  await load({ ...options, duration: 2 })
  const before = cpuSeconds(pid)
  const throughput = await load({ ...options, duration })
  const cpu = cpuSeconds(pid) - before
  requireAnswered(name, throughput)
  return { name, throughput, cpuUsPerCall: (cpu / Math.max(1, throughput.ok)) * 1e6 }
}

const anvil = await Anvil.start({ chainId: 1 })
const redis = await RedisServer.start()
const rows: Array<Row> = []
try {
  await rpc(anvil.url, "anvil_mine", ["0xc8"])
  const finalized = await rpc(anvil.url, "eth_getBlockByNumber", ["finalized", false]) as { number: string }
  const block = `0x${(Number.parseInt(finalized.number, 16) - 1).toString(16)}`
  const cached = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: [block, false] })
  const uncached = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["latest", false] })
  const head = Number.parseInt(await rpc(anvil.url, "eth_blockNumber", []) as string, 16)
  const unfinalized = Array.from(
    { length: head - Number.parseInt(finalized.number, 16) },
    (_, i) => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: [`0x${(head - i).toString(16)}`, false] })
  )
  const passThrough = await startServer("servers/rpc-passthrough.ts", { RPC_UPSTREAM: anvil.url })
  try {
    rows.push(await measure("node:http pass-through (baseline)", passThrough.pid, passThrough.url, cached))
  } finally {
    await passThrough.stop()
  }
  for (const [store, env] of [["memory", { STORE: "memory" }], ["Redis", { STORE: "redis", REDIS_URL: redis.url }]] as const) {
    const tollgate = await startTollgate({ RPC_UPSTREAM: anvil.url, ...env })
    try {
      // Every path warmed before any is measured: the row measured first on a fresh process
      // otherwise pays for compiling the code all rows share (on a loaded machine, twice its CPU).
      for (const body of [cached, uncached, unfinalized]) await load({ ...loadOf(tollgate.url, body, tollgate.headers), duration: 3 })
      rows.push(await measure(`tollgate, ${store}, cached`, tollgate.pid, tollgate.url, cached, tollgate.headers))
      rows.push(await measure(`tollgate, ${store}, uncached, merged`, tollgate.pid, tollgate.url, uncached, tollgate.headers))
      rows.push(await measure(`tollgate, ${store}, uncached, each forwarded`, tollgate.pid, tollgate.url, unfinalized, tollgate.headers))
    } finally {
      await tollgate.stop()
    }
  }
  if (profile !== "") {
    const tollgate = await startTollgate({ RPC_UPSTREAM: anvil.url, STORE: "memory" }, ["--cpu-prof", `--cpu-prof-dir=${profile}`])
    try {
      rows.push(await measure("tollgate, memory, cached (profiled)", tollgate.pid, tollgate.url, cached, tollgate.headers))
    } finally {
      await tollgate.stop()
    }
  }
} finally {
  await anvil.stop()
  await redis.stop()
}

const baseline = rows[0]!
table(rows.map((row) => ({
  target: row.name,
  "req/s (50 conn)": Math.round(row.throughput.requestsPerSecond),
  "CPU us/call": row.cpuUsPerCall.toFixed(0),
  "CPU x pass-through": (row.cpuUsPerCall / baseline.cpuUsPerCall).toFixed(2),
  "non-2xx": row.throughput.non2xx,
  errors: row.throughput.errors
})))
for (const store of ["memory", "Redis"]) {
  const hit = rows.find((row) => row.name === `tollgate, ${store}, cached`)!
  const miss = rows.find((row) => row.name === `tollgate, ${store}, uncached, each forwarded`)!
  console.log(
    `${store}: cached ${Math.round(hit.throughput.requestsPerSecond)} req/s vs uncached (each forwarded) ${
      Math.round(miss.throughput.requestsPerSecond)
    } req/s ` +
      `(${(hit.throughput.requestsPerSecond / miss.throughput.requestsPerSecond).toFixed(2)}x); a hit's CPU ${
        (hit.cpuUsPerCall / miss.cpuUsPerCall).toFixed(2)
      }x a miss's`
  )
}

if (profile !== "") {
  const file = Fs.readdirSync(profile).filter((name) => name.endsWith(".cpuprofile")).map((name) => Path.join(profile, name))
    .sort((a, b) => Fs.statSync(b).mtimeMs - Fs.statSync(a).mtimeMs)[0]
  if (file !== undefined) {
    const { heaviest } = await import("./Profile.ts")
    console.log(`\nThe profiled tollgate's heaviest functions by self time, cached reads only (${file})\n`)
    table(heaviest(file, 25))
  }
}
