/**
 * The RPC cache, same run, same anvil: the CPU of a paid cache hit against the CPU of the
 * node:http pass-through proxying the same call (target: a hit at most 1.5x, since it makes no
 * upstream call), and the throughput of cached reads against uncached ones through tollgate.
 *
 * tollgate is the reference server started the `pnpm start` way (`packages/server/src/main.ts`,
 * dev mode, one worker; memory stores, then Redis stores; request log, metrics and abuse guard as
 * shipped, the log drained as a log pipe would take it), as `bench/peers.ts` starts it, with the
 * demo account's RPC limits out of reach and the upstream set to anvil:
 *
 * - cached: `eth_getBlockByNumber` of a block below anvil's finalized one, answered from the
 *   cache after the first call;
 * - uncached, merged: `eth_getBlockByNumber("latest")`, which the cache never keeps (`headTtlMs`
 *   0). The load sends one body over 50 connections, so identical reads in flight are merged (one
 *   upstream call answers many): the number is what a crowd asking for the head gets;
 * - uncached, each forwarded: `eth_getBlockByNumber` of the blocks above the finalized one, in
 *   turn, so no two reads in flight are identical and every call goes upstream: what a miss costs;
 * - pass-through: the cached call's body through `servers/rpc-passthrough.ts` to anvil.
 *
 * Every load sends a fixed number of requests (the target's warm-up rate times the duration) and
 * waits for every answer, the same for every target: a load generator that abandons requests at
 * the end of a timed run would have the abuse guard count them. CPU is the server process's utime
 * + stime over the measured load, per answered request; req/s is the 50 connections over the
 * load's mean latency.
 *
 * Every target of a store (the pass-through, then each checkout's three rows) is warmed with 5,000
 * requests, then measured round after round, so a change in a shared machine's load falls on all
 * of them, each round after half a second of unmeasured load; each row is the median of its rounds,
 * and its rounds are printed beside it.
 *
 * Options: --duration 3 (seconds of each round's load at 50 connections), --rounds 3,
 * --baseline name=<checkout>, repeatable (another checkout's server, e.g. a git worktree of an
 * older commit, in the same rounds), --profile <dir> (this checkout's server on memory runs under
 * `node --cpu-prof` and takes only cached reads; its profile is written there and its heaviest
 * functions printed).
 */
import { Anvil, RedisServer } from "@tollgate/testkit"
import type autocannon from "autocannon"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import {
  cpuSeconds,
  dir,
  freePort,
  load,
  type LoadResult,
  requireAnswered,
  rpcReferenceFiles,
  startServer,
  table,
  untilDemoKey
} from "./Harness.ts"

const args = parseArgs({
  options: {
    duration: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    profile: { type: "string", default: "" },
    baseline: { type: "string", multiple: true, default: [] }
  }
}).values
const duration = Number(args.duration)
const rounds = Number(args.rounds)
const profile = args.profile
const baselines = args.baseline.map((each) => [each.slice(0, each.indexOf("=")), each.slice(each.indexOf("=") + 1)] as const)
if (!(duration > 0) || !(rounds >= 1) || baselines.some(([name, checkout]) => name === "" || checkout === "")) {
  throw new Error("usage: node bench/rpc-cache.ts [--duration <seconds>] [--rounds <n>] [--baseline name=<checkout>]... [--profile <dir>]")
}
const CONNECTIONS = 50
const checkouts: ReadonlyArray<readonly [string, string]> = [["tollgate", Path.resolve(dir, "..")], ...baselines]
const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-rpc-cache-"))

const rpc = async (url: string, method: string, params: ReadonlyArray<unknown>) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  return (await response.json() as { result: unknown }).result
}

/** The reference server of `checkout` in dev mode, once it answers and has written its demo keys. */
const startTollgate = async (
  name: string,
  checkout: string,
  upstream: string,
  redis: string | undefined,
  flags: ReadonlyArray<string> = []
) => {
  const port = await freePort()
  const { config, credentials } = rpcReferenceFiles(work, name, upstream)
  const child = ChildProcess.spawn(process.execPath, [...flags, Path.join(checkout, "packages/server/src/main.ts")], {
    cwd: checkout,
    env: {
      ...process.env,
      PORT: String(port),
      TOLLGATE_WORKERS: "1",
      TOLLGATE_CONFIG: config,
      TOLLGATE_DEV_CREDENTIALS_FILE: credentials,
      ...(redis === undefined ? {} : { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis })
    },
    stdio: ["ignore", "pipe", "inherit"]
  })
  // The request log, drained unread: the load generator's core must not decode it.
  child.stdout.resume()
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once("exit", resolve))
    // SIGTERM lets a profiled server exit and write its profile.
    child.kill("SIGTERM")
    await exited
  }
  const base = `http://127.0.0.1:${port}/api/v1`
  const key = await untilDemoKey(child, base, credentials)
  if (key === undefined) {
    await stop()
    throw new Error(`${name} did not start (exit code ${child.exitCode})`)
  }
  return { url: `${base}/crypto/rpc/ethereum-mainnet`, pid: child.pid!, headers: { authorization: `Bearer ${key}` }, stop }
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

/** `amount` requests over `CONNECTIONS`, each answered before it resolves. */
const timed = (options: autocannon.Options, amount: number) =>
  load({ ...options, connections: CONNECTIONS, amount: Math.max(CONNECTIONS, Math.round(amount)) })

/**
 * Requests per second of a load: its connections over its mean latency (each connection sends its
 * next request when the last is answered). autocannon notices the end of a fixed-amount load only
 * on its next one-second tick, so the load's wall time would count up to a second of nothing.
 */
const rateOf = (result: LoadResult) => CONNECTIONS * 1000 / result.meanMs

