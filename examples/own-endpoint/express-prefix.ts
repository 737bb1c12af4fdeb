/**
 * The Express host of `express.ts` with tollgate under a prefix of its own: `/payments` serves
 * tollgate's API (`/payments/api/v1/...`), `/payments/mcp`, the pages and the declared endpoints
 * (`/payments/v1/summarize`), and the links tollgate writes (402 bodies, the top-up) name the
 * prefix. Everything else stays Express's.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/express-prefix.ts`.
 */
import { Tollgate } from "@tollgate/server"
import express from "express"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate], basePath: "/payments" })
const app = express()
app.use("/payments", tollgate.nodeHandler)
app.use(express.json())
app.get("/health", (_request, response) => {
  response.json({ ok: true })
})
const server = app.listen(tollgate.config.port, "127.0.0.1")

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
