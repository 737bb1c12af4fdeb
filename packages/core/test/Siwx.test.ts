import { ed25519 } from "@noble/curves/ed25519.js"
import bs58 from "bs58"
import { Context, Effect, Layer, Option, Result } from "effect"
import * as fc from "fast-check"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { describe, expect, it } from "vitest"
import * as Auth from "../src/Auth.ts"
import * as AuthStore from "../src/AuthStore.ts"
import * as Jwt from "../src/Jwt.ts"
import * as Siwx from "../src/Siwx.ts"

const origin = "http://localhost:8787"
const policy: Siwx.Policy = {
  origin,
  chains: [Siwx.BASE_MAINNET, Siwx.SOLANA_MAINNET],
  maxLifetimeMs: 600_000,
  clockSkewMs: 30_000
}
const account = privateKeyToAccount(generatePrivateKey())
const NOW = Date.parse("2026-11-22T12:00:00.000Z")

interface EvmMessage {
  readonly domain?: string
  readonly uri?: string
  readonly chainId?: number
  readonly nonce?: string
  readonly issuedAt?: number
  readonly expirationTime?: number | undefined
  readonly notBefore?: number
  readonly statement?: string
}

const siweText = (m: EvmMessage = {}) => {
  const issuedAt = m.issuedAt ?? NOW
  return createSiweMessage({
    domain: m.domain ?? "localhost:8787",
    address: account.address,
    uri: m.uri ?? `${origin}/`,
    version: "1",
    chainId: m.chainId ?? 8453,
    nonce: m.nonce ?? "a1b2c3d4e5f60718",
    issuedAt: new Date(issuedAt),
    ...("expirationTime" in m
      ? m.expirationTime === undefined ? {} : { expirationTime: new Date(m.expirationTime) }
      : { expirationTime: new Date(issuedAt + 600_000) }),
    ...(m.notBefore === undefined ? {} : { notBefore: new Date(m.notBefore) }),
    statement: m.statement ?? "Sign in to use your prepaid credits."
  })
}

const encode = (payload: unknown) => Buffer.from(JSON.stringify(payload)).toString("base64")

const specHeader = async (message: string, chainId: number | string = 8453) =>
  encode({ address: account.address, message, signature: await account.signMessage({ message }), timestamp: NOW, chainId })

/** Whether a header signs in at `now`: decoded, validated and its signature verified. */
const accepts = (header: string, now = NOW): Promise<boolean> => {
  const decoded = Result.flatMap(
    Siwx.decodeHeader(header),
    (credential) => Result.map(Siwx.validate(credential, policy, now), () => credential)
  )
  if (Result.isFailure(decoded)) return Promise.resolve(false)
  return Effect.runPromise(Siwx.verifySignature(decoded.success, Option.none()))
}

const nonce = fc.stringMatching(/^[A-Za-z0-9]{8,40}$/)

describe("EIP-4361 text is formatted exactly as the official clients format it, and only canonical text parses", () => {
  it("property: formatEvm equals viem's createSiweMessage and parse inverts it", () => {
    fc.assert(
      fc.property(
        nonce,
        fc.option(fc.stringMatching(/^[A-Za-z][A-Za-z .,]{0,60}$/), { nil: undefined }),
        fc.option(fc.webUrl(), { nil: undefined }),
        (n, statement, resource) => {
          const text = createSiweMessage({
            domain: "localhost:8787",
            address: account.address,
            uri: `${origin}/`,
            version: "1",
            chainId: 8453,
            nonce: n,
            issuedAt: new Date(NOW),
            ...(statement === undefined ? {} : { statement }),
            ...(resource === undefined ? {} : { resources: [resource] })
          })
          const parsed = Siwx.parse(text)
          expect(Result.isSuccess(parsed)).toBe(true)
          if (Result.isSuccess(parsed)) expect(Siwx.formatEvm(parsed.success.fields)).toBe(text)
        }
      ),
      { numRuns: 40 }
    )
  })

  it("without a statement there are two blank lines before URI (EVM) and one (Solana)", () => {
    const fields: Siwx.Fields = {
      domain: "localhost:8787",
      address: account.address,
      uri: `${origin}/`,
      version: "1",
      chainId: Siwx.BASE_MAINNET,
      nonce: "a1b2c3d4e5f60718",
      issuedAt: new Date(NOW).toISOString()
    }
    expect(Siwx.formatEvm(fields)).toContain(`${account.address}\n\n\nURI: `)
    expect(Siwx.formatSolana({ ...fields, address: "So1ana", chainId: Siwx.SOLANA_MAINNET })).toBe(
      "localhost:8787 wants you to sign in with your Solana account:\nSo1ana\n\nURI: http://localhost:8787/\nVersion: 1\n" +
        "Chain ID: 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp\nNonce: a1b2c3d4e5f60718\nIssued At: 2026-11-22T12:00:00.000Z"
    )
  })
})