/** One measured target: its server's pid, its load, and a sample per round. */
interface Target {
  readonly name: string
  readonly pid: number
  readonly options: autocannon.Options
  rate: number
  readonly samples: Array<{ readonly requestsPerSecond: number; readonly cpuUsPerCall: number }>
}

const target = (
  name: string,
  pid: number,
  url: string,
  body: string | ReadonlyArray<string>,
  headers: Record<string, string> = {}
): Target => ({
  name,
  pid,
  options: loadOf(url, body, headers),
  rate: 0,
  samples: []
})

/** Warms the target's path and takes its rate, which sets the number of requests of its rounds. */
const warm = async (each: Target) => {
  each.rate = rateOf(await timed(each.options, 5_000))
}

/** One round of the target: its rate times the duration in requests, and its server's CPU over them. */
const round = async (each: Target) => {
  // Half a second of its load first, unmeasured: a server that sat idle while the other targets
  // were measured may have had its young generation shrunk by V8's memory reducer
  // (docs/operations.md), and would be measured growing it back.
  await timed(each.options, each.rate / 2)
  const before = cpuSeconds(each.pid)
  const result = await timed(each.options, each.rate * duration)
  const cpu = cpuSeconds(each.pid) - before
  requireAnswered(each.name, result)
  each.samples.push({ requestsPerSecond: rateOf(result), cpuUsPerCall: (cpu / Math.max(1, result.ok)) * 1e6 })
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const anvil = await Anvil.start({ chainId: 1 })
const redis = await RedisServer.start()
const measured: Array<{ readonly store: string; readonly targets: ReadonlyArray<Target> }> = []
let profiled: Target | undefined
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
    for (const store of ["memory", "Redis"] as const) {
      const servers: Array<Awaited<ReturnType<typeof startTollgate>>> = []
      try {
        const targets = [target("node:http pass-through (baseline)", passThrough.pid, passThrough.url, cached)]
        for (const [checkout, root] of checkouts) {
          const name = `${checkout}, ${store}`
          const server = await startTollgate(name, root, anvil.url, store === "Redis" ? redis.url : undefined)
          servers.push(server)
          targets.push(
            target(`${name}, cached`, server.pid, server.url, cached, server.headers),
            target(`${name}, uncached, merged`, server.pid, server.url, uncached, server.headers),
            target(`${name}, uncached, each forwarded`, server.pid, server.url, unfinalized, server.headers)
          )
        }
        // Every path warmed before any is measured: the row measured first on a fresh process
        // otherwise pays for compiling the code all rows share (on a loaded machine, twice its CPU).
        for (const each of targets) await warm(each)
        // Round after round over every target, so a change in the machine's load falls on all of them.
        for (let i = 0; i < rounds; i++) for (const each of targets) await round(each)
        measured.push({ store, targets })
      } finally {
        await Promise.all(servers.map((server) => server.stop()))
      }
    }
  } finally {
    await passThrough.stop()
  }
  if (profile !== "") {
    const server = await startTollgate("profiled", checkouts[0]![1], anvil.url, undefined, ["--cpu-prof", `--cpu-prof-dir=${profile}`])
    try {
      profiled = target("tollgate, memory, cached (profiled)", server.pid, server.url, cached, server.headers)
      await warm(profiled)
      await round(profiled)
    } finally {
      await server.stop()
    }
  }
} finally {
  await anvil.stop()
  await redis.stop()
  Fs.rmSync(work, { recursive: true, force: true })
}

for (const { store, targets } of measured) {
  console.log(`\n${store} stores, median of ${rounds} rounds:\n`)
  const baseline = median(targets[0]!.samples.map((sample) => sample.cpuUsPerCall))
  table(targets.map((each) => {
    const cpu = median(each.samples.map((sample) => sample.cpuUsPerCall))
    return {
      target: each.name,
      "req/s (50 conn)": Math.round(median(each.samples.map((sample) => sample.requestsPerSecond))),
      "CPU us/call": cpu.toFixed(0),
      "CPU x pass-through": (cpu / baseline).toFixed(2),
      "CPU us/call, each round": each.samples.map((sample) => sample.cpuUsPerCall.toFixed(0)).join(" ")
    }
  }))
  for (const [checkout] of checkouts) {
    const of = (name: string) => targets.find((each) => each.name === `${checkout}, ${store}, ${name}`)!
    const rps = (each: Target) => median(each.samples.map((sample) => sample.requestsPerSecond))
    const cpu = (each: Target) => median(each.samples.map((sample) => sample.cpuUsPerCall))
    const hit = of("cached")
    const miss = of("uncached, each forwarded")
    console.log(
      `${checkout}, ${store}: cached ${Math.round(rps(hit))} req/s vs uncached (each forwarded) ${Math.round(rps(miss))} req/s ` +
        `(${(rps(hit) / rps(miss)).toFixed(2)}x); a hit's CPU ${(cpu(hit) / cpu(miss)).toFixed(2)}x a miss's`
    )
  }
}

if (profiled !== undefined) {
  console.log(`\n${profiled.name}: ${profiled.samples[0]!.cpuUsPerCall.toFixed(0)} us/call`)
  const file = Fs.readdirSync(profile).filter((name) => name.endsWith(".cpuprofile")).map((name) => Path.join(profile, name))
    .sort((a, b) => Fs.statSync(b).mtimeMs - Fs.statSync(a).mtimeMs)[0]
  if (file !== undefined) {
    const { heaviest } = await import("./Profile.ts")
    console.log(`\nThe profiled tollgate's heaviest functions by self time, cached reads only (${file})\n`)
    table(heaviest(file, 25))
  }
}
