/**
 * Embedding tollgate in plain node:http, at the root: every request goes to tollgate.
 * Run: `node examples/node-http.ts`, then call `localhost:3000/api/v1/...` with the INFERENCE key
 * it prints.
 */
import { Tollgate } from "@tollgate/server"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export const start = async (port = 3000) => {
  const tollgate = await Tollgate.make()
  const server = Http.createServer(tollgate.nodeHandler)
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    prefix: "",
    tollgate,
    close: async () => {
      await new Promise((resolve) => server.close(resolve))
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) console.log(`serving on ${(await start(Number(process.env["PORT"] ?? 3000))).url}`)