describe("A valid SIWE header signs in; Base may be named 8453, \"8453\" or \"eip155:8453\"", () => {
  it.each([8453, "8453", "eip155:8453"])("chainId %s", async (chainId) => {
    expect(await accepts(await specHeader(siweText(), chainId))).toBe(true)
  })

  it("a message without expirationTime is valid for the default lifetime from issuedAt", async () => {
    const header = await specHeader(siweText({ expirationTime: undefined }))
    expect(await accepts(header, NOW + 599_000)).toBe(true)
    expect(await accepts(header, NOW + 600_000)).toBe(false)
  })
})

describe("Any single changed byte in a SIWE message or its signature is refused", () => {
  const message = siweText()

  it("property: one byte of the message text", async () => {
    const signature = await account.signMessage({ message })
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: message.length - 1 }), fc.integer({ min: 0, max: 127 }), async (index, code) => {
        fc.pre(message.charCodeAt(index) !== code)
        const altered = message.slice(0, index) + String.fromCharCode(code) + message.slice(index + 1)
        expect(await accepts(encode({ address: account.address, message: altered, signature, timestamp: NOW, chainId: 8453 }))).toBe(false)
      }),
      { numRuns: 300 }
    )
  })

  it("property: one byte of the signature", async () => {
    const signature = Buffer.from((await account.signMessage({ message })).slice(2), "hex")
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 64 }), fc.integer({ min: 1, max: 255 }), async (index, mask) => {
        const altered = Buffer.from(signature)
        altered[index] = altered[index]! ^ mask
        const header = encode({ address: account.address, message, signature: `0x${altered.toString("hex")}`, chainId: 8453 })
        expect(await accepts(header)).toBe(false)
      }),
      { numRuns: 300 }
    )
  })
})

describe("Expired, not-yet-valid, wrong-domain and wrong-chain messages are refused", () => {
  it("property: expired (the check time is at or after expirationTime)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1_000, max: 600_000 }), fc.integer({ min: 0, max: 86_400_000 }), async (lifetime, late) => {
        const header = await specHeader(siweText({ issuedAt: NOW, expirationTime: NOW + lifetime }))
        expect(await accepts(header, NOW + lifetime + late)).toBe(false)
      }),
      { numRuns: 40 }
    )
  })

  it("property: issued in the future beyond the clock skew, or notBefore in the future", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 30_001, max: 86_400_000 }), async (ahead) => {
        expect(await accepts(await specHeader(siweText({ issuedAt: NOW + ahead })))).toBe(false)
        expect(await accepts(await specHeader(siweText({ notBefore: NOW + ahead })))).toBe(false)
      }),
      { numRuns: 30 }
    )
  })

  it("property: any other domain, or a uri on another origin", async () => {
    await fc.assert(
      fc.asyncProperty(fc.domain(), async (domain) => {
        fc.pre(domain !== "localhost")
        expect(await accepts(await specHeader(siweText({ domain })))).toBe(false)
        expect(await accepts(await specHeader(siweText({ uri: `https://${domain}/` })))).toBe(false)
      }),
      { numRuns: 30 }
    )
    expect(await accepts(await specHeader(siweText({ domain: "localhost:8788" })))).toBe(false)
  })

  it("property: any other chain", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 40 }), async (chainId) => {
        fc.pre(chainId !== 8453)
        expect(await accepts(await specHeader(siweText({ chainId }), chainId))).toBe(false)
      }),
      { numRuns: 30 }
    )
  })

  it("a lifetime over 10 minutes or a nonce under 8 alphanumerics is refused", async () => {
    expect(await accepts(await specHeader(siweText({ expirationTime: NOW + 600_001 })))).toBe(false)
    const short = siweText().replace("Nonce: a1b2c3d4e5f60718", "Nonce: abc1234")
    expect(await accepts(await specHeader(short))).toBe(false)
  })
})

