/**
 * The fake JSON-RPC node of the peers benchmark: answers `eth_blockNumber` and `eth_chainId`
 * (single calls and batches) at once, from memory; other methods get -32601.
 * `node upstream.ts <port>`.
 */
import * as Http from "node:http"
import { serve } from "./Forward.ts"

const block = "0x1b4d3a2"
// Ethereum mainnet's, the network the benchmark calls: tollgate refuses to start on an upstream of another chain.
const chainId = "0x1"

const answer = (call: unknown) => {
  const id = typeof call === "object" && call !== null && "id" in call ? call.id : null
  if (typeof call !== "object" || call === null || !("method" in call) || typeof call.method !== "string") {
    return { jsonrpc: "2.0", id, error: { code: -32600, message: "Invalid Request" } }
  }
  if (call.method === "eth_blockNumber") return { jsonrpc: "2.0", id, result: block }
  if (call.method === "eth_chainId") return { jsonrpc: "2.0", id, result: chainId }
  return { jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } }
}

const server = Http.createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    let reply: unknown
    try {
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      reply = Array.isArray(body) ? body.map(answer) : answer(body)
    } catch {
      reply = { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }
    }
    const out = Buffer.from(JSON.stringify(reply))
    response.writeHead(200, { "content-type": "application/json", "content-length": out.length })
    response.end(out)
  })
})
serve(server, Number(process.argv[2] ?? 0))
