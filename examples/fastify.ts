/**
 * Embedding tollgate in Fastify 5 under a prefix: Fastify leaves the body of /payments/* unread and
 * hands the raw request and response to tollgate's node handler.
 * Run: `node examples/fastify.ts`, then call `localhost:3000/payments/api/v1/...`.
 */
import { Tollgate } from "@tollgate/server"
import Fastify from "fastify"

export const start = async (port = 3000) => {
  const tollgate = await Tollgate.make({ basePath: "/payments" })
  const server = Fastify()
  server.get("/health", async () => ({ ok: true }))
  await server.register(async (scope) => {
    // tollgate reads the body itself: no Fastify parser may consume it first.
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser("*", (_request, _payload, done) => done(null))
    scope.all("/payments/*", (request, reply) => {
      reply.hijack()
      tollgate.nodeHandler(request.raw, reply.raw)
    })
  })
  await server.listen({ port, host: "127.0.0.1" })
  const address = server.server.address()
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : port}`,
    prefix: "/payments",
    tollgate,
    close: async () => {
      await server.close()
      await tollgate.dispose()
    }
  }
}

if (import.meta.main) console.log(`serving on ${(await start(Number(process.env["PORT"] ?? 3000))).url}/payments`)
