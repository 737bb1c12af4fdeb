/**
 * Embedding tollgate in Hono 4 with the fetch-style handler (Hono speaks Request/Response), served
 * on Node by @hono/node-server.
 * Run: `node examples/hono.ts` then `curl localhost:3000/api/v1/crypto/rpc/networks`.
 */
import { serve } from "@hono/node-server"
import { Handlers } from "@tollgate/http"
import { Hono } from "hono"
import type { AddressInfo } from "node:net"
import { app } from "./tollgate.ts"

export const start = async (port = 3000) => {
  const tollgate = Handlers.toWebHandler(app)
  const hono = new Hono()
  hono.get("/health", (c) => c.json({ ok: true }))
  hono.all("/api/*", (c) => tollgate.handler(c.req.raw))
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const listening = serve({ fetch: hono.fetch, port, hostname: "127.0.0.1" }, () => resolve(listening))
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise((resolve) => server.close(resolve))
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) await start()
