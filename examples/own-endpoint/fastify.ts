/**
 * Your own paid endpoints and tollgate's API in Fastify 5: a scope with no content-type parser
 * hands the raw request and response of the paid paths and `/api/*` to tollgate's node handler.
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
  const paid = (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack()
    tollgate.nodeHandler(request.raw, reply.raw)
  }
  scope.post("/v1/summarize", paid)
  scope.post("/v1/generate", paid)
  scope.all("/api/*", paid)
})
await app.listen({ port: tollgate.config.port, host: "127.0.0.1" })

process.once("SIGTERM", () => void app.close().then(() => tollgate.dispose()))
