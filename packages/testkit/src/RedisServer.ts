/**
 * A throwaway `redis-server` for one test file, on a free port, stopped after the file and killed
 * with the test process whatever happens (`Reaper`). `REDIS_URL` points `acquire` at an existing
 * server instead.
 *
 * **Details**
 *
 * The server runs in a throwaway directory (its `--dir`, so nothing it writes, a replica's first
 * sync included, lands in the repository), with no persistence, or, with `appendOnly`, an
 * append-only file fsynced on every write, so a killed server restarts with its data. Without
 * `redis-server` on the PATH the tests fail, naming it: a suite that skipped half its tests would
 * be green without having exercised the Redis layers.
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { createClient } from "redis"
import type * as Contract from "./Contract.ts"
import { freePort } from "./FreePort.ts"
import * as Reaper from "./Reaper.ts"

/** @category models */
export interface RedisServer {
  readonly url: string
  readonly port: number
  /** Stops the server (SIGKILL: a crash, not a shutdown). */
  readonly kill: () => Promise<void>
  /** Starts it again on the same port: empty, or with its data when it keeps an append-only file. */
  readonly restart: () => Promise<void>
  /** Freezes the process (SIGSTOP) for `ms`, then lets it run on: a stalled host, not a crash. */
  readonly stall: (ms: number) => Promise<void>
  readonly stop: () => Promise<void>
}

const ping = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = Net.connect({ port, host: "127.0.0.1" })
    socket.setTimeout(500)
    socket.once("connect", () => socket.write("PING\r\n"))
    socket.once("data", (data) => {
      socket.destroy()
      resolve(data.toString().startsWith("+PONG"))
    })
    socket.once("error", () => resolve(false))
    socket.once("timeout", () => {
      socket.destroy()
      resolve(false)
    })
  })

const waitUntil = async (check: () => Promise<boolean>, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** @category options */
export interface Options {
  /** Keep an append-only file (`appendfsync always`) so `restart` after `kill` brings the data back. */
  readonly appendOnly?: boolean
}

/**
 * The one line a test run fails with when `binary` (`redis-server` or `redis-cli`) cannot be run.
 *
 * @category constants
 */
export const missing = (binary: string) =>
  `${binary} was not found on the PATH: the tests start their own Redis servers; install Redis 7 or later (redis-server and redis-cli)`

/**
 * Throws `missing` unless `redis-server` and `redis-cli` run.
 *
 * @category constructors
 */
export const requireRedisServer = (): void => {
  for (const binary of ["redis-server", "redis-cli"]) {
    const result = ChildProcess.spawnSync(binary, ["--version"], { stdio: "ignore" })
    if (result.error !== undefined || result.status !== 0) throw new Error(missing(binary))
  }
}

const spawnServer = (port: number, dir: string, appendOnly: boolean) =>
  ChildProcess.spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--daemonize",
      "no",
      "--dir",
      dir,
      ...(appendOnly ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"])
    ],
    { stdio: "ignore" }
  )

/**
 * Stops a process with SIGSTOP and continues it with SIGCONT after `ms`.
 *
 * @category internals
 */
export const stall = async (child: ChildProcess.ChildProcess, ms: number): Promise<void> => {
  child.kill("SIGSTOP")
  await new Promise((resolve) => setTimeout(resolve, ms))
  child.kill("SIGCONT")
}

/**
 * Spawns a server on a free port and resolves once it answers `PING`. A port found free can be
 * taken before the server binds it (by another test file's server, or as the local port of an
 * outgoing connection: free ports come from the ephemeral range), and then the server exits at
 * once; it is started again on another port, up to three times.
 *
 * @category internals
 */
export const launchOnFreePort = async (
  spawn: (port: number) => Promise<ChildProcess.ChildProcess>
): Promise<{ readonly child: ChildProcess.ChildProcess; readonly port: number }> => {
  for (let attempt = 1;; attempt++) {
    const port = await freePort()
    const child = await spawn(port)
    Reaper.reap(child)
    const exited = new Promise<boolean>((resolve) => {
      child.once("exit", () => resolve(false))
      child.once("error", () => resolve(false))
    })
    const answered = waitUntil(() => child.exitCode === null ? ping(port) : Promise.resolve(true), 10_000, `redis-server on port ${port}`)
      .then(() => child.exitCode === null)
    if (await Promise.race([answered, exited])) return { child, port }
    if (attempt === 3) throw new Error(`redis-server exited at start three times (last port ${port})`)
  }
}

