/**
 * The one Redis connection every Redis layer of tollgate shares: a single server through
 * node-redis's client, or a Redis Cluster through node-redis's cluster client. Both are offered as
 * `effect/persistence`'s `Redis` service (what the stores send their commands and scripts to) and
 * as `RedisConnection`, the raw sender the hot-path scripts use. A script whose keys span slots is
 * refused before it is sent, and a failed-over cluster is served again without a restart.
 *
 * **Details**
 *
 * On a cluster a command goes to the master of its first key's slot. A script's keys must all sit
 * in one slot (tollgate puts an account's keys under one hash tag); refusing a script that breaks
 * the rule here makes a layer fail the cluster tests at once instead of working on one server and
 * failing in production. Scripts run as Functions (`FCALL`, their library loaded on every master by
 * `loadLibrary`) or as `EVALSHA`; a node that does not know the script (each master has its own
 * script cache, and a promoted replica starts empty) gets it by `EVAL` and knows it from then on.
 *
 * node-redis's cluster client learns a new topology only from a `MOVED` reply, which a dead master
 * never sends: after a failover it would keep sending that slot's commands to the dead node. So a
 * command that fails without a reply from Redis (the node is unreachable) asks the client to
 * rediscover the topology from the seed nodes, at most every `REDISCOVER_MS`; once a replica has
 * been promoted the slot is served again.
 *
 * `SCAN` walks every master in turn: its cursor is `<master>-<cursor>` between masters, and `0`
 * only once the last master is done, so a caller's loop over the cursor sees the whole keyspace.
 *
 * `waitForReplicas` sends `WAIT` on the connection of a key's master, so it covers the writes that
 * connection sent before it (a credit's script). `WAIT` holds that connection until the replicas
 * answer: every command queued behind it on the same connection waits too, which is why tollgate
 * waits only after credits, never after each paid call (`bench/replication.ts` measures both).
 *
 * @since 0.1.0
 */
import { NodeRedis } from "@effect/platform-node"
import calculateSlot from "cluster-key-slot"
import { Context, Effect, Layer } from "effect"
import * as Redis from "effect/persistence/Redis"
import { createHash } from "node:crypto"
import { createCluster, ErrorReply } from "redis"

/**
 * Sends one command. `firstKey` is the key that routes it on a cluster (ignored on one server).
 * `loadLibrary` runs `FUNCTION LOAD REPLACE` of a Function library on every primary, or with a
 * `firstKey` on that key's primary only; `functions` says whether scripts may run as Functions
 * (`Scripts`).
 *
 * @category services
 */
export class RedisConnection extends Context.Service<RedisConnection, {
  readonly sendCommand: (args: Array<string>, firstKey: string | undefined) => Promise<unknown>
  readonly loadLibrary: (code: string, firstKey: string | undefined) => Promise<void>
  readonly functions: boolean
}>()("@tollgate/redis/RedisConnection") {}

/**
 * One server or a Redis Cluster's seed nodes. `functions: false` runs scripts as `EVALSHA` even
 * where Redis offers Functions (default `true`: see `Scripts`).
 *
 * @category models
 */
export type Target =
  | { readonly url: string; readonly functions?: boolean }
  | { readonly cluster: ReadonlyArray<string>; readonly functions?: boolean }

/**
 * How many replicas must acknowledge a write (`WAIT numreplicas timeout`), and how long to wait.
 *
 * @category models
 */
export interface ReplicaAcknowledgment {
  readonly replicas: number
  readonly timeoutMs: number
}

/**
 * Waits until `acknowledgment.replicas` replicas of `key`'s master have every write sent before on
 * its connection, at most `acknowledgment.timeoutMs`; resolves with how many did.
 *
 * @category replication
 */
export const waitForReplicas = (
  connection: RedisConnection["Service"],
  key: string,
  acknowledgment: ReplicaAcknowledgment
): Promise<number> =>
  connection.sendCommand(["WAIT", String(acknowledgment.replicas), String(acknowledgment.timeoutMs)], key) as Promise<number>

/** @category errors */
export class CrossSlotScript extends Error {
  override readonly name = "CrossSlotScript"
}

/** How long a command may wait for a connection that is down before it fails (no offline queue). */
const CONNECT_TIMEOUT_MS = 2_000

/** How often a failing node makes the cluster client read the topology again. */
const REDISCOVER_MS = 250

const reconnect = (retries: number) => Math.min(2 ** retries * 50, 2_000) + Math.floor(Math.random() * 200)

/**
 * The slot every key of a script's `EVAL`/`EVALSHA`/`FCALL` arguments (`[script, numkeys, ...keys, ...args]`)
 * hashes to, or a `CrossSlotScript` error naming the keys.
 *
 * @category cluster
 */
export const scriptSlot = (args: ReadonlyArray<string>): number | undefined => {
  const count = Number(args[1])
  let slot: number | undefined
  for (let i = 2; i < 2 + count; i++) {
    const keySlot = calculateSlot(args[i]!)
    if (slot !== undefined && keySlot !== slot) {
      throw new CrossSlotScript(`a script's keys span Redis Cluster slots: ${args.slice(2, 2 + count).join(", ")}`)
    }
    slot = keySlot
  }
  return slot
}

const isScript = (command: string) => command === "EVALSHA" || command === "EVAL" || command === "FCALL" || command === "FCALL_RO"

const loadCommand = (code: string) => ["FUNCTION", "LOAD", "REPLACE", code]

