/**
 * Baseline for the networks benchmark: a bare node:http server answering the same bytes tollgate
 * answers on GET /api/v1/crypto/rpc/networks.
 */
import { Networks } from "@tollgate/core"
import * as Http from "node:http"

const body = Buffer.from(JSON.stringify({ networks: Networks.slugs }))
const port = Number(process.argv[2] ?? 0)

const server = Http.createServer((_request, response) => {
  response.writeHead(200, { "content-type": "application/json", "content-length": body.length })
  response.end(body)
})
server.listen(port, "127.0.0.1", () => console.log("listening"))
