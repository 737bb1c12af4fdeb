/**
 * The gateway a user would build instead of tollgate, with the usual libraries on Express 5:
 * `express.json()` parses the body; jose verifies the `Authorization: Bearer` EdDSA JWT on every
 * request (no cache); rate-limiter-flexible's `RateLimiterRedis` (ioredis) consumes one point per
 * JWT subject (1e9 points a minute, so it never refuses but makes its Redis round trip); `INCRBY`
 * on the subject's credit counter (a second round trip), sent as `x-credits`; the body is forwarded
 * as the raw proxy does it.
 * `node peer-gateway.ts <port> <upstream url>` with `REDIS_URL` and `JWT_PUBLIC_KEY` (SPKI PEM).
 */
import express from "express"
import { Redis } from "ioredis"
import * as Jose from "jose"
import * as Http from "node:http"
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible"
import { forwarder, serve } from "./Forward.ts"

const upstream = forwarder(process.argv[3] ?? "")
const publicKey = await Jose.importSPKI(process.env["JWT_PUBLIC_KEY"] ?? "", "EdDSA")
const redis = new Redis(process.env["REDIS_URL"] ?? "", { maxRetriesPerRequest: 1 })
await new Promise((resolve, reject) => {
  redis.once("ready", resolve)
  redis.once("error", reject)
})
const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "peer:rl", points: 1e9, duration: 60 })

const rpcError = (response: express.Response, status: number, code: number, message: string) =>
  response.status(status).json({ jsonrpc: "2.0", id: null, error: { code, message } })

const authenticate: express.RequestHandler = async (request, response, next) => {
  const bearer = /^Bearer (.+)$/.exec(request.get("authorization") ?? "")
  if (bearer === null) return rpcError(response, 401, -32001, "missing bearer token")
  try {
    const { payload } = await Jose.jwtVerify(bearer[1]!, publicKey, { algorithms: ["EdDSA"] })
    if (typeof payload.sub !== "string" || payload.sub === "") throw new Error("no sub")
    response.locals["subject"] = payload.sub
  } catch {
    return rpcError(response, 401, -32001, "invalid token")
  }
  next()
}

const rateLimit: express.RequestHandler = async (_request, response, next) => {
  try {
    const result = await limiter.consume(response.locals["subject"], 1)
    response.set("x-ratelimit-remaining", String(result.remainingPoints))
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error
    response.set("retry-after", String(Math.ceil(error.msBeforeNext / 1000)))
    return rpcError(response, 429, -32005, "rate limited")
  }
  next()
}

const chargeCredits: express.RequestHandler = async (_request, response, next) => {
  const used = await redis.incrby(`peer:credits:${response.locals["subject"]}`, 1)
  response.set("x-credits", String(used))
  next()
}

const proxy: express.RequestHandler = async (request, response) => {
  if (request.body === undefined) return rpcError(response, 400, -32700, "expected a JSON body")
  try {
    const answer = await upstream.forward(Buffer.from(JSON.stringify(request.body)))
    response.status(answer.statusCode).type("application/json").send(answer.body)
  } catch (error) {
    rpcError(response, 502, -32603, `upstream: ${String(error)}`)
  }
}

const app = express()
app.post("/{*path}", express.json(), authenticate, rateLimit, chargeCredits, proxy)

serve(Http.createServer(app), Number(process.argv[2] ?? 0), async () => {
  await upstream.close()
  redis.disconnect()
})
