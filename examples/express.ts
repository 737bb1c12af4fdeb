/**
 * Embedding tollgate in Express 5 with the node-style handler: Express routes of its own first,
 * tollgate for everything under /api.
 * Run: `node examples/express.ts` then `curl localhost:3000/api/v1/crypto/rpc/networks`.
 */
import { Handlers } from "@tollgate/http"
import express from "express"
import type { AddressInfo } from "node:net"
import { app } from "./tollgate.ts"

export const start = async (port = 3000) => {
  const tollgate = await Handlers.toNodeHandler(app)
  const server = express()
  server.get("/health", (_request, response) => {
    response.json({ ok: true })
  })
  // tollgate's routes match the full path, so it is mounted at the root rather than under "/api".
  server.use((request, response) => tollgate.handler(request, response))
  const listening = server.listen(port, "127.0.0.1")
  await new Promise<void>((resolve) => listening.once("listening", resolve))
  return {
    port: (listening.address() as AddressInfo).port,
    close: async () => {
      await new Promise((resolve) => listening.close(resolve))
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) await start()
