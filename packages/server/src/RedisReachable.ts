/**
 * Whether the configured Redis answers, checked once before a Redis store is built: the server and
 * the operator CLI both start with it, so an unreachable or under-replicated Redis is one line
 * naming the setting instead of the client's retry warnings and an error without a message.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { createClient } from "redis"
import { ConfigError, type ServerConfig } from "./Config.ts"

/**
 * Fails with one line when Redis cannot be reached at start. The client would report it too, but
 * as a warning plus an error with the socket's stack; a throwaway connection that does not retry
 * answers first, within 5 s. For a Redis Cluster one reachable seed node is enough: the client
 * learns the rest of the topology from it.
 *
 * @category checks
 */
export const check = (
  config: Pick<ServerConfig, "redisUrl"> & Partial<Pick<ServerConfig, "redisCluster" | "redisReplicaAcknowledgment">>
): Effect.Effect<void, ConfigError> => {
  const field = config.redisCluster === undefined ? "TOLLGATE_REDIS_URL" : "TOLLGATE_REDIS_CLUSTER"
  const urls = config.redisCluster === undefined ? [config.redisUrl] : config.redisCluster.map((seed) => `redis://${seed}`)
  const connect = async (url: string) => {
    const client = createClient({ url, socket: { reconnectStrategy: false, connectTimeout: 5_000 } })
    client.on("error", () => {})
    await client.connect()
    try {
      return await fewestReplicas(client, config.redisCluster !== undefined)
    } finally {
      await client.close()
    }
  }
  const wanted = config.redisReplicaAcknowledgment?.replicas ?? 0
  return Effect.tryPromise({
    try: () => Promise.any(urls.map(connect)),
    catch: (cause) => {
      const first = cause instanceof AggregateError ? cause.errors[0] : cause
      const reason = first instanceof Error ? first.message || first.name : String(first)
      return new ConfigError({ message: `${field}: cannot connect to ${urls.map(redactedUrl).join(", ")} (${reason})` })
    }
  }).pipe(Effect.flatMap((replicas) =>
    replicas >= wanted ? Effect.void : Effect.fail(
      new ConfigError({
        message: `TOLLGATE_REDIS_WAIT_REPLICAS: ${wanted} replicas asked for, but ${
          config.redisCluster === undefined ? "the Redis server has" : "a Redis Cluster master has only"
        } ${replicas} connected`
      })
    )
  ))
}

/**
 * The replicas connected to the server, or on a cluster to its least replicated master (`CLUSTER
 * NODES`: a replica's line names its master's id, and a replica whose link is down does not count).
 */
const fewestReplicas = async (client: ReturnType<typeof createClient>, cluster: boolean): Promise<number> => {
  if (!cluster) {
    const info = String(await client.sendCommand(["INFO", "replication"]))
    return Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? 0)
  }
  const nodes = String(await client.sendCommand(["CLUSTER", "NODES"])).trim().split("\n").map((line) => line.split(" "))
  const masters = nodes.filter((node) => node[2]!.includes("master") && !node[2]!.includes("fail") && node.length > 8)
  const replicasOf = (id: string) =>
    nodes.filter((node) => node[3] === id && (node[2]!.includes("slave") || node[2]!.includes("replica")) && node[7] === "connected").length
  return masters.length === 0 ? 0 : Math.min(...masters.map((master) => replicasOf(master[0]!)))
}

/** The URL without its password, fit for a log line. */
const redactedUrl = (url: string) => {
  const parsed = URL.parse(url)
  if (parsed === null || parsed.password === "") return url
  parsed.password = "***"
  return parsed.href
}
