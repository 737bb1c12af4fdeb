/**
 * Your own paid endpoints and tollgate's API as one fetch handler, `(Request) => Promise<Response>`:
 * what a Next.js route handler exports (`export const POST = tollgate.fetch`), and what
 * `Bun.serve({ fetch })` and `Deno.serve(fetch)` take. Served on Node here by @hono/node-server.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/fetch.ts`.
 */
import { serve } from "@hono/node-server"
import { Tollgate } from "@tollgate/server"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const server = serve({ fetch: tollgate.fetch, port: tollgate.config.port, hostname: "127.0.0.1" })

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
