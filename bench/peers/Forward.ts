/**
 * What the peer servers share, so the raw proxy and the Express gateway reach the upstream the same
 * way and differ only in what they do before forwarding: an undici keep-alive `Pool`, a body
 * reader, and a stop when the harness goes away (SIGTERM, or its stdin pipe closing).
 */
import type * as Http from "node:http"
import { Pool } from "undici"

export interface Forwarder {
  readonly forward: (body: Buffer) => Promise<{ readonly statusCode: number; readonly body: Buffer }>
  readonly close: () => Promise<void>
}

/** POSTs a JSON body to the upstream over keep-alive connections. */
export const forwarder = (upstreamUrl: string): Forwarder => {
  const url = new URL(upstreamUrl)
  const path = url.pathname + url.search
  const pool = new Pool(url.origin, { connections: 128, keepAliveTimeout: 60_000 })
  return {
    forward: async (body) => {
      const response = await pool.request({
        path,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": String(body.length) },
        body
      })
      return { statusCode: response.statusCode, body: Buffer.from(await response.body.arrayBuffer()) }
    },
    close: () => pool.close()
  }
}

/** The whole request body as one Buffer. */
export const readBody = (request: Http.IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    request.on("error", reject)
  })

/** Listens on loopback at `port`, prints `listening <url>`, and stops with the harness or on a signal. */
export const serve = (server: Http.Server, port: number, onClose: () => Promise<void> = async () => {}) => {
  server.keepAliveTimeout = 60_000
  server.listen(port, "127.0.0.1", () => {
    const address = server.address()
    console.log(`listening http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : port}`)
  })
  let closing = false
  const stop = async () => {
    if (closing) return
    closing = true
    server.closeAllConnections()
    server.close()
    try {
      await onClose()
    } finally {
      process.exit(0)
    }
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
  // Started by the harness (BENCH_CHILD=1): its stdin pipe closing means the harness is gone.
  if (process.env["BENCH_CHILD"] === "1") {
    process.stdin.on("end", stop)
    process.stdin.on("error", stop)
    process.stdin.resume()
  }
}