const clusterLayer = (seeds: ReadonlyArray<string>, functions: boolean) =>
  Layer.effectContext(Effect.gen(function*() {
    const cluster = yield* Effect.acquireRelease(
      Effect.sync(() =>
        createCluster({
          rootNodes: seeds.map((seed) => ({ url: `redis://${seed}` })),
          defaults: { disableOfflineQueue: true, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: reconnect } }
        })
      ),
      (cluster) => Effect.ignoreCause(Effect.promise(() => cluster.close()))
    )
    const runSync = Effect.runSyncWith(yield* Effect.context<never>())
    cluster.on("error", (cause) => runSync(Effect.logWarning("Redis Cluster client error", cause)))
    yield* Effect.tryPromise({ try: () => cluster.connect(), catch: (cause) => new Redis.RedisError({ cause }) })

    // `_slots.rediscover` is node-redis's own topology refresh (what a MOVED reply triggers); it is
    // not in the typed surface, hence the narrow view of it.
    const slots = (cluster as unknown as {
      readonly _slots: { rediscover: (startWith: unknown) => Promise<void>; masters: ReadonlyArray<{ client?: unknown }> }
    })._slots
    let rediscoveredAt = 0
    const rediscoverAfter = (error: unknown) => {
      if (error instanceof ErrorReply || Date.now() - rediscoveredAt < REDISCOVER_MS) return
      rediscoveredAt = Date.now()
      const startWith = slots.masters.find((master) => master.client !== undefined)?.client
      if (startWith !== undefined) slots.rediscover(startWith).catch(() => {})
    }
    const routed = (firstKey: string | undefined, args: Array<string>) =>
      cluster.sendCommand(firstKey, false, args).catch((error: unknown) => {
        rediscoverAfter(error)
        throw error
      })

    const scan = async (args: ReadonlyArray<string>): Promise<readonly [string, ReadonlyArray<string>]> => {
      const [cursor, ...options] = args
      const [master, nodeCursor] = cursor!.includes("-") ? cursor!.split("-").map(Number) as [number, number] : [0, Number(cursor)]
      const masters = cluster.masters
      const node = masters[master]
      if (node === undefined) return ["0", []]
      const client = await cluster.nodeClient(node)
      const [next, keys] = await client.sendCommand(["SCAN", String(nodeCursor), ...options]) as [string, Array<string>]
      if (next !== "0") return [`${master}-${next}`, keys]
      return [master + 1 < masters.length ? `${master + 1}-0` : "0", keys]
    }

    // Scripts are known by SHA here, so `SCRIPT LOAD` needs no node, and a node without the script
    // gets its source by `EVAL` once.
    const sources = new Map<string, string>()
    const sendCommand = async (args: Array<string>, firstKey: string | undefined): Promise<unknown> => {
      const command = args[0]!
      if (command === "SCAN") return scan(args.slice(1))
      if (!isScript(command)) return routed(firstKey, args)
      const scriptArgs = args.slice(1)
      scriptSlot(scriptArgs)
      const key = Number(scriptArgs[1]) > 0 ? scriptArgs[2] : undefined
      if (command !== "EVALSHA") return routed(key, args)
      try {
        return await routed(key, args)
      } catch (error) {
        const source = sources.get(scriptArgs[0]!)
        if (source === undefined || !String(error).includes("NOSCRIPT")) throw error
        return routed(key, ["EVAL", source, ...scriptArgs.slice(1)])
      }
    }
    const send = <A>(command: string, ...args: ReadonlyArray<string>): Effect.Effect<A, Redis.RedisError> => {
      if (command === "SCRIPT" && args[0] === "LOAD") {
        const sha = createHash("sha1").update(args[1]!).digest("hex")
        sources.set(sha, args[1]!)
        return Effect.succeed(sha as A)
      }
      return Effect.tryPromise({
        try: () => sendCommand([command, ...args], args[0]) as Promise<A>,
        catch: (cause) => new Redis.RedisError({ cause })
      })
    }
    const unsupported = (what: string) => Effect.fail(new Redis.RedisError({ cause: `${what} is not used by tollgate on a Redis Cluster` }))
    const redis = yield* Redis.make({
      send,
      connect: unsupported("a reserved connection"),
      subscribe: () => unsupported("pub/sub")
    })
    // A library goes to every primary (each keeps its own, and its replicas copy it); a node that
    // answers `Function not found` later gets it alone.
    const loadLibrary = async (code: string, firstKey: string | undefined) => {
      if (firstKey !== undefined) {
        await routed(firstKey, loadCommand(code))
        return
      }
      for (const master of cluster.masters) await (await cluster.nodeClient(master)).sendCommand(loadCommand(code))
    }
    return Context.make(Redis.Redis, redis).pipe(Context.add(RedisConnection, { sendCommand, loadLibrary, functions }))
  }))

const serverLayer = (url: string, functions: boolean) =>
  Layer.effect(
    RedisConnection,
    Effect.gen(function*() {
      const { client } = yield* NodeRedis.NodeRedis
      return {
        sendCommand: (args: Array<string>) => client.sendCommand(args),
        loadLibrary: async (code: string) => {
          await client.sendCommand(loadCommand(code))
        },
        functions
      }
    })
  ).pipe(Layer.provideMerge(NodeRedis.layer({ url, disableOfflineQueue: true })))

/**
 * `Redis` and `RedisConnection` over one server (`{ url }`, with `NodeRedis` too) or over a Redis
 * Cluster (`{ cluster: ["host:port", ...] }`, seed nodes from which the topology is discovered).
 * Commands fail at once while their node is unreachable (no offline queue), so a store outage is
 * an answer, not a hang.
 *
 * @category layers
 */
export const layer = (target: Target): Layer.Layer<Redis.Redis | RedisConnection, Redis.RedisError> =>
  "cluster" in target ? clusterLayer(target.cluster, target.functions ?? true) : serverLayer(target.url, target.functions ?? true)
