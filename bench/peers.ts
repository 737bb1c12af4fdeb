/**
 * `pnpm bench peers`: tollgate's cost per paid call against what a user would run instead, side by
 * side in one run on one machine. `POST /api/v1/crypto/rpc/ethereum-mainnet` (`eth_blockNumber`)
 * through the reference server started the `pnpm start` way (dev mode, memory stores and then Redis
 * stores, request log, metrics and abuse guard as shipped) to a fake JSON-RPC upstream, against:
 *
 * - the raw proxy (`peers/raw-proxy.ts`): node:http + undici, the floor of any proxy (1.00x);
 * - the peer gateway (`peers/peer-gateway.ts`): Express 5 + jose EdDSA verify +
 *   rate-limiter-flexible on Redis + a Redis credit counter.
 *
 * Columns: req/s (2xx per second, median of the rounds), p50/p99 of the 2xx answers, and the CPU
 * per request of each server process (utime + stime from /proc over the 2xx answers), with its
 * ratio to the raw proxy's; the Redis server's own CPU per request, the GC pauses as a share of the
 * server's CPU and the young-generation collections per 1,000 requests (perf_hooks `gc` entries,
 * `peers/gc-probe.ts`; the pauses are wall time and grow on a busy machine, the count does not). Then
 * `GET /api/v1/crypto/rpc/networks` against a bare node:http server returning the same bytes, and
 * the latency each target adds at one connection (its p50 over the upstream's alone), with its
 * young-generation collections per 1,000 calls there. A server's three measurements run back to
 * back in each round (see `rounds`: a server measured after sitting idle measures V8's memory
 * reducer, not the server).
 *
 * Each run sends a fixed number of requests (the target's rate times the duration), so no request
 * is in flight when a run ends: a load generator that abandons requests would have the abuse guard
 * count them. Every process started here is stopped by its pid when the run ends.
 *
 * With `--workers 1,2` (the default; `--workers ""` leaves them out), tollgate also runs as an operator deploys it (production mode: a signing
 * key, an account provisioned with `tollgate-cli`, Redis stores) with each listed
 * `TOLLGATE_WORKERS`, all on one Redis; the CPU of such a target is that of the supervisor and
 * all its workers.
 *
 * Options: --rounds 2 --duration 8 --warmup 3 --connections 50 --json <file> --workers <n,n,...>
 * --baseline name=<checkout>, repeatable (another tollgate checkout, e.g. a git worktree of an older
 * commit, run as two more targets in the same rounds: before and after in one run).
 * --pin: every measured server (and each process it forks) on the last CPU, the harness, the
 * upstream and Redis on the others, so a server's CPU per request is not mixed with the load
 * generator's on the same core (Linux, `taskset`).
 */
import { ShippedServer } from "@tollgate/testkit"
import autocannon from "autocannon"
import * as Jose from "jose"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { cpuSeconds, dir, freePort, processTree, rpcReferenceFiles, untilDemoKey } from "./Harness.ts"

const options = { rounds: 2, duration: 8, warmup: 3, connections: 50, json: "", workers: "1,2", pin: false }
const baselines: Array<readonly [string, string]> = []
{
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!.replace(/^--/, "")
    const value = argv[++i]
    if (flag === "baseline" && value !== undefined && value.includes("=")) {
      baselines.push([value.slice(0, value.indexOf("=")), value.slice(value.indexOf("=") + 1)])
      continue
    }
    if (flag === "pin") {
      options.pin = true
      i--
      continue
    }
    if (!(flag in options) || value === undefined) {
      console.error(
        `usage: node bench/peers.ts [--rounds n] [--duration s] [--warmup s] [--connections n] [--json file] [--workers 1,2] [--pin] [--baseline name=dir]...`
      )
      process.exit(2)
    }
    ;(options as unknown as Record<string, string | number>)[flag] = typeof options[flag as keyof typeof options] === "number"
      ? Number(value)
      : value
  }
}

