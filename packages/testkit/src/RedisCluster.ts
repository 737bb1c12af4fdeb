/**
 * A throwaway Redis Cluster for one test file: three masters and three replicas, each a
 * `redis-server --cluster-enabled yes` on free ports (client and bus port both picked, so nothing
 * collides with other servers on the machine), joined by `redis-cli --cluster create`. Nodes can be
 * killed one by one to test failover; `stop` removes everything.
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type * as Contract from "./Contract.ts"
import { freePort } from "./FreePort.ts"
import * as Reaper from "./Reaper.ts"
import * as RedisServer from "./RedisServer.ts"

/** @category models */
export interface Node {
  readonly port: number
  readonly url: string
}

/** @category models */
export interface RedisCluster {
  /** Every node, masters first as `redis-cli --cluster create` assigned them. */
  readonly nodes: ReadonlyArray<Node>
  /** `host:port,host:port,...` of every node, the form `TOLLGATE_REDIS_CLUSTER` takes. */
  readonly seeds: string
  /** The current masters (a failover changes them). */
  readonly masters: () => Promise<ReadonlyArray<Node>>
  /** The master that serves a key's slot now. */
  readonly masterOf: (key: string) => Promise<Node>
  /** The replica that follows the master on `port` now. */
  readonly replicaOf: (port: number) => Promise<Node>
  /** Freezes one node (SIGSTOP) for `ms`, then lets it run on: a stalled host, not a crash. */
  readonly stall: (port: number, ms: number) => Promise<void>
  /** Kills one node with SIGKILL: a crash, not a shutdown. */
  readonly kill: (port: number) => Promise<void>
  /** Resolves once every slot is served again and the cluster reports `cluster_state:ok`. */
  readonly waitHealthy: (timeoutMs?: number) => Promise<void>
  readonly stop: () => Promise<void>
}

const MASTERS = 3

const run = (command: string, args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) => {
    ChildProcess.execFile(command, args, { timeout: 20_000 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`${command} ${args.join(" ")}: ${stderr || String(error)}`)))
  })

