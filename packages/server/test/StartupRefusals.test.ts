/**
 * Configurations that would lose money or hide a mistake stop the shipped server at start: the
 * `pnpm start` entry point exits 1 after one JSON line naming the field. The one unsafe setting
 * that is not refused, production without `x402.payTo`, turns wallet payments off instead.
 *
 * Every test spawns its own server process and shares nothing with the others, so every suite is
 * concurrent: the file takes about as long as its slowest starts, not their sum.
 */
import { generateKeyPairSigner } from "@solana/kit"
import { Jwt, X402 } from "@tollgate/core"
import { FreePort, RedisServer, SolanaRpc } from "@tollgate/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const main = Path.join(import.meta.dirname, "..", "src", "main.ts")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-refusals-"))
const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))

afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const configFile = (name: string, content: unknown) => {
  const file = Path.join(dir, `${name}.json`)
  Fs.writeFileSync(file, JSON.stringify(content))
  return file
}

const spawn = (env: Record<string, string>) => {
  const child = ChildProcess.spawn(process.execPath, [main], {
    env: { PATH: process.env["PATH"] ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, exited, stdout: () => stdout, stderr: () => stderr }
}

/** Starts the server and waits until it listens. */
const listening = async (env: Record<string, string>) => {
  const port = await FreePort.freePort()
  const running = spawn({ PORT: String(port), ...env })
  const deadline = Date.now() + 60_000
  while (!running.stdout().includes("listening")) {
    if (Date.now() > deadline || running.child.exitCode !== null) throw new Error(`server did not start: ${running.stdout()}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return { port, running }
}

/** Runs the server to its exit and returns the code and the lines it printed. */
const refused = async (env: Record<string, string>) => {
  const running = spawn({ PORT: String(await FreePort.freePort()), ...env })
  const code = await running.exited
  return { code, lines: running.stdout().trim().split("\n"), stderr: running.stderr() }
}

const expectOneLine = (result: Awaited<ReturnType<typeof refused>>, field: string) => {
  expect(result.code).toBe(1)
  expect(result.stderr).toBe("")
  expect(result.lines).toHaveLength(1)
  const line = JSON.parse(result.lines[0]!) as { message: string; level: string }
  expect(line.level).toBe("FATAL")
  expect(line.message).toContain(`${field}: `)
  expect(line.message).not.toMatch(/\n| {4}at /)
  return line.message
}

/** A text model served by an upstream, as production lists them. */
const upstreamModel = { id: "house-model", type: "text", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] }
const housePrice = { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } }

describe.concurrent("An unknown key in the config file stops the server, naming the key", () => {
  it("{\"modelz\": []} is refused at start", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("unknown-key", { modelz: [] }) })
    expect(expectOneLine(result, "TOLLGATE_CONFIG.modelz")).toContain("unknown key")
  })

  it("a misspelt key inside a section is refused too", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("unknown-nested", { chat: { systemPromt: "hi" } }) })
    expectOneLine(result, "TOLLGATE_CONFIG.chat.systemPromt")
  })
})

describe.concurrent("A bad rate of an operator's own kind (rateLimits.kinds) stops the server, naming the field", () => {
  it("a negative requests per minute is refused at start", async () => {
    const result = await refused({
      TOLLGATE_CONFIG: configFile("kind-rate", { rateLimits: { kinds: { summaries: { default: { requests: -1 } } } } })
    })
    expectOneLine(result, "TOLLGATE_CONFIG.rateLimits.kinds.summaries.default.requests")
  })

  it("a tier that does not exist, or a rate a custom kind does not have, is refused as an unknown key", async () => {
    const tier = await refused({
      TOLLGATE_CONFIG: configFile("kind-tier", { rateLimits: { kinds: { summaries: { premium: { requests: 5 } } } } })
    })
    expect(expectOneLine(tier, "TOLLGATE_CONFIG.rateLimits.kinds.summaries.premium")).toContain("unknown key")
    const credits = await refused({
      TOLLGATE_CONFIG: configFile("kind-credits", { rateLimits: { kinds: { summaries: { default: { credits: 5 } } } } })
    })
    expect(expectOneLine(credits, "TOLLGATE_CONFIG.rateLimits.kinds.summaries.default.credits")).toContain("unknown key")
  })
})

describe.concurrent("A settlement grouping delay outside 0 to 100 ms stops the server, naming redis.settlementGroupMs", () => {
  it("{\"redis\": {\"settlementGroupMs\": 250}} is refused at start", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("group-too-long", { redis: { settlementGroupMs: 250 } }) })
    expect(expectOneLine(result, "TOLLGATE_CONFIG.redis.settlementGroupMs")).toContain("Expected a value between 0 and 100")
  })

  it("a fraction of a millisecond is refused too", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("group-fraction", { redis: { settlementGroupMs: 0.5 } }) })
    expectOneLine(result, "TOLLGATE_CONFIG.redis.settlementGroupMs")
  })
})

describe.concurrent("An admission grouping delay outside 0 to 20 ms stops the server, naming redis.admissionGroupMs", () => {
  it("{\"redis\": {\"admissionGroupMs\": 50}} is refused at start", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("admission-group-too-long", { redis: { admissionGroupMs: 50 } }) })
    expect(expectOneLine(result, "TOLLGATE_CONFIG.redis.admissionGroupMs")).toContain("Expected a value between 0 and 20")
  })
})

describe.concurrent("A webhook endpoint that could not be signed for or reached stops the server, naming the field", () => {
  it("a secret that is not whsec_ and base64 is refused at start", async () => {
    const result = await refused({
      TOLLGATE_CONFIG: configFile("webhook-secret", {
        webhooks: { endpoints: [{ url: "https://hooks.example/tollgate", secret: "hunter2" }] }
      })
    })
    expect(expectOneLine(result, "TOLLGATE_CONFIG.webhooks.endpoints.0.secret")).toContain("whsec_")
  })

  it("an event type that does not exist is refused at start", async () => {
    const secret = `whsec_${Buffer.from("tollgate startup webhook secret!").toString("base64")}`
    const result = await refused({
      TOLLGATE_CONFIG: configFile("webhook-event", {
        webhooks: { endpoints: [{ url: "https://hooks.example/tollgate", secret, events: ["balance.low"] }] }
      })
    })
    expectOneLine(result, "TOLLGATE_CONFIG.webhooks.endpoints.0.events.0")
  })
})

describe.concurrent("A trustedProxies entry that is not an address or CIDR range stops the server, naming it", () => {
  it("TOLLGATE_TRUSTED_PROXIES=10.0.0.0/8,proxy.internal is refused at start", async () => {
    const result = await refused({ TOLLGATE_TRUSTED_PROXIES: "10.0.0.0/8,proxy.internal" })
    expect(expectOneLine(result, "TOLLGATE_TRUSTED_PROXIES")).toContain("proxy.internal")
  })
})

describe.concurrent("A model with no price stops the server, naming the price to add", () => {
  it("a text model absent from prices.chat is refused at start, not at its first request", async () => {
    const result = await refused({ TOLLGATE_CONFIG: configFile("unpriced", { models: [upstreamModel] }) })
    expectOneLine(result, "TOLLGATE_CONFIG.prices.chat.house-model")
  })
})

describe.concurrent("Production (a signing key set) lists its models: the local dev models never charge real money", () => {
  it("no models section with a signing key is refused", async () => {
    const result = await refused({ TOLLGATE_SIGNING_KEY: signingKey })
    expectOneLine(result, "TOLLGATE_CONFIG.models")
  })
})

describe.concurrent("Signing keys that cannot verify stop the server at start, naming TOLLGATE_PREVIOUS_SIGNING_KEYS", () => {
  it("text that is no PEM is refused", async () => {
    const result = await refused({ TOLLGATE_SIGNING_KEY: signingKey, TOLLGATE_PREVIOUS_SIGNING_KEYS: "old-key" })
    expect(expectOneLine(result, "TOLLGATE_PREVIOUS_SIGNING_KEYS")).toContain("expected one or more PEMs")
  })

  it("a PEM that is not an Ed25519 key is refused, naming which one", async () => {
    const rsa = ChildProcess.execFileSync(process.execPath, [
      "-e",
      "process.stdout.write(require('node:crypto').generateKeyPairSync('rsa',{modulusLength:2048}).publicKey.export({type:'spki',format:'pem'}))"
    ]).toString()
    const result = await refused({ TOLLGATE_SIGNING_KEY: signingKey, TOLLGATE_PREVIOUS_SIGNING_KEYS: `${signingKey}\n${rsa}` })
    expect(expectOneLine(result, "TOLLGATE_PREVIOUS_SIGNING_KEYS")).toContain("PEM 2 (PUBLIC KEY) is not an Ed25519 key")
  })

  it("previous keys without a signing key (dev mode) are refused", async () => {
    const result = await refused({ TOLLGATE_PREVIOUS_SIGNING_KEYS: signingKey })
    expectOneLine(result, "TOLLGATE_PREVIOUS_SIGNING_KEYS")
  })
})

describe.concurrent("Production never receives wallet payments on the public dev account", () => {
  it("x402.payTo.evm set to anvil's dev account is refused", async () => {
    const result = await refused({
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_CONFIG: configFile("dev-pay-to", {
        models: [upstreamModel],
        prices: housePrice,
        x402: { payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" } }
      })
    })
    expectOneLine(result, "TOLLGATE_CONFIG.x402.payTo.evm")
  })
})

describe.concurrent("Production with x402.payTo but nothing to settle its payments stops the server, naming x402.payTo", () => {
  it("payTo.evm with neither the relayer and its RPC URL, a Solana fee payer, nor a hosted facilitator is refused", async () => {
    const result = await refused({
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_CONFIG: configFile("pay-to-unsettled", {
        models: [upstreamModel],
        prices: housePrice,
        x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" } }
      })
    })
    expect(expectOneLine(result, "TOLLGATE_CONFIG.x402.payTo")).toContain("x402.relayerKey and x402.evmRpcUrl")
  })

  it("a relayer key without the RPC URL it submits through settles nothing either", async () => {
    const result = await refused({
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_CONFIG: configFile("pay-to-half-relayer", {
        models: [upstreamModel],
        prices: housePrice,
        x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" }, relayerKey: `0x${"ab".repeat(32)}` }
      })
    })
    expectOneLine(result, "TOLLGATE_CONFIG.x402.payTo")
  })
})

describe.concurrent("An unreachable Redis at start is one line, not a stack trace", () => {
  it("a Redis URL where nothing listens stops the server naming TOLLGATE_REDIS_URL", async () => {
    const port = await FreePort.freePort()
    const result = await refused({ TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: `redis://127.0.0.1:${port}` })
    expectOneLine(result, "TOLLGATE_REDIS_URL")
  })
})

describe.concurrent("Waiting for Redis replicas that are not there stops the server, naming TOLLGATE_REDIS_WAIT_REPLICAS", () => {
  it("TOLLGATE_REDIS_WAIT_REPLICAS=1 on a Redis server without a replica is refused at start", async () => {
    const redis = await RedisServer.start()
    try {
      const result = await refused({ TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis.url, TOLLGATE_REDIS_WAIT_REPLICAS: "1" })
      expect(expectOneLine(result, "TOLLGATE_REDIS_WAIT_REPLICAS")).toContain("0 connected")
    } finally {
      await redis.stop()
    }
  })

  it("TOLLGATE_REDIS_WAIT_REPLICAS=1 with memory stores is refused at start", async () => {
    expectOneLine(await refused({ TOLLGATE_REDIS_WAIT_REPLICAS: "1" }), "TOLLGATE_REDIS_WAIT_REPLICAS")
  })
})

describe.concurrent("Production without x402.payTo takes no wallet payments: no accepts, and the top-up answers 503", () => {
  it("the 402 offers no payment and the top-up says wallet payments are not configured", async () => {
    const { port, running } = await listening({
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_CONFIG: configFile("no-pay-to", { models: [upstreamModel], prices: housePrice })
    })
    try {
      const paid = await fetch(`http://127.0.0.1:${port}/api/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "house-model", messages: [{ role: "user", content: "hi" }] })
      })
      expect(paid.status).toBe(402)
      const body = await paid.json() as { accepts: ReadonlyArray<unknown>; authOptions: unknown }
      expect(body.accepts).toEqual([])
      expect(JSON.stringify(body)).not.toContain("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
      const topUp = await fetch(`http://127.0.0.1:${port}/api/v1/x402/top-up`, { method: "POST" })
      expect(topUp.status).toBe(503)
      expect((await topUp.json() as { error: string }).error).toMatch(/Wallet payments are not configured/)
    } finally {
      running.child.kill("SIGTERM")
      await running.exited
    }
  })
})

describe.concurrent("Every line the server prints is JSON on stdout", () => {
  it("the dev keys and the listening line are JSON objects with a message and a level", async () => {
    const port = await FreePort.freePort()
    const running = spawn({ PORT: String(port) })
    try {
      const deadline = Date.now() + 60_000
      while (!running.stdout().includes("listening")) {
        if (Date.now() > deadline || running.child.exitCode !== null) throw new Error(`server did not start: ${running.stdout()}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      await fetch(`http://127.0.0.1:${port}/api/v1/crypto/rpc/networks`)
      await new Promise((resolve) => setTimeout(resolve, 150))
    } finally {
      running.child.kill("SIGTERM")
      await running.exited
    }
    const lines = running.stdout().trim().split("\n").map((line) =>
      JSON.parse(line) as { message: string; level: string; annotations: Record<string, unknown> }
    )
    expect(running.stderr()).toBe("")
    expect(lines.map((line) => line.message)).toEqual(
      expect.arrayContaining([expect.stringContaining("dev mode"), expect.stringContaining("listening"), "request"])
    )
    const devKeys = lines.find((line) => line.message.startsWith("dev mode"))!
    expect(devKeys.annotations).toEqual({ accountId: "acct_demo", adminKey: expect.any(String), inferenceKey: expect.any(String) })
  })
})

describe.concurrent("Production that settles only Solana offers no Base entry, whose every payment would be refused", () => {
  it("payTo.evm and payTo.solana with x402.solana alone: the top-up's 402 offers Solana only", async () => {
    const { port, running } = await listening({
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_CONFIG: configFile("solana-only", {
        models: [upstreamModel],
        prices: housePrice,
        x402: {
          payTo: { evm: "0x1111111111111111111111111111111111111111", solana: (await generateKeyPairSigner()).address },
          solana: { rpcUrl: "http://127.0.0.1:9", feePayerKey: Array.from(SolanaRpc.keyPairBytes()) }
        }
      })
    })
    try {
      const topUp = await fetch(`http://127.0.0.1:${port}/api/v1/x402/top-up`, { method: "POST" })
      expect(topUp.status).toBe(402)
      const body = await topUp.json() as { accepts: ReadonlyArray<{ network: string }> }
      expect(body.accepts.map((entry) => entry.network)).toEqual([X402.SOLANA_MAINNET])
    } finally {
      running.child.kill("SIGTERM")
      await running.exited
    }
  })
})
