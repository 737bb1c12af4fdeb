/**
 * Embedding tollgate in plain node:http with the node-style handler.
 * Run: `node examples/node-http.ts` then `curl localhost:3000/api/v1/crypto/rpc/networks`.
 */
import { Handlers } from "@tollgate/http"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { app } from "./tollgate.ts"

export const start = async (port = 3000) => {
  const tollgate = await Handlers.toNodeHandler(app)
  const server = Http.createServer((request, response) => tollgate.handler(request, response))
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise((resolve) => server.close(resolve))
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) await start()