const cli = (port: number, ...args: ReadonlyArray<string>) => run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args])

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitFor = async (check: () => Promise<boolean>, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return
    await sleep(50)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/**
 * Starts a six-node cluster (three masters, one replica each) and waits until it serves every slot.
 *
 * @category constructors
 */
export const start = async (options: { readonly nodeTimeoutMs?: number } = {}): Promise<RedisCluster> => {
  RedisServer.requireRedisServer()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-cluster-"))
  Reaper.removeAtExit(dir)
  const children = new Map<number, ChildProcess.ChildProcess>()
  const stop = async () => {
    await Promise.all([...children.values()].map((child) =>
      child.exitCode !== null || child.signalCode !== null
        ? Promise.resolve()
        : new Promise((resolve) => {
          child.once("exit", resolve)
          child.kill("SIGKILL")
        })
    ))
    Fs.rmSync(dir, { recursive: true, force: true })
  }
  const nodes: Array<Node> = []
  for (let i = 0; i < MASTERS * 2; i++) {
    const { child, port } = await RedisServer.launchOnFreePort(async (port) =>
      ChildProcess.spawn("redis-server", [
        "--port",
        String(port),
        "--cluster-port",
        String(await freePort()),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        Path.join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        String(options.nodeTimeoutMs ?? 1000),
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
        // A replica that never finished its first sync refuses to fail over: sync at once.
        "--repl-diskless-sync-delay",
        "0",
        "--daemonize",
        "no",
        "--logfile",
        Path.join(dir, `log-${port}.txt`)
      ], { stdio: "ignore" })
    ).catch(async (error) => {
      await stop()
      throw error
    })
    children.set(port, child)
    nodes.push({ port, url: `redis://127.0.0.1:${port}` })
  }
  const isAlive = (port: number) => children.get(port)?.exitCode === null && children.get(port)?.signalCode === null
  const alive = () => nodes.filter((node) => isAlive(node.port))
  /** `cluster nodes` as seen by a live node: each node's port, flags and whether it serves slots. */
  const topology = async () => {
    const [seen] = alive()
    if (seen === undefined) return []
    return (await cli(seen.port, "cluster", "nodes")).trim().split("\n").map((line) => {
      const fields = line.split(" ")
      const ranges = fields.slice(8).filter((range) => !range.startsWith("[")).map((range) => range.split("-").map(Number))
      return {
        id: fields[0]!,
        master: fields[3]!,
        port: Number(fields[1]!.split(":")[1]!.split("@")[0]),
        flags: fields[2]!.split(","),
        servesSlots: ranges.length > 0,
        serves: (slot: number) => ranges.some(([from, to]) => slot >= from! && slot <= (to ?? from)!)
      }
    })
  }
  const waitHealthy = async (timeoutMs = 30_000) => {
    await waitFor(
      async () => {
        const infos = await Promise.all(alive().map((node) => cli(node.port, "cluster", "info")))
        if (!infos.every((info) => info.includes("cluster_state:ok") && info.includes("cluster_slots_ok:16384"))) return false
        const masters = (await topology()).filter((node) => node.flags.includes("master") && node.servesSlots)
        return masters.length === MASTERS &&
          masters.every((node) => isAlive(node.port) && !node.flags.some((flag) => flag.includes("fail")))
      },
      timeoutMs,
      "the Redis Cluster to serve every slot from a live master"
    )
  }
  try {
    await run("redis-cli", [
      "--cluster",
      "create",
      ...nodes.map((node) => `127.0.0.1:${node.port}`),
      "--cluster-replicas",
      "1",
      "--cluster-yes"
    ])
    await waitHealthy()
    await waitFor(
      async () => {
        const replicas = (await topology()).filter((node) => node.flags.includes("slave"))
        const links = await Promise.all(replicas.map((node) => cli(node.port, "info", "replication")))
        return replicas.length === MASTERS && links.every((info) => info.includes("master_link_status:up"))
      },
      30_000,
      "every replica to finish its first sync"
    )
  } catch (error) {
    await stop()
    throw error
  }
  return {
    nodes,
    seeds: nodes.map((node) => `127.0.0.1:${node.port}`).join(","),
    masters: async () =>
      (await topology())
        .filter((node) => node.flags.includes("master") && node.servesSlots && isAlive(node.port))
        .map((node) => ({ port: node.port, url: `redis://127.0.0.1:${node.port}` })),
    masterOf: async (key) => {
      const [seen] = alive()
      const slot = Number((await cli(seen!.port, "cluster", "keyslot", key)).trim())
      const master = (await topology()).find((node) => node.flags.includes("master") && isAlive(node.port) && node.serves(slot))
      if (master === undefined) throw new Error(`no live master serves slot ${slot}`)
      return { port: master.port, url: `redis://127.0.0.1:${master.port}` }
    },
    replicaOf: async (port) => {
      const nodes = await topology()
      const master = nodes.find((node) => node.port === port)
      const replica = nodes.find((node) => node.flags.includes("slave") && node.master === master?.id && isAlive(node.port))
      if (replica === undefined) throw new Error(`no live replica follows the node on port ${port}`)
      return { port: replica.port, url: `redis://127.0.0.1:${replica.port}` }
    },
    stall: (port, ms) => RedisServer.stall(children.get(port)!, ms),
    kill: async (port) => {
      const child = children.get(port)
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGKILL")
      await exited
    },
    waitHealthy,
    stop
  }
}

/**
 * A contract-test backend over a layer built from the cluster's seed nodes.
 *
 * @category constructors
 */
export const backend = <ROut, E>(
  cluster: RedisCluster,
  makeLayer: (seeds: ReadonlyArray<string>) => Layer.Layer<ROut, E>
): Contract.Backend<ROut, E> => ({ name: "redis cluster", layer: makeLayer(cluster.seeds.split(",")) })
