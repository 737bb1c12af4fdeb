/**
 * A throwaway `redis-server` for one test file: started on a free port with no persistence (or,
 * with `appendOnly`, an append-only file fsynced on every write in a throwaway directory, so a
 * killed server restarts with its data), stopped after the file. `REDIS_URL` points the tests at an existing server instead. When no
 * Redis can be had, tests skip locally but FAIL under `CI`, so CI can never go green without
 * having exercised the Redis layers.
 *
 * @since 0.1.0
 */
import { Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { freePort } from "./FreePort.ts"

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

const spawnServer = (port: number, dir: string | undefined) =>
  ChildProcess.spawn(
    "redis-server",
    [
      "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--daemonize", "no",
      ...(dir === undefined ? ["--appendonly", "no"] : ["--appendonly", "yes", "--appendfsync", "always", "--dir", dir])
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
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const child = await spawn(port)
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
  const dir = options.appendOnly === true ? Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-redis-")) : undefined
  const first = await launchOnFreePort(async (port) => spawnServer(port, dir))
  const port = first.port
  let child = first.child
  const onExit = () => child.kill("SIGKILL")
  process.once("exit", onExit)
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
      child = spawnServer(port, dir)
      await launched()
    },
    stall: (ms) => stall(child, ms),
    stop: async () => {
      process.removeListener("exit", onExit)
      await kill()
      if (dir !== undefined) Fs.rmSync(dir, { recursive: true, force: true })
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
      ChildProcess.execFile("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], (error, stdout) =>
        error === null ? resolve(stdout) : reject(error)))
  await command(primary.port, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
  await command(replica.port, "REPLICAOF", "127.0.0.1", String(primary.port))
  await waitUntil(async () => (await command(replica.port, "INFO", "replication")).includes("master_link_status:up"), 10_000, "the replica's first sync")
  return { primary, replica }
}

/**
 * What a test file gets: a server it may use, or the reason there is none. Under `CI` a missing
 * Redis throws instead, failing the file.
 *
 * @category constructors
 */
export const acquire = async (): Promise<RedisServer | { readonly unavailable: string }> => {
  const external = process.env["REDIS_URL"]
  if (external !== undefined && external !== "") {
    const port = Number(new URL(external).port || 6379)
    const unsupported = () => Promise.reject(new Error("cannot restart or stall an external Redis"))
    return { url: external, port, kill: unsupported, restart: unsupported, stall: unsupported, stop: () => Promise.resolve() }
  }
  try {
    return await start()
  } catch (error) {
    if (process.env["CI"]) {
      throw new Error(`CI is set and no redis-server could be started: ${String(error)}`)
    }
    return { unavailable: String(error) }
  }
}

/**
 * A contract-test backend over a Redis layer built from the acquired server: skipped with the
 * reason when there is none (never under CI, where `acquire` throws).
 *
 * @category constructors
 */
export const backend = <ROut, E>(
  acquired: RedisServer | { readonly unavailable: string },
  makeLayer: (url: string) => Layer.Layer<ROut, E>
) =>
  "unavailable" in acquired
    ? { name: "redis", layer: Layer.effectDiscard(Effect.die(acquired.unavailable)) as unknown as Layer.Layer<ROut, E>, skip: acquired.unavailable }
    : { name: "redis", layer: makeLayer(acquired.url) }
