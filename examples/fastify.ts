/**
 * Embedding tollgate in Fastify 5: Fastify leaves the body unread for /api/* and hands the raw
 * request and response to tollgate's node-style handler.
 * Run: `node examples/fastify.ts` then `curl localhost:3000/api/v1/crypto/rpc/networks`.
 */
import { Handlers } from "@tollgate/http"
import Fastify from "fastify"
import { app } from "./tollgate.ts"

export const start = async (port = 3000) => {
  const tollgate = await Handlers.toNodeHandler(app)
  const server = Fastify()
  server.removeAllContentTypeParsers()
  server.addContentTypeParser("*", (_request, _payload, done) => done(null))
  server.all("/api/*", (request, reply) => {
    reply.hijack()
    tollgate.handler(request.raw, reply.raw)
  })
  await server.listen({ port, host: "127.0.0.1" })
  const address = server.server.address()
  return {
    port: typeof address === "object" && address !== null ? address.port : port,
    close: async () => {
      await server.close()
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) await start()
