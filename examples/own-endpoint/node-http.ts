/**
 * Your own paid endpoints and tollgate's API in plain node:http: one handler serves
 * `POST /v1/summarize`, `POST /v1/generate` (see `endpoints.ts`) and `/api/v1/...` on one ledger.
 * Run: `PORT=3000 TOLLGATE_DEV_CREDENTIALS_FILE=creds.json node examples/own-endpoint/node-http.ts`.
 */
import { Tollgate } from "@tollgate/server"
import * as Http from "node:http"
import { generate, summarize } from "./endpoints.ts"

const tollgate = await Tollgate.make({ endpoints: [summarize, generate] })
const server = Http.createServer(tollgate.nodeHandler)
server.listen(tollgate.config.port, "127.0.0.1")

process.once("SIGTERM", () => server.close(() => void tollgate.dispose()))
