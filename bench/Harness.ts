/**
 * What the benchmarks share: servers started as child processes (so the load generator and the
 * server do not share a core), autocannon runs, and the ratio table.
 */
import autocannon from "autocannon"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"

export const dir = Path.dirname(new URL(import.meta.url).pathname)

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

export interface ChildServer {
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

/**
 * Waits for a child server to print "listening" and returns what it printed until then. From then
 * on its output (request logs) is drained unread: a load generator in this process must not spend
 * its core decoding the server's logs, which would lower what it can measure.
 */
export const untilListening = (child: ChildProcess.ChildProcess, name: string): Promise<string> =>
  new Promise((resolve, reject) => {
    let output = ""
    // Generous: on a machine shared with other builds, loading a server's modules alone has taken 20 s.
    const timer = setTimeout(() => reject(new Error(`${name} did not start in 60 s`)), 60_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      if (!output.includes("listening")) return
      clearTimeout(timer)
      child.stdout?.off("data", onData)
      child.stdout?.resume()
      resolve(output)
    }
    child.stdout?.on("data", onData)
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}`)))
  })

/** Starts `node <script> <port>` and waits for it to print "listening". */
export const startServer = async (script: string, env: Record<string, string> = {}): Promise<ChildServer> => {
  const port = await freePort()
  const child = ChildProcess.spawn(process.execPath, [Path.join(dir, script), String(port)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"]
  })
  await untilListening(child, script)
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGKILL")
      await exited
    }
  }
}

const clockTicks = Number(ChildProcess.execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100

/** The fields of `/proc/<pid>/stat` after the command name: [0] state, [1] ppid, [11] utime, [12] stime. */
const statFields = (pid: number | string): Array<string> | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined // the process has ended
  }
}

/**
 * utime + stime of a process and of every process it started, in seconds: a server with workers
 * is its supervisor and the workers it forked.
 */
export const cpuSeconds = (pid: number): number => {
  let seconds = 0
  for (const each of processTree(pid)) {
    const fields = statFields(each)
    if (fields !== undefined) seconds += (Number(fields[11]) + Number(fields[12])) / clockTicks
  }
  return seconds
}

/** The pids of a process and of every process it started. */
export const processTree = (pid: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const fields = statFields(entry)
    if (fields !== undefined) children.set(Number(fields[1]), [...(children.get(Number(fields[1])) ?? []), Number(entry)])
  }
  const tree: Array<number> = []
  const pending = [pid]
  while (pending.length > 0) {
    const next = pending.pop()!
    tree.push(next)
    for (const child of children.get(next) ?? []) pending.push(child)
  }
  return tree
}

export interface LoadResult {
  readonly requestsPerSecond: number
  /** Requests answered with a 2xx status. */
  readonly ok: number
  readonly p50Ms: number
  readonly p99Ms: number
  /** The mean latency of the answered requests. */
  readonly meanMs: number
  readonly errors: number
  readonly non2xx: number
  /** How many answers came with each status. */
  readonly statuses: Readonly<Record<string, number>>
}

export const load = async (options: autocannon.Options): Promise<LoadResult> => {
  const result = await autocannon({ connections: 50, duration: 8, ...options })
  return {
    requestsPerSecond: result.requests.average,
    ok: result["2xx"],
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    meanMs: result.latency.average,
    errors: result.errors,
    non2xx: result.non2xx,
    statuses: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([status, stats]) => [status, stats.count ?? 0]))
  }
}

/** What a target answered: 2xx, other statuses, and requests that got no answer (connection errors, timeouts). */
export interface Answers {
  readonly ok: number
  readonly non2xx: number
  readonly errors: number
  readonly statuses: Readonly<Record<string, number>>
}

/** Above this share of failed requests a target's numbers measure its errors, not its work. */
export const MAX_FAILED_SHARE = 0.01

/**
 * Throws, naming the target and the statuses it answered, when more than `MAX_FAILED_SHARE` of its
 * requests failed: a server that answers every request 404 is fast, and its numbers must not be
 * reported as the target's.
 */
export const requireAnswered = (target: string, answers: Answers): void => {
  const failed = answers.non2xx + answers.errors
  const total = answers.ok + failed
  if (total > 0 && failed / total <= MAX_FAILED_SHARE) return
  const statuses = Object.entries(answers.statuses).map(([status, count]) => `${status}: ${count}`).join(", ")
  throw new Error(
    `${target}: ${failed} of ${total} requests failed (${(total === 0 ? 100 : failed / total * 100).toFixed(1)} %, ` +
      `more than ${MAX_FAILED_SHARE * 100} %): statuses ${statuses || "none"}, ${answers.errors} without an answer`
  )
}

export const table = (rows: ReadonlyArray<Record<string, string | number>>) => {
  const first = rows[0]
  if (first === undefined) return
  const columns = Object.keys(first)
  console.log(`| ${columns.join(" | ")} |`)
  console.log(`| ${columns.map(() => "---").join(" | ")} |`)
  for (const row of rows) console.log(`| ${columns.map((column) => String(row[column])).join(" | ")} |`)
}

/**
 * The files of a reference server (`packages/server/src/main.ts`, dev mode) in front of one RPC
 * upstream: its config, with the demo account's RPC limits out of reach so the load is never
 * refused, and where it writes its demo credentials.
 */
export const rpcReferenceFiles = (work: string, name: string, upstream: string) => {
  const config = Path.join(work, `${name}.config.json`)
  const credentials = Path.join(work, `${name}.credentials.json`)
  Fs.writeFileSync(
    config,
    JSON.stringify({
      rpc: { upstreams: { "ethereum-mainnet": [upstream] } },
      rateLimits: { accounts: { acct_demo: { rpc: { requests: 1_000_000_000, credits: 1_000_000_000_000 } } } }
    })
  )
  return { config, credentials }
}

/**
 * Waits until the reference server at `base` answers and has written its demo credentials, and
 * answers its demo inference key; undefined if it did not within a minute or exited.
 */
export const untilDemoKey = async (
  child: ChildProcess.ChildProcess,
  base: string,
  credentials: string
): Promise<string | undefined> => {
  for (let attempt = 0; attempt < 240; attempt++) {
    if (child.exitCode !== null) return undefined
    try {
      const response = await fetch(`${base}/crypto/rpc/networks`, { signal: AbortSignal.timeout(2000) })
      if (response.ok && Fs.existsSync(credentials)) {
        return (JSON.parse(Fs.readFileSync(credentials, "utf8")) as { inferenceKey: string }).inferenceKey
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return undefined
}
