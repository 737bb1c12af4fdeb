import { Anvil, RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

// One Redis per server: each test counts its server's script calls.
let anvil: Anvil.Anvil
const started: Array<{ readonly server: ShippedServer.ShippedServer; readonly redis: RedisServer.RedisServer }> = []

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
}, 60_000)

afterAll(async () => {
  for (const { redis, server } of started) {
    await server.stop()
    await redis.stop()
  }
  await anvil?.stop()
})

/** A dev-mode server on a fresh Redis; `user` makes it connect as that ACL user of the Redis. */
const serve = async (options: { readonly env?: Record<string, string>; readonly user?: ReadonlyArray<string> } = {}) => {
  const redis = await RedisServer.start()
  let url = redis.url
  if (options.user !== undefined) {
    await RedisServer.command(redis.url, "ACL", "SETUSER", "tollgate", "on", ">secret", "~*", "&*", ...options.user)
    url = `redis://tollgate:secret@127.0.0.1:${redis.port}`
  }
  const server = await ShippedServer.start({
    store: "redis",
    redisUrl: url,
    env: options.env ?? {},
    config: { rpc: { upstreams: { "base-mainnet": [anvil.url] } } }
  })
  started.push({ server, redis })
  return { server, redis }
}

/** Two paid RPC calls with the demo key: what the second was charged, by the balance headers. */
const twoPaidCalls = async (server: ShippedServer.ShippedServer) => {
  const call = () =>
    fetch(`${server.api}/crypto/rpc/base-mainnet`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${server.credentials!.inferenceKey}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
    })
  const first = await call()
  const second = await call()
  expect([first.status, second.status]).toEqual([200, 200])
  expect((await second.json() as { id: number }).id).toBe(1)
  const credits = Number(second.headers.get("x-service-rpc-credits"))
  expect(credits).toBeGreaterThan(0)
  return Number(first.headers.get("x-service-balance-usd")) - Number(second.headers.get("x-service-balance-usd"))
}

describe("The shipped server runs the paid path's Redis scripts as Functions where Redis offers them, else as EVALSHA, and says which at start", () => {
  it(
    "a Redis 7 that allows FUNCTION: the paid calls go as FCALL, the admission library is loaded, and the log says Functions",
    async () => {
      // The choice of Functions is an INFO line; the shipped server's tests log from WARN.
      const { redis, server } = await serve({ env: { TOLLGATE_LOG_LEVEL: "info" } })
      const before = await RedisServer.scriptCalls(redis.url)
      expect(await twoPaidCalls(server)).toBeGreaterThan(0)
      expect((await RedisServer.scriptCalls(redis.url)).fcall - before.fcall).toBeGreaterThanOrEqual(4)
      expect(server.output()).toMatch(/Redis scripts run as Functions \(FCALL\): tollgate_[a-z]+_[0-9a-f]{12}/)
      const libraries = String(await RedisServer.command(redis.url, "FUNCTION", "LIST", "LIBRARYNAME", "tollgate_admission_*"))
      expect(libraries).toMatch(/tollgate_admission_[0-9a-f]{12}/)
    },
    60_000
  )

  it("an ACL user without FUNCTION: the same calls are served and charged the same by EVALSHA, and the log says why", async () => {
    const functions = started[0]!
    const { redis, server } = await serve({ user: ["+@all", "-function"] })
    expect(await twoPaidCalls(server)).toBe(await twoPaidCalls(functions.server))
    expect((await RedisServer.scriptCalls(redis.url)).fcall).toBe(0)
    expect(server.output()).toContain("Redis scripts run as EVALSHA, not Functions: NOPERM")
  }, 60_000)

  it("TOLLGATE_REDIS_FUNCTIONS=off: EVALSHA, no library loaded, and the log says Functions are switched off", async () => {
    const { redis, server } = await serve({ env: { TOLLGATE_REDIS_FUNCTIONS: "off" } })
    expect(await twoPaidCalls(server)).toBeGreaterThan(0)
    expect((await RedisServer.scriptCalls(redis.url)).fcall).toBe(0)
    expect(await RedisServer.command(redis.url, "FUNCTION", "LIST")).toEqual([])
    expect(server.output()).toContain("Redis scripts run as EVALSHA, not Functions: Functions are switched off")
  }, 60_000)
})
