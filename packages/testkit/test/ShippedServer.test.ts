import { afterAll, describe, expect, it } from "vitest"
import { RedisServer, ShippedServer } from "../src/index.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

describe("ShippedServer: the pnpm start entry point on a free port, answering before start resolves", () => {
  it("dev mode: answers at once and hands over the demo credentials", { timeout: 90_000 }, async () => {
    const server = await ShippedServer.start()
    try {
      expect(server.credentials?.accountId).toBe("acct_demo")
      const response = await fetch(`${server.api}/api_keys/rate_limits`, {
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` }
      })
      expect(response.status).toBe(200)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  })

  it("production on Redis: keys provisioned with the shipped CLI are accepted", { timeout: 150_000 }, async () => {
    // Production lists its models; the local renderer needs no upstream.
    const config = { models: [ShippedServer.localRendererModel] }
    const server = await ShippedServer.start({ store: "redis", redisUrl: redis.url, signingKey: true, config })
    try {
      const response = await fetch(`${server.api}/api_keys`, {
        headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
      })
      expect(response.status).toBe(200)
    } finally {
      await server.stop()
    }
  })

  it("a server that cannot start rejects with its output", async () => {
    await expect(ShippedServer.start({ env: { PORT: "not-a-port" } })).rejects.toThrow(/invalid configuration: PORT/)
  })
})
