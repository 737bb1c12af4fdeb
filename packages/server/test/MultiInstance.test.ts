import { CreditLedger, Jwt, Models, Money } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import { FreePort, RedisServer } from "@tollgate/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Cli from "../src/Cli.ts"

const main = Path.join(import.meta.dirname, "..", "src", "main.ts")

interface Instance {
  readonly url: string
  readonly stop: () => Promise<void>
}

const startInstance = async (env: Record<string, string>): Promise<Instance> => {
  const port = await FreePort.freePort()
  const child = ChildProcess.spawn(process.execPath, [main], {
    env: { PATH: process.env["PATH"] ?? "", PORT: String(port), TOLLGATE_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const deadline = Date.now() + 30_000
  while (!output.includes("listening")) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`instance did not start: ${output}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await exited
    }
  }
}

const acquired = await RedisServer.acquire()
const redis = "unavailable" in acquired ? undefined : acquired
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-multi-"))
let instances: ReadonlyArray<Instance> = []
let adminKey = ""
let inferenceKey = ""
let revocableKey = ""
let revocableKeyId = ""

beforeAll(async () => {
  if (redis === undefined) return
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))
  const config = { store: "redis" as const, redisUrl: redis.url, publicOrigin: "http://localhost:8787", signingKey }
  const seeded = await Effect.runPromise(Effect.gen(function*() {
    const auth = yield* Auth.Auth
    const ledger = yield* CreditLedger.CreditLedger
    const account = yield* auth.createAccount({ id: "acct_shared" })
    const inference = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "load" })
    const other = yield* auth.createAccount({ id: "acct_other" })
    const admin = yield* auth.createKey({ accountId: other.id, type: "ADMIN", description: "test admin" })
    const revocable = yield* auth.createKey({ accountId: other.id, type: "INFERENCE", description: "to revoke" })
    yield* ledger.grant({ accountId: account.id, amount: Money.usd(100), reference: "seed" })
    return { admin: admin.key, inference: inference.key, revocable: revocable.key, revocableId: revocable.record.id }
  }).pipe(Effect.provide(Cli.layer(config))))
  adminKey = seeded.admin
  inferenceKey = seeded.inference
  revocableKey = seeded.revocable
  revocableKeyId = seeded.revocableId
  const configFile = Path.join(dir, "config.json")
  // Production lists its models; the local renderer keeps the test free of an images upstream.
  const models = Models.defaults.filter((model) => model.id === "local-renderer")
  Fs.writeFileSync(configFile, JSON.stringify({ models, rateLimits: { accounts: { acct_shared: { image: { requests: 100 } } } } }))
  const env = { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis.url, TOLLGATE_SIGNING_KEY: signingKey, TOLLGATE_CONFIG: configFile }
  instances = await Promise.all([startInstance(env), startInstance(env)])
}, 90_000)

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()))
  await redis?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(redis === undefined)("Several instances on one Redis share every limit, balance and revocation", () => {
  it("500 concurrent requests across two server processes against a limit of 100: exactly 100 admitted", async () => {
    const generate = (instance: Instance) =>
      fetch(`${instance.url}/api/v1/image/generate`, {
        method: "POST",
        headers: { authorization: `Bearer ${inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
      }).then(async (response) => {
        await response.arrayBuffer()
        return response.status
      })
    const statuses = await Promise.all(Array.from({ length: 500 }, (_, i) => generate(instances[i % 2]!)))
    expect(statuses.filter((status) => status === 200)).toHaveLength(100)
    expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([])
  }, 120_000)

  it("a key revoked through one instance is refused by the other on its next request", async () => {
    const [first, second] = instances as [Instance, Instance]
    const limits = () => fetch(`${second.url}/api/v1/api_keys/rate_limits`, { headers: { authorization: `Bearer ${revocableKey}` } })
    expect((await limits()).status).toBe(200)
    const revoked = await fetch(`${first.url}/api/v1/api_keys?id=${revocableKeyId}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${adminKey}` }
    })
    expect(revoked.status).toBeLessThan(300)
    const after = await limits()
    expect(after.status).toBe(401)
    expect(await after.json()).toEqual({ error: expect.any(String) })
  })
})
