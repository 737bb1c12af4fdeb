/**
 * The floor of the peers benchmark: the least a proxy can do. node:http reads the body, undici's
 * pool forwards it, the upstream's body goes back as application/json. No auth, no store, no
 * parsing. `node raw-proxy.ts <port> <upstream url>`.
 */
import * as Http from "node:http"
import { forwarder, readBody, serve } from "./Forward.ts"

const upstream = forwarder(process.argv[3] ?? "")

const server = Http.createServer(async (request, response) => {
  try {
    const answer = await upstream.forward(await readBody(request))
    response.writeHead(answer.statusCode, { "content-type": "application/json", "content-length": answer.body.length })
    response.end(answer.body)
  } catch (error) {
    response.writeHead(502, { "content-type": "application/json" })
    response.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32603, message: `upstream: ${String(error)}` } }))
  }
})
serve(server, Number(process.argv[2] ?? 0), upstream.close)