describe("Solana: ed25519 over the SIWS text, signature base58 or base64, address base58 of 32 bytes", () => {
  const secret = ed25519.utils.randomSecretKey()
  const address = bs58.encode(ed25519.getPublicKey(secret))
  const fields: Siwx.Fields = {
    domain: "localhost:8787",
    address,
    statement: "Sign in to use your prepaid credits.",
    uri: `${origin}/`,
    version: "1",
    chainId: Siwx.SOLANA_MAINNET,
    nonce: "0123456789abcdef",
    issuedAt: new Date(NOW).toISOString(),
    expirationTime: new Date(NOW + 600_000).toISOString()
  }
  const message = Siwx.formatSolana(fields)
  const signature = ed25519.sign(new TextEncoder().encode(message), secret)
  const header = (sig: string, text = message) =>
    encode({ address, message: text, signature: sig, timestamp: NOW, chainId: Siwx.SOLANA_MAINNET, type: "ed25519" })

  it("accepts a base58 and a base64 signature", async () => {
    expect(await accepts(header(bs58.encode(signature)))).toBe(true)
    expect(await accepts(header(Buffer.from(signature).toString("base64")))).toBe(true)
  })

  it("accepts the official payload shape (fields, no text)", async () => {
    expect(await accepts(encode({ ...fields, type: "ed25519", signature: bs58.encode(signature) }))).toBe(true)
  })

  it("property: any single changed byte of the signature or the text is refused", async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 63 }), fc.integer({ min: 1, max: 255 }), fc.nat({ max: message.length - 1 }), async (i, mask, j) => {
        const altered = Uint8Array.from(signature)
        altered[i] = altered[i]! ^ mask
        expect(await accepts(header(bs58.encode(altered)))).toBe(false)
        const text = message.slice(0, j) + String.fromCharCode((message.charCodeAt(j) ^ (mask & 0x7f)) || 1) + message.slice(j + 1)
        fc.pre(text !== message)
        expect(await accepts(header(bs58.encode(signature), text))).toBe(false)
      }),
      { numRuns: 200 }
    )
  })
})

describe("Nonce policy: by default a replayed SIWX header is refused; `reusable` accepts it within its lifetime", () => {
  const makeAuth = async (noncePolicy: Auth.NoncePolicy) =>
    Effect.runPromise(Effect.scoped(Effect.map(
      Layer.build(
        Auth.layer({ signingKey: await Effect.runPromise(Jwt.generateSigningKey), publicOrigin: origin, noncePolicy }).pipe(
          Layer.provide(AuthStore.layerMemory)
        )
      ),
      (context) => Context.get(context, Auth.Auth)
    )))
  const signIn = (auth: Auth.Auth["Service"], header: string) =>
    Effect.runPromise(Effect.result(auth.authenticate({ "sign-in-with-x": header }))).then(Result.isSuccess)

  it("property: any fresh header is accepted once, then refused", async () => {
    const auth = await makeAuth("single-use")
    await fc.assert(
      fc.asyncProperty(nonce, async (n) => {
        const header = await specHeader(siweText({ nonce: n, issuedAt: Date.now() }))
        const first = await signIn(auth, header)
        fc.pre(first)
        expect(await signIn(auth, header)).toBe(false)
      }),
      { numRuns: 40 }
    )
  })

  it("reusable: the same header is accepted again", async () => {
    const auth = await makeAuth("reusable")
    const header = await specHeader(siweText({ issuedAt: Date.now() }))
    expect(await signIn(auth, header)).toBe(true)
    expect(await signIn(auth, header)).toBe(true)
  })
})

describe("Every SIWX challenge carries a fresh random nonce of 16 hex characters, as the spec says", () => {
  it("a hundred challenges: each nonce is 16 lowercase hex characters, and no two are equal", async () => {
    const auth = await Effect.runPromise(Effect.scoped(Effect.map(
      Layer.build(
        Auth.layer({ signingKey: await Effect.runPromise(Jwt.generateSigningKey), publicOrigin: origin }).pipe(
          Layer.provide(AuthStore.layerMemory)
        )
      ),
      (context) => Context.get(context, Auth.Auth)
    )))
    const nonces = await Effect.runPromise(
      Effect.forEach(Array.from({ length: 100 }), () => Effect.map(auth.siwxChallenge, (c) => c.info.nonce))
    )
    for (const nonce of nonces) expect(nonce).toMatch(/^[0-9a-f]{16}$/)
    expect(new Set(nonces).size).toBe(100)
  })
})
