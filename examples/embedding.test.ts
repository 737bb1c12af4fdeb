import { Networks } from "@tollgate/core"
import { describe, expect, it } from "vitest"
import * as Express from "./express.ts"
import * as Fastify from "./fastify.ts"
import * as Hono from "./hono.ts"
import * as NodeHttp from "./node-http.ts"

describe.each([
  ["node:http", NodeHttp.start],
  ["Express 5", Express.start],
  ["Fastify 5", Fastify.start],
  ["Hono 4", Hono.start]
] as const)("Embedding: %s mounts tollgate and serves its routes", (_host, start) => {
  it("GET /api/v1/crypto/rpc/networks answers through the host", async () => {
    const host = await start(0)
    try {
      const response = await fetch(`http://127.0.0.1:${host.port}/api/v1/crypto/rpc/networks`)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-service-version")).toMatch(/.+/)
      expect(await response.json()).toEqual({ networks: Networks.slugs })
      const missing = await fetch(`http://127.0.0.1:${host.port}/api/v1/nope`)
      expect(missing.status).toBe(404)
      expect(await missing.json()).toEqual({ error: expect.any(String) })
    } finally {
      await host.close()
    }
  })
})
