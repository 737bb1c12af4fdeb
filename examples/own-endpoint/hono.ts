/**
 * Your own paid endpoints and tollgate's API in Hono 4: Hono speaks Request/Response, so the paid
 * paths and `/api/*` go to tollgate's fetch handler. Served on Node by @hono/node-server.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/hono.ts`.
 */
import { serve } from "@hono/node-server"
import { Tollgate } from "@tollgate/server"
import { Hono } from "hono"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const app = new Hono()
app.get("/health", (c) => c.json({ ok: true }))
app.post("/v1/summarize", (c) => tollgate.fetch(c.req.raw))
app.post("/v1/generate", (c) => tollgate.fetch(c.req.raw))
app.all("/api/*", (c) => tollgate.fetch(c.req.raw))
const server = serve({ fetch: app.fetch, port: tollgate.config.port, hostname: "127.0.0.1" })

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
