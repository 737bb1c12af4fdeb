import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import * as Jose from "jose"
import { describe, expect, it } from "vitest"
import * as Jwt from "../src/Jwt.ts"

const key = await Effect.runPromise(Jwt.generateSigningKey)
const now = new Date()
const claims: Jwt.Claims = { accountId: "acct_1", keyId: "key_1", type: "ADMIN", tier: "partner", issuedAt: now }
const token = await Effect.runPromise(Jwt.sign(key, claims))

const accepted = (candidate: string, at = now) =>
  Effect.runPromise(Effect.exit(Jwt.verify(key, candidate, at))).then(Exit.isSuccess)

describe("API keys are EdDSA JWTs carrying account, key id, type and tier", () => {
  it("a signed key verifies to its claims", async () => {
    const verified = await Effect.runPromise(Jwt.verify(key, token, now))
    expect(verified).toMatchObject({ accountId: "acct_1", keyId: "key_1", type: "ADMIN", tier: "partner" })
  })

  it("a key round-trips through PKCS8 and through a private JWK", async () => {
    const pem = await Effect.runPromise(Jwt.exportSigningKey(key))
    const fromPem = await Effect.runPromise(Jwt.importSigningKey(pem))
    expect(await Effect.runPromise(Jwt.verify(fromPem, token, now))).toMatchObject({ keyId: "key_1" })
    const jwk = await Jose.exportJWK(key.privateKey)
    const fromJwk = await Effect.runPromise(Jwt.importSigningKey(JSON.stringify(jwk)))
    expect(await Effect.runPromise(Jwt.verify(fromJwk, token, now))).toMatchObject({ keyId: "key_1" })
  })
})

describe("Verification pins EdDSA: alg none, HMAC and any other algorithm are refused", () => {
  it("refuses an unsigned token", async () => {
    const unsigned = new Jose.UnsecuredJWT({ type: "ADMIN", tier: "default" }).setSubject("acct_1").setJti("key_1").encode()
    expect(await accepted(unsigned)).toBe(false)
  })

  it("refuses HS256 even when the secret is the public key's bytes", async () => {
    const jwk = await Jose.exportJWK(key.publicKey)
    const secret = new TextEncoder().encode(jwk.x ?? "")
    const hmac = await new Jose.SignJWT({ type: "ADMIN", tier: "default" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" }).setSubject("acct_1").setJti("key_1").sign(secret)
    expect(await accepted(hmac)).toBe(false)
  })

  it("refuses ES256 from another key", async () => {
    const { privateKey } = await Jose.generateKeyPair("ES256")
    const es = await new Jose.SignJWT({ type: "ADMIN", tier: "default" })
      .setProtectedHeader({ alg: "ES256", typ: "JWT" }).setSubject("acct_1").setJti("key_1").sign(privateKey)
    expect(await accepted(es)).toBe(false)
  })
})

describe("Any single changed byte in a key is refused", () => {
  it("property: replace one character of the token with any other byte", async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: token.length - 1 }), fc.integer({ min: 0, max: 255 }), async (index, byte) => {
        fc.pre(token.charCodeAt(index) !== byte)
        const altered = token.slice(0, index) + String.fromCharCode(byte) + token.slice(index + 1)
        expect(await accepted(altered)).toBe(false)
      }),
      { numRuns: 300 }
    )
  })
})

describe("Expiry is checked against the verification time", () => {
  it("property: a key is accepted strictly before exp and refused from exp on", async () => {
    const expiring = await Effect.runPromise(Jwt.sign(key, { ...claims, expiresAt: new Date(now.getTime() + 60_000) }))
    const exp = Math.floor((now.getTime() + 60_000) / 1000) * 1000
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: -59_000, max: 120_000 }), async (offset) => {
        const at = new Date(exp + offset)
        expect(await accepted(expiring, at)).toBe(offset < 0)
      }),
      { numRuns: 100 }
    )
  })
})
