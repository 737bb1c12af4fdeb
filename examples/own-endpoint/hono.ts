/**
 * Your own paid endpoints and tollgate's API in Hono 4: Hono speaks Request/Response, so one
 * middleware sends every path tollgate serves (`tollgate.serves`: the paid paths, `/api`, `/mcp`,
 * the pages and the portal's files) to tollgate's fetch handler. Served on Node by
 * @hono/node-server.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/hono.ts`.
 */
import { serve } from "@hono/node-server"
import { Tollgate } from "@tollgate/server"
import { Hono } from "hono"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const app = new Hono()
app.use(async (c, next) => {
  if (tollgate.serves(c.req.path)) return tollgate.fetch(c.req.raw)
  await next()
})
app.get("/health", (c) => c.json({ ok: true }))
const server = serve({ fetch: app.fetch, port: tollgate.config.port, hostname: "127.0.0.1" })

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
