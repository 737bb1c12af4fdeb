/**
 * Embedding tollgate in Hono 4 under a prefix with the fetch handler (Hono speaks
 * Request/Response), served on Node by @hono/node-server.
 * Run: `node examples/hono.ts`, then call `localhost:3000/payments/api/v1/...`.
 */
import { serve } from "@hono/node-server"
import { Tollgate } from "@tollgate/server"
import { Hono } from "hono"
import type { AddressInfo } from "node:net"

export const start = async (port = 3000) => {
  const tollgate = await Tollgate.make({ basePath: "/payments" })
  const app = new Hono()
  app.get("/health", (c) => c.json({ ok: true }))
  app.all("/payments/*", (c) => tollgate.fetch(c.req.raw))
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const listening = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }, () => resolve(listening))
  })
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    prefix: "/payments",
    tollgate,
    close: async () => {
      await new Promise((resolve) => server.close(resolve))
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) console.log(`serving on ${(await start(Number(process.env["PORT"] ?? 3000))).url}/payments`)