/**
 * Starts a fresh redis-server on a free port.
 *
 * @category constructors
 */
export const start = async (options: Options = {}): Promise<RedisServer> => {
  requireRedisServer()
  const appendOnly = options.appendOnly === true
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-redis-"))
  Reaper.removeAtExit(dir)
  const first = await launchOnFreePort(async (port) => spawnServer(port, dir, appendOnly)).catch((error) => {
    Fs.rmSync(dir, { recursive: true, force: true })
    throw error
  })
  const port = first.port
  let child = first.child
  const launched = async () => {
    await new Promise<void>((resolve, reject) => {
      child.once("error", reject)
      waitUntil(() => ping(port), 10_000, `redis-server on port ${port}`).then(resolve, reject)
    })
  }
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once("exit", resolve))
    child.kill("SIGKILL")
    await exited
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    restart: async () => {
      await kill()
      child = spawnServer(port, dir, appendOnly)
      Reaper.reap(child)
      await launched()
    },
    stall: (ms) => stall(child, ms),
    stop: async () => {
      await kill()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * Two fresh servers, the second a replica of the first, resolved once the replica has finished its
 * first sync (started at once, without the default diskless-sync delay).
 *
 * @category constructors
 */
export const startReplicated = async (): Promise<{ readonly primary: RedisServer; readonly replica: RedisServer }> => {
  const [primary, replica] = await Promise.all([start(), start()])
  const command = (port: number, ...args: ReadonlyArray<string>) =>
    new Promise<string>((resolve, reject) =>
      ChildProcess.execFile(
        "redis-cli",
        ["-h", "127.0.0.1", "-p", String(port), ...args],
        (error, stdout) => error === null ? resolve(stdout) : reject(error)
      )
    )
  await command(primary.port, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
  await command(replica.port, "REPLICAOF", "127.0.0.1", String(primary.port))
  await waitUntil(
    async () => (await command(replica.port, "INFO", "replication")).includes("master_link_status:up"),
    10_000,
    "the replica's first sync"
  )
  return { primary, replica }
}

/**
 * What a test file gets: the server `REDIS_URL` names, else a fresh one (`start`), which fails
 * with `missing` when `redis-server` cannot be run. A test that kills, restarts or stalls its
 * server, or counts its commands, uses `start`: it must never touch a shared one.
 *
 * @category constructors
 */
export const acquire = async (): Promise<RedisServer> => {
  const external = process.env["REDIS_URL"]
  if (external !== undefined && external !== "") {
    const port = Number(new URL(external).port || 6379)
    const unsupported = () => Promise.reject(new Error("cannot restart or stall an external Redis"))
    return { url: external, port, kill: unsupported, restart: unsupported, stall: unsupported, stop: () => Promise.resolve() }
  }
  return start()
}

/**
 * A contract-test backend over a Redis layer built from the acquired server.
 *
 * @category constructors
 */
export const backend = <ROut, E>(acquired: RedisServer, makeLayer: (url: string) => Layer.Layer<ROut, E>): Contract.Backend<ROut, E> => ({
  name: "redis",
  layer: makeLayer(acquired.url)
})

/**
 * One command sent to the Redis at `url` on a connection of its own, and its reply.
 *
 * @category inspection
 */
export const command = async (url: string, ...args: Array<string>) => {
  const client = createClient({ url })
  await client.connect()
  try {
    return await client.sendCommand(args)
  } finally {
    await client.close()
  }
}

/**
 * How many script calls the Redis at `url` served since its stats were last reset, by the command
 * that carried them: `FCALL` (Redis Functions) or `EVALSHA`/`EVAL` (the fallback), and in all.
 *
 * @category inspection
 */
export const scriptCalls = async (url: string): Promise<{ readonly fcall: number; readonly evalsha: number; readonly total: number }> => {
  const text = String(await command(url, "INFO", "commandstats"))
  const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(text)?.[1] ?? 0)
  const fcall = calls("fcall")
  const evalsha = calls("evalsha") + calls("eval")
  return { fcall, evalsha, total: fcall + evalsha }
}