const root = Path.resolve(dir, "..")
const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-peers-"))
const gcProbe = Path.join(dir, "peers", "gc-probe.ts")
const rpcBody = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------- processes ----------

const children: Array<ChildProcess.ChildProcess> = []
/** The production-mode servers, stopped with their workers before the run's directory goes. */
const shipped: Array<ShippedServer.ShippedServer> = []
const stopAll = () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}
process.on("exit", stopAll)
/** Every process this run started, ended, so none writes into the run's directory as it is removed. */
const stopAllAndWait = async () => {
  // SIGTERM: the supervisor stops its workers and waits for them before it exits.
  await Promise.all(shipped.map((server) => server.stop()))
  const exits = children
    .filter((child) => child.exitCode === null && child.signalCode === null)
    .map((child) => new Promise((resolve) => child.once("exit", resolve)))
  stopAll()
  await Promise.all(exits)
}
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
// The whole run is bounded: a hung server cannot keep it going.
setTimeout(() => {
  console.error("peers: over the time budget, stopping")
  process.exit(1)
}, 20 * 60_000).unref()

interface Server {
  readonly pid: number
  readonly gcFile: string | undefined
}

const untilOutput = (child: ChildProcess.ChildProcess, pattern: RegExp, name: string): Promise<RegExpExecArray> =>
  new Promise((resolve, reject) => {
    let output = ""
    const timer = setTimeout(() => reject(new Error(`${name} did not start: ${output}`)), 30_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const found = pattern.exec(output)
      if (found === null) return
      clearTimeout(timer)
      child.stdout?.off("data", onData)
      resolve(found)
    }
    child.stdout?.on("data", onData)
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}: ${output}`)))
  })

const spawnNode = (name: string, args: ReadonlyArray<string>, env: Record<string, string> = {}, cwd = root) => {
  const gcFile = Path.join(work, `${name}.gc`)
  const child = ChildProcess.spawn(process.execPath, ["--import", gcProbe, ...args], {
    cwd,
    env: { ...process.env, BENCH_CHILD: "1", GC_PROBE_FILE: gcFile, ...env },
    stdio: ["pipe", "pipe", "inherit"]
  })
  children.push(child)
  return { child, server: { pid: child.pid!, gcFile } satisfies Server }
}

/** A peer server (`bench/peers/*.ts`) on a free port, once it prints its URL. */
const startPeer = async (name: string, script: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const port = await freePort()
  const { child, server } = spawnNode(name, [Path.join(dir, script), String(port), ...args], env)
  const found = await untilOutput(child, /listening(?: (http:\/\/\S+))?/, name)
  child.stdout?.resume()
  return { ...server, url: found[1] ?? `http://127.0.0.1:${port}` }
}

const startRedis = async (): Promise<Server & { readonly url: string }> => {
  const port = await freePort()
  const child = ChildProcess.spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  children.push(child)
  await untilOutput(child, /Ready to accept connections/, "redis-server")
  child.stdout?.resume()
  return { pid: child.pid!, gcFile: undefined, url: `redis://127.0.0.1:${port}` }
}

/**
 * tollgate's reference server as `pnpm start` runs it (`packages/server/src/main.ts` of `checkout`,
 * dev mode), one worker, pointed at the upstream, with the demo account's RPC limits out of reach.
 * Its request log goes to /dev/null, as a shipped server's goes to its log pipe.
 */
const startTollgate = async (name: string, checkout: string, upstream: string, redis?: string) => {
  const port = await freePort()
  const { config, credentials } = rpcReferenceFiles(work, name, upstream)
  const { child, server } = spawnNode(name, [Path.join(checkout, "packages/server/src/main.ts")], {
    PORT: String(port),
    TOLLGATE_WORKERS: "1",
    TOLLGATE_CONFIG: config,
    TOLLGATE_DEV_CREDENTIALS_FILE: credentials,
    ...(redis === undefined ? {} : { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis })
  }, checkout)
  child.stdout?.resume()
  const base = `http://127.0.0.1:${port}/api/v1`
  const key = await untilDemoKey(child, base, credentials)
  if (key === undefined) throw new Error(`${name} did not start (exit code ${child.exitCode})`)
  return { ...server, base, key }
}

/**
 * tollgate as an operator deploys it: production mode (a signing key), Redis stores, the account
 * provisioned with the shipped `tollgate-cli`, and `workers` server processes.
 */
const startProduction = async (name: string, upstream: string, redis: string, workers: number) => {
  const gcFile = Path.join(work, `${name}.gc`)
  const accountId = "acct_bench"
  const server = await ShippedServer.start({
    store: "redis",
    redisUrl: redis,
    signingKey: true,
    accountId,
    config: {
      models: [], // an RPC-only deployment
      rpc: { upstreams: { "ethereum-mainnet": [upstream] } },
      rateLimits: { accounts: { [accountId]: { rpc: { requests: 1_000_000_000, credits: 1_000_000_000_000 } } } }
    },
    env: {
      TOLLGATE_WORKERS: String(workers),
      TOLLGATE_LOG_LEVEL: "info",
      NODE_OPTIONS: `--import ${gcProbe}`,
      BENCH_CHILD: "1",
      GC_PROBE_FILE: gcFile
    }
  })
  shipped.push(server)
  await server.cli(["credits", "grant", "--account", accountId, "--usd", "1000000.00", "--reference", "bench"])
  return { pid: server.pid, gcFile, base: server.api, key: server.credentials!.inferenceKey }
}

// ---------- measuring ----------

const serverCpu = Os.cpus().length - 1

/** With `--pin`, a server's processes and all their threads on the last CPU. */
const pin = (pid: number) => {
  if (!options.pin) return
  for (const each of processTree(pid))
    ChildProcess.execFileSync("taskset", ["-a", "-cp", String(serverCpu), String(each)], { stdio: "ignore" })
}

/**
 * The GC totals of every process of a server (the probe writes one file per process), and the
 * size of their young generations now.
 */
const gcTotals = (server: Server): { readonly pauseMs: number; readonly scavenges: number; readonly youngMb: number } => {
  if (server.gcFile === undefined) return { pauseMs: Number.NaN, scavenges: Number.NaN, youngMb: Number.NaN }
  const prefix = `${Path.basename(server.gcFile)}.`
  const files = Fs.readdirSync(Path.dirname(server.gcFile)).filter((file) => file.startsWith(prefix) && file.endsWith(".json"))
  if (files.length === 0) return { pauseMs: Number.NaN, scavenges: Number.NaN, youngMb: Number.NaN }
  return files.reduce((sum, file) => {
    const totals = JSON.parse(Fs.readFileSync(Path.join(Path.dirname(server.gcFile!), file), "utf8")) as {
      pauseMs: number
      scavenges: number
      youngMb: number
    }
    return {
      pauseMs: sum.pauseMs + totals.pauseMs,
      scavenges: sum.scavenges + totals.scavenges,
      youngMb: sum.youngMb + totals.youngMb
    }
  }, { pauseMs: 0, scavenges: 0, youngMb: 0 })
}

const machineTimes = () =>
  Os.cpus().reduce((sum, cpu) => {
    const total = Object.values(cpu.times).reduce((a, b) => a + b, 0)
    return { busy: sum.busy + total - cpu.times.idle, total: sum.total + total }
  }, { busy: 0, total: 0 })

const idleShare = async (ms: number) => {
  const before = machineTimes()
  await sleep(ms)
  const after = machineTimes()
  return 1 - (after.busy - before.busy) / (after.total - before.total)
}

interface Target {
  readonly name: string
  readonly url: string
  readonly method: "GET" | "POST"
  readonly headers: Record<string, string>
  readonly server: Server
  readonly redis?: Server & { readonly url?: string }
  rate?: number | undefined
}

interface Load {
  readonly ok: number
  readonly bad: number
  readonly seconds: number
  readonly p50: number
  readonly p99: number
}

const percentile = (sorted: Float64Array, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!

/** `amount` requests over `connections`, every one answered before it resolves. */
const load = (target: Target, connections: number, amount: number): Promise<Load> =>
  new Promise((resolve, reject) => {
    let latencies = new Float64Array(Math.max(1024, amount))
    let count = 0
    // From the first answer to the last: autocannon notices the end of a fixed-amount run only on
    // its next one-second tick, which would count as idle time.
    let first = Number.NaN
    let last = Number.NaN
    const instance = autocannon({
      url: target.url,
      method: target.method,
      headers: target.method === "POST" ? { "content-type": "application/json", ...target.headers } : target.headers,
      ...(target.method === "POST" ? { body: rpcBody } : {}),
      connections,
      amount: Math.max(connections, Math.round(amount)),
      pipelining: 1,
      timeout: 10
    }, (error, result) => {
      clearTimeout(watchdog)
      if (error !== null && error !== undefined) return reject(error)
      const seconds = Math.max(1e-3, (last - first) / 1000)
      const sorted = latencies.subarray(0, count).sort()
      resolve({
        ok: result["2xx"],
        bad: result.non2xx + result.errors + result.timeouts,
        seconds,
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99)
      })
    })
    instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      last = performance.now()
      if (Number.isNaN(first)) first = last - ms
      if (status < 200 || status > 299) return
      if (count === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2)
        bigger.set(latencies)
        latencies = bigger
      }
      latencies[count++] = ms
    })
    const watchdog = setTimeout(() => instance.stop(), 120_000)
  })

