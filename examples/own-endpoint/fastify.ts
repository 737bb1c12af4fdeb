/**
 * Your own paid endpoints and tollgate's API in Fastify 5: a scope with no content-type parser
 * hands the raw request and response of every path tollgate serves (`tollgate.serves`: the paid
 * paths, `/api`, `/mcp`, the pages and the portal's files) to tollgate's node handler; Fastify's
 * own routes, more specific than the scope's wildcard, stay Fastify's.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/fastify.ts`.
 */
import { Tollgate } from "@tollgate/server"
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const app = Fastify()
app.get("/health", async () => ({ ok: true }))
await app.register(async (scope) => {
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser("*", (_request, _payload, done) => done(null))
  scope.all("/*", (request: FastifyRequest, reply: FastifyReply) => {
    if (!tollgate.serves(request.url)) return reply.callNotFound()
    reply.hijack()
    tollgate.nodeHandler(request.raw, reply.raw)
  })
})
await app.listen({ port: tollgate.config.port, host: "127.0.0.1" })

process.once("SIGTERM", () => void app.close().then(() => tollgate.dispose()))
