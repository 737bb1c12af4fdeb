/**
 * Authentication: verifications per second of `Auth.authenticate` (memory and Redis stores) for
 * an API key (JWT + one-round-trip revocation/account lookup), a SIWX EIP-191 header and a SIWX
 * ed25519 header (single-use nonces: every header is fresh), against the least a verifier could
 * do: `jose.jwtVerify` alone (plus one raw GET on Redis), viem `verifyMessage` (what the official
 * x402 server calls) and node:crypto ed25519 verify over the same text. Auth does strictly more
 * (parsing, origin/chain/time checks, canonical text, nonce claim, account upsert), so the ratio
 * says what that costs.
 */
import { NodeRedis } from "@effect/platform-node"
import { Auth, AuthStore, Jwt, Siwx } from "@tollgate/core"
import { AuthStoreRedis } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { createClient } from "redis"
import { verifyMessage } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { table } from "./Harness.ts"

const N = Number(process.env["AUTH_N"] ?? 2_000)
const CONCURRENCY = 32
const origin = "http://localhost:8787"

const server = await RedisServer.start()
const client = createClient({ url: server.url })
await client.connect()
const signingKey = await Effect.runPromise(Jwt.generateSigningKey)

const authOver = (store: Layer.Layer<AuthStore.AuthStore>) =>
  ManagedRuntime.make(Auth.layer({ signingKey, publicOrigin: origin }).pipe(Layer.provide(store)))
const runtimes = {
  memory: authOver(AuthStore.layerMemory),
  redis: authOver(AuthStoreRedis.layerRedis.pipe(Layer.provide(Layer.orDie(NodeRedis.layer({ url: server.url })))))
}

/** Runs `op` over every input with CONCURRENCY in flight; returns operations per second. */
const throughput = async <A>(inputs: ReadonlyArray<A>, op: (input: A) => Promise<unknown>): Promise<number> => {
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < inputs.length) await op(inputs[next++]!)
  }))
  return inputs.length / ((performance.now() - started) / 1000)
}

const now = Date.now()
const evm = privateKeyToAccount(generatePrivateKey())
const evmMessages = await Promise.all(Array.from({ length: N }, async (_, i) => {
  const message = createSiweMessage({
    domain: "localhost:8787",
    address: evm.address,
    uri: `${origin}/`,
    version: "1",
    chainId: 8453,
    nonce: `n${i.toString().padStart(15, "0")}`,
    issuedAt: new Date(now),
    expirationTime: new Date(now + 600_000)
  })
  return { message, signature: await evm.signMessage({ message }) }
}))
const evmHeaders = evmMessages.map(({ message, signature }) =>
  Buffer.from(JSON.stringify({ address: evm.address, message, signature, timestamp: now, chainId: 8453 })).toString("base64")
)

const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const base58 = (bytes: Uint8Array): string => {
  let n = BigInt(`0x${Buffer.from(bytes).toString("hex") || "0"}`)
  let out = ""
  while (n > 0n) {
    out = ALPHABET[Number(n % 58n)]! + out
    n /= 58n
  }
  for (const byte of bytes) {
    if (byte !== 0) break
    out = `1${out}`
  }
  return out
}

const { privateKey: solPrivate, publicKey: solPublic } = Crypto.generateKeyPairSync("ed25519")
const solAddress = base58(Buffer.from(solPublic.export({ format: "jwk" }).x ?? "", "base64url"))
const solMessages = Array.from({ length: N }, (_, i) => {
  const message = Siwx.formatSolana({
    domain: "localhost:8787",
    address: solAddress,
    uri: `${origin}/`,
    version: "1",
    chainId: Siwx.SOLANA_MAINNET,
    nonce: `s${i.toString().padStart(15, "0")}`,
    issuedAt: new Date(now).toISOString(),
    expirationTime: new Date(now + 600_000).toISOString()
  })
  return { message, signature: Crypto.sign(null, Buffer.from(message), solPrivate) }
})
const solHeaders = solMessages.map(({ message, signature }) =>
  Buffer.from(JSON.stringify({
    address: solAddress,
    message,
    signature: base58(signature),
    timestamp: now,
    chainId: Siwx.SOLANA_MAINNET,
    type: "ed25519"
  })).toString("base64")
)

const rows: Array<Record<string, string | number>> = []
const row = (check: string, store: string, tollgate: number, baseline: number) =>
  rows.push({
    check,
    store,
    "tollgate /s": Math.round(tollgate),
    "baseline /s": Math.round(baseline),
    ratio: (tollgate / baseline).toFixed(2)
  })

for (const [store, runtime] of Object.entries(runtimes)) {
  const auth = await runtime.runPromise(Effect.service(Auth.Auth))
  const account = await runtime.runPromise(auth.createAccount())
  const { key, record } = await runtime.runPromise(auth.createKey({ accountId: account.id, type: "INFERENCE", description: "bench" }))
  const bearer = Array.from({ length: N }, () => ({ authorization: `Bearer ${key}` }))
  await throughput(bearer.slice(0, 500), (headers) => runtime.runPromise(auth.authenticate(headers)))
  const jwt = await throughput(bearer, (headers) => runtime.runPromise(auth.authenticate(headers)))
  const jwtBaseline = await throughput(bearer, async () => {
    await Jose.jwtVerify(key, signingKey.publicKey, { algorithms: ["EdDSA"] })
    if (store === "redis") await client.get(`bench:revoked:${record.id}`)
  })
  row("API key (JWT + revocation)", store, jwt, jwtBaseline)

  const siwe = await throughput(evmHeaders, (header) => runtime.runPromise(auth.authenticate({ "sign-in-with-x": header })))
  const siweBaseline = await throughput(
    evmMessages,
    ({ message, signature }) => verifyMessage({ address: evm.address, message, signature })
  )
  row("SIWX EIP-191", store, siwe, siweBaseline)

  const sol = await throughput(solHeaders, (header) => runtime.runPromise(auth.authenticate({ "sign-in-with-x": header })))
  const solBaseline = await throughput(
    solMessages,
    ({ message, signature }) => Promise.resolve(Crypto.verify(null, Buffer.from(message), solPublic, signature))
  )
  row("SIWX ed25519", store, sol, solBaseline)
}

table(rows)
await Promise.all(Object.values(runtimes).map((runtime) => runtime.dispose()))
await client.quit()
await server.stop()