/** Commands the Redis server has processed so far (`INFO stats`). */
const redisCommands = (url: string): number => {
  const { port } = new URL(url)
  const info = ChildProcess.execFileSync("redis-cli", ["-p", port, "info", "stats"]).toString()
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? Number.NaN)
}

interface Run extends Load {
  readonly rps: number
  readonly redisCommandsPerRequest: number
  readonly cpuUs: number
  readonly redisUs: number
  readonly gcShare: number
  readonly scavengesPer1k: number
  /** The server's young generation when the run started, MB. */
  readonly youngMb: number
  readonly machine: number
}

/** One measured run of a target after its warm-up, at `connections`. */
const measure = async (target: Target, connections: number, seconds: number, warmup: number): Promise<Run> => {
  if (target.rate === undefined) {
    const pilot = await load(target, connections, connections * 20)
    target.rate = pilot.ok / pilot.seconds
  }
  if (warmup > 0) {
    const warm = await load(target, connections, target.rate * warmup)
    if (warm.ok > 0) target.rate = warm.ok / warm.seconds
  }
  const cpuBefore = cpuSeconds(target.server.pid)
  const redisBefore = target.redis === undefined ? 0 : cpuSeconds(target.redis.pid)
  const commandsBefore = target.redis?.url === undefined ? Number.NaN : redisCommands(target.redis.url)
  const gcBefore = gcTotals(target.server)
  const machineBefore = machineTimes()
  const result = await load(target, connections, target.rate * seconds)
  await sleep(150) // the GC probe writes its totals every 100 ms
  const cpu = cpuSeconds(target.server.pid) - cpuBefore
  const redis = target.redis === undefined ? Number.NaN : cpuSeconds(target.redis.pid) - redisBefore
  const commands = target.redis?.url === undefined ? Number.NaN : redisCommands(target.redis.url) - commandsBefore
  const gcAfter = gcTotals(target.server)
  const machineAfter = machineTimes()
  target.rate = result.ok / result.seconds
  return {
    ...result,
    rps: result.ok / result.seconds,
    cpuUs: result.ok > 0 ? cpu * 1e6 / result.ok : Number.NaN,
    redisUs: result.ok > 0 ? redis * 1e6 / result.ok : Number.NaN,
    redisCommandsPerRequest: result.ok > 0 ? commands / result.ok : Number.NaN,
    gcShare: cpu > 0 ? (gcAfter.pauseMs - gcBefore.pauseMs) / (cpu * 1000) : Number.NaN,
    scavengesPer1k: result.ok > 0 ? (gcAfter.scavenges - gcBefore.scavenges) * 1000 / result.ok : Number.NaN,
    youngMb: gcBefore.youngMb,
    machine: Os.cpus().length * (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total)
  }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const fixed = (value: number, digits: number) => Number.isFinite(value) ? value.toFixed(digits) : "-"

const printTable = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = head.map((cell, i) => Math.max(cell.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((cell, i) => i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)).join(" | ")} |`
  console.log(line(head))
  console.log(`|${widths.map((width, i) => i === 0 ? `:${"-".repeat(width + 1)}` : `${"-".repeat(width + 1)}:`).join("|")}|`)
  for (const row of rows) console.log(line(row))
}

/** One measured run: a target at a number of connections, after its warm-up. */
interface Step {
  readonly label: string
  readonly target: Target
  readonly connections: number
  readonly seconds: number
  readonly warmup: number
}

/**
 * Rounds over the servers in turn (A B C A B C), so a slow spell of the machine spreads over all.
 * A server's steps (its paid calls at 50 connections, its `networks` route, its paid calls at one
 * connection) run back to back, so no step of a server follows a pause of that server: a V8 process
 * left idle for 8 s or more after its old generation grew runs its memory reducer, which shrinks
 * the young generation to 1 MB, and at one connection it grows back only slowly. A step that
 * followed the other servers' rounds would measure where the garbage collector stood when the
 * server went idle (2026-11-29: 12 to 17 scavenges per 1,000 calls at one connection instead of 1,
 * for whichever server it struck), not the server.
 */
const rounds = async (servers: ReadonlyArray<ReadonlyArray<Step>>) => {
  const runs = new Map<Target, Array<Run>>()
  for (let round = 1; round <= options.rounds; round++) {
    for (const steps of servers) {
      for (const step of steps) {
        const run = await measure(step.target, step.connections, step.seconds, step.warmup)
        runs.set(step.target, [...(runs.get(step.target) ?? []), run])
        console.log(
          `  round ${round} ${step.label.padEnd(9)} ${step.target.name.padEnd(26)} ${fixed(run.rps, 0).padStart(6)} req/s  p50 ${
            fixed(run.p50, 2)
          } ms  ` +
            `cpu ${fixed(run.cpuUs, 0)} us/req  gc ${fixed(run.gcShare * 100, 1)}% (${
              fixed(run.scavengesPer1k, 2)
            } scavenges/1k req, young generation ${fixed(run.youngMb, 0)} MB)  machine ${fixed(run.machine * 100, 0)}% of one core` +
            (run.bad > 0 ? `  !! ${run.bad} non-2xx/errors` : "")
        )
      }
    }
  }
  return runs
}

// ---------- the run ----------

if (options.pin) {
  // The harness (and the upstream and Redis it starts) off the servers' CPU.
  const others = serverCpu === 0 ? "0" : `0-${serverCpu - 1}`
  ChildProcess.execFileSync("taskset", ["-a", "-cp", others, String(process.pid)], { stdio: "ignore" })
}
const idle = await idleShare(1000)
console.log(`node ${process.version}, ${Os.cpus().length} cpus; machine idle before start: ${fixed(idle * 100, 0)}%`)
if (idle < 0.85) console.log("!! something else is using the CPUs: read CPU per request side by side, not req/s")

const upstream = await startPeer("upstream", "peers/upstream.ts", [])
const raw = await startPeer("raw-proxy", "peers/raw-proxy.ts", [upstream.url])
pin(raw.pid)
const peerRedis = await startRedis()
const keys = await Jose.generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true })
const token = await new Jose.SignJWT({}).setProtectedHeader({ alg: "EdDSA" }).setSubject("bench-user").setIssuedAt()
  .setExpirationTime("2h").sign(keys.privateKey)
const peer = await startPeer("peer-gateway", "peers/peer-gateway.ts", [upstream.url], {
  REDIS_URL: peerRedis.url,
  JWT_PUBLIC_KEY: await Jose.exportSPKI(keys.publicKey)
})
pin(peer.pid)
const networksBaseline = await startPeer("node-http-networks", "servers/raw-networks.ts", [])
pin(networksBaseline.pid)

const checkouts: Array<readonly [string, string]> = [
  ["tollgate", root],
  ...baselines.map(([name, checkout]) => [name, Path.resolve(checkout)] as const)
]
const rpcTargets: Array<Target> = [
  { name: "raw proxy", url: `${raw.url}/`, method: "POST", headers: {}, server: raw },
  {
    name: "Express peer gateway",
    url: `${peer.url}/rpc`,
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    server: peer,
    redis: peerRedis
  }
]
const networksTargets: Array<Target> = [
  {
    name: "bare node:http, same bytes",
    url: `${networksBaseline.url}/api/v1/crypto/rpc/networks`,
    method: "GET",
    headers: {},
    server: networksBaseline
  }
]
for (const [label, checkout] of checkouts) {
  const memory = await startTollgate(`${label}-memory`, checkout, upstream.url)
  pin(memory.pid)
  const redis = await startRedis()
  const withRedis = await startTollgate(`${label}-redis`, checkout, upstream.url, redis.url)
  pin(withRedis.pid)
  rpcTargets.push(
    {
      name: `${label} memory`,
      url: `${memory.base}/crypto/rpc/ethereum-mainnet`,
      method: "POST",
      headers: { authorization: `Bearer ${memory.key}` },
      server: memory
    },
    {
      name: `${label} Redis`,
      url: `${withRedis.base}/crypto/rpc/ethereum-mainnet`,
      method: "POST",
      headers: { authorization: `Bearer ${withRedis.key}` },
      server: withRedis,
      redis
    }
  )
  networksTargets.push({ name: `${label} memory`, url: `${memory.base}/crypto/rpc/networks`, method: "GET", headers: {}, server: memory })
}
const workerCounts = options.workers === "" ? [] : options.workers.split(",").map(Number)
for (const workers of workerCounts) {
  const redis = await startRedis()
  const production = await startProduction(`production-${workers}`, upstream.url, redis.url, workers)
  pin(production.pid)
  rpcTargets.push({
    name: `tollgate Redis, ${workers} worker${workers === 1 ? "" : "s"}`,
    url: `${production.base}/crypto/rpc/ethereum-mainnet`,
    method: "POST",
    headers: { authorization: `Bearer ${production.key}` },
    server: production,
    redis
  })
}
for (const target of rpcTargets) {
  const response = await fetch(target.url, {
    method: "POST",
    headers: { "content-type": "application/json", ...target.headers },
    body: rpcBody
  })
  const text = await response.text()
  if (!response.ok || !text.includes("\"result\"")) throw new Error(`${target.name} answered ${response.status} ${text.slice(0, 200)}`)
}

const upstreamAlone: Target = { name: "upstream alone", url: `${upstream.url}/`, method: "POST", headers: {}, server: upstream }
/** The same target measured at one connection, with its own rate. */
const latencyTargets = new Map([upstreamAlone, ...rpcTargets].map((target) => [target, { ...target, rate: undefined }]))
const networksOf = new Map(networksTargets.map((target) => [target.server, target]))
const atOne = (target: Target): Step => ({
  label: "rpc x1",
  target: latencyTargets.get(target)!,
  connections: 1,
  seconds: Math.min(3, options.duration),
  warmup: 1
})
const atMany = (label: string, target: Target): Step => ({
  label,
  target,
  connections: options.connections,
  seconds: options.duration,
  warmup: options.warmup
})
console.log(
  `\nPOST /crypto/rpc/ethereum-mainnet at ${options.connections} connections and GET /crypto/rpc/networks at ${options.connections}, ` +
    `then the paid call at 1 connection: ${options.rounds} rounds of ${options.duration} s (3 s at 1 connection) after ${options.warmup} s warm-ups`
)
const runs = await rounds([
  [atOne(upstreamAlone)],
  ...rpcTargets.map((target) => {
    const networks = networksOf.get(target.server)
    return [atMany(`rpc x${options.connections}`, target), ...(networks === undefined ? [] : [atMany("networks", networks)]), atOne(target)]
  }),
  [atMany("networks", networksTargets[0]!)]
])

// ---------- tables ----------

const summary = (runs: ReadonlyArray<Run>) => ({
  rps: median(runs.map((run) => run.rps)),
  p50: median(runs.map((run) => run.p50)),
  p99: median(runs.map((run) => run.p99)),
  cpuUs: median(runs.map((run) => run.cpuUs)),
  redisUs: median(runs.map((run) => run.redisUs)),
  redisCommands: median(runs.map((run) => run.redisCommandsPerRequest)),
  gcShare: median(runs.map((run) => run.gcShare)),
  scavengesPer1k: median(runs.map((run) => run.scavengesPer1k)),
  bad: runs.reduce((sum, run) => sum + run.bad, 0)
})
const rpc = new Map(rpcTargets.map((target) => [target.name, summary(runs.get(target)!)]))
const rawRow = rpc.get("raw proxy")!
const peerRow = rpc.get("Express peer gateway")!
const latency = new Map([...latencyTargets.values()].map((target) => [target.name, summary(runs.get(target)!)]))
const upstreamP50 = latency.get("upstream alone")!.p50

console.log(`\n### POST /crypto/rpc/ethereum-mainnet (${options.connections} connections, median of ${options.rounds} rounds)\n`)
printTable(
  [
    "target",
    "req/s",
    "rounds",
    "p50 ms",
    "p99 ms",
    "req/s vs raw",
    "CPU us/req",
    "CPU vs raw",
    "Redis us/req",
    "Redis cmds/req",
    "GC pauses",
    "scavenges/1k req",
    "added p50 @1 conn",
    "scavenges/1k @1 conn",
    "non-2xx"
  ],
  rpcTargets.map((target) => {
    const row = rpc.get(target.name)!
    return [
      target.name,
      fixed(row.rps, 0),
      runs.get(target)!.map((run) => fixed(run.rps, 0)).join(" / "),
      fixed(row.p50, 2),
      fixed(row.p99, 2),
      `${fixed(row.rps / rawRow.rps, 2)}x`,
      fixed(row.cpuUs, 0),
      `${fixed(row.cpuUs / rawRow.cpuUs, 2)}x`,
      fixed(row.redisUs, 0),
      fixed(row.redisCommands, 2),
      `${fixed(row.gcShare * 100, 1)}%`,
      fixed(row.scavengesPer1k, 2),
      `${fixed(latency.get(target.name)!.p50 - upstreamP50, 3)} ms`,
      fixed(latency.get(target.name)!.scavengesPer1k, 2),
      String(row.bad)
    ]
  })
)
console.log(`\nupstream alone at 1 connection: p50 ${fixed(upstreamP50, 3)} ms`)

const networks = new Map(networksTargets.map((target) => [target.name, summary(runs.get(target)!)]))
const bare = networks.get("bare node:http, same bytes")!
console.log(`\n### GET /crypto/rpc/networks (${options.connections} connections)\n`)
printTable(
  ["target", "req/s", "p50 ms", "p99 ms", "CPU us/req", "CPU vs node:http", "GC pauses", "scavenges/1k req", "non-2xx"],
  networksTargets.map((target) => {
    const row = networks.get(target.name)!
    return [
      target.name,
      fixed(row.rps, 0),
      fixed(row.p50, 2),
      fixed(row.p99, 2),
      fixed(row.cpuUs, 1),
      `${fixed(row.cpuUs / bare.cpuUs, 2)}x`,
      `${fixed(row.gcShare * 100, 1)}%`,
      fixed(row.scavengesPer1k, 2),
      String(row.bad)
    ]
  })
)

const memoryRow = rpc.get("tollgate memory")!
const redisRow = rpc.get("tollgate Redis")!
const check = (label: string, value: number, bar: string, ok: boolean) =>
  console.log(`- ${label}: ${value.toFixed(2)} (target ${bar}) ${ok ? "met" : "NOT met"}`)
console.log("\n### Targets (this run)\n")
check("tollgate Redis CPU/request vs raw proxy", redisRow.cpuUs / rawRow.cpuUs, "<= 4x", redisRow.cpuUs <= 4 * rawRow.cpuUs)
check("tollgate Redis req/s vs Express peer", redisRow.rps / peerRow.rps, ">= 1.5x", redisRow.rps >= 1.5 * peerRow.rps)
check("tollgate memory CPU/request vs raw proxy", memoryRow.cpuUs / rawRow.cpuUs, "<= 3x", memoryRow.cpuUs <= 3 * rawRow.cpuUs)
const addedMemory = latency.get("tollgate memory")!.p50 - upstreamP50
const addedRedis = latency.get("tollgate Redis")!.p50 - upstreamP50
check("added p50 at 1 connection, memory (ms)", addedMemory, "< 0.5 ms", addedMemory < 0.5)
check("added p50 at 1 connection, Redis (ms)", addedRedis, "< 1 ms", addedRedis < 1)
const networksRatio = networks.get("tollgate memory")!.cpuUs / bare.cpuUs
check("networks CPU/request vs bare node:http", networksRatio, "<= 2x", networksRatio <= 2)
if (workerCounts.length > 0) {
  console.log("\n### Workers (production mode on Redis, this run)\n")
  const single = rpc.get(`tollgate Redis, ${workerCounts[0]} worker${workerCounts[0] === 1 ? "" : "s"}`)!
  printTable(
    [
      "workers",
      "req/s",
      `req/s vs ${workerCounts[0]}`,
      "CPU us/req (all processes)",
      "Redis us/req",
      "Redis cmds/req",
      "req/s vs Express peer"
    ],
    workerCounts.map((workers) => {
      const row = rpc.get(`tollgate Redis, ${workers} worker${workers === 1 ? "" : "s"}`)!
      return [
        String(workers),
        fixed(row.rps, 0),
        `${fixed(row.rps / single.rps, 2)}x`,
        fixed(row.cpuUs, 0),
        fixed(row.redisUs, 0),
        fixed(row.redisCommands, 2),
        `${fixed(row.rps / peerRow.rps, 2)}x`
      ]
    })
  )
}
console.log(
  `\nmachine idle before start: ${fixed(idle * 100, 0)}%; CPU per request side by side is the number to trust on a shared machine.`
)

if (options.json !== "") {
  const dump = (targets: Iterable<Target>) => [...targets].map((target) => ({ name: target.name, runs: runs.get(target) }))
  Fs.writeFileSync(
    options.json,
    JSON.stringify(
      {
        node: process.version,
        cpus: Os.cpus().length,
        idle,
        options,
        rpc: dump(rpcTargets),
        networks: dump(networksTargets),
        latency: dump(latencyTargets.values())
      },
      null,
      2
    )
  )
}
await stopAllAndWait()
Fs.rmSync(work, { recursive: true, force: true })
process.exit(0)
