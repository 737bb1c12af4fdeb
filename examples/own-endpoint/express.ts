/**
 * Your own paid endpoints and tollgate's API in Express 5: one middleware sends every path tollgate
 * serves (`tollgate.serves`: the paid paths, `/api`, `/mcp`, the pages and the portal's files) to
 * its node handler, mounted before any body parser (tollgate reads the body itself, after it has
 * checked the caller's credentials); the host's other routes stay Express's.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/express.ts`.
 */
import { Tollgate } from "@tollgate/server"
import express from "express"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const app = express()
app.use((request, response, next) => {
  if (tollgate.serves(request.path)) tollgate.nodeHandler(request, response)
  else next()
})
app.use(express.json())
app.get("/health", (_request, response) => {
  response.json({ ok: true })
})
const server = app.listen(tollgate.config.port, "127.0.0.1")

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
