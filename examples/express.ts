/**
 * Embedding tollgate in Express 5 under a prefix: Express keeps its own routes, tollgate answers
 * everything under /payments (so the API is at /payments/api/v1/...). Mounting at "/api" instead
 * needs no basePath: tollgate routes on the full path the client sent.
 * Run: `node examples/express.ts` (`PORT` sets the port, default 3000), then call `localhost:3000/payments/api/v1/...`.
 */
import { Tollgate } from "@tollgate/server"
import express from "express"
import type { AddressInfo } from "node:net"

export const start = async (port = 3000) => {
  const tollgate = await Tollgate.make({ basePath: "/payments" })
  const app = express()
  app.get("/health", (_request, response) => {
    response.json({ ok: true })
  })
  app.use("/payments", tollgate.nodeHandler)
  const server = app.listen(port, "127.0.0.1")
  await new Promise<void>((resolve) => server.once("listening", resolve))
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
