/**
 * Baseline for `bench/rpc.ts`: the least a JSON-RPC proxy can do with node:http. Every POST body
 * goes to `RPC_UPSTREAM` over a keep-alive agent and the reply comes back as it is.
 */
import * as Http from "node:http"

const port = Number(process.argv[2] ?? 0)
const upstream = new URL(process.env["RPC_UPSTREAM"] ?? "http://127.0.0.1:8545")
const agent = new Http.Agent({ keepAlive: true, maxSockets: 256 })

Http.createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    const body = Buffer.concat(chunks)
    const forward = Http.request(upstream, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": body.length }
    }, (reply) => {
      response.writeHead(reply.statusCode ?? 502, { "content-type": "application/json" })
      reply.pipe(response)
    })
    forward.on("error", () => {
      response.writeHead(502)
      response.end()
    })
    forward.end(body)
  })
}).listen(port, "127.0.0.1", () => console.log("listening"))
