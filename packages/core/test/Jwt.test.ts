import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import * as Jose from "jose"
import { describe, expect, it } from "vitest"
import * as Jwt from "../src/Jwt.ts"

const key = await Effect.runPromise(Jwt.generateSigningKey)
const now = new Date()
const claims: Jwt.Claims = { accountId: "acct_1", keyId: "key_1", type: "ADMIN", tier: "partner", issuedAt: now }
const token = await Effect.runPromise(Jwt.sign(key, claims))

const accepted = (candidate: string, at = now) => Effect.runPromise(Effect.exit(Jwt.verify(key, candidate, at))).then(Exit.isSuccess)

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

const previous = key
const next = await Effect.runPromise(Jwt.generateSigningKey)
const unnamed = await new Jose.SignJWT({ type: "INFERENCE", tier: "default" })
  .setProtectedHeader({ alg: "EdDSA", typ: "JWT" }).setSubject("acct_1").setJti("key_old").setIssuedAt().sign(previous.privateKey)

describe("Signing-key rotation: a key names the signing key that signed it, and earlier signing keys keep verifying", () => {
  it("a key carries its signing key's kid, the RFC 7638 thumbprint of the public key in hex (a CLI flag's value never starts with -)", async () => {
    expect(Jose.decodeProtectedHeader(token).kid).toBe(previous.kid)
    const thumbprint = await Jose.calculateJwkThumbprint(await Jose.exportJWK(previous.publicKey))
    expect(previous.kid).toBe(Buffer.from(thumbprint, "base64url").toString("hex"))
    expect(await Effect.runPromise(Jwt.verify(previous, token, now))).toMatchObject({ kid: previous.kid })
  })

  it("a key of the previous signing key verifies with it among the keys, and not once it is dropped", async () => {
    expect(await Effect.runPromise(Jwt.verify([next, previous], token, now))).toMatchObject({ keyId: "key_1", kid: previous.kid })
    expect(Exit.isFailure(await Effect.runPromise(Effect.exit(Jwt.verify([next], token, now))))).toBe(true)
  })

  it("a key minted before keys were named verifies under the signing key that signed it, wherever it is in the list", async () => {
    expect(await Effect.runPromise(Jwt.verify([next, previous], unnamed, now))).toMatchObject({ keyId: "key_old", kid: previous.kid })
    expect(Exit.isFailure(await Effect.runPromise(Effect.exit(Jwt.verify([next], unnamed, now))))).toBe(true)
  })

  it("a kid no configured key has is refused, even when another key would verify the signature", async () => {
    const misnamed = await new Jose.SignJWT({ type: "INFERENCE", tier: "default" })
      .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: next.kid }).setSubject("acct_1").setJti("key_x").sign(previous.privateKey)
    expect(Exit.isFailure(await Effect.runPromise(Effect.exit(Jwt.verify([next, previous], misnamed, now))))).toBe(true)
  })

  it("previous keys are read from PEMs one after the other, private (PKCS#8) or public (SPKI)", async () => {
    const pems = `${await Effect.runPromise(Jwt.exportSigningKey(next))}\n${await Effect.runPromise(Jwt.exportVerifyingKey(previous))}`
    const keys = await Effect.runPromise(Jwt.importVerifyingKeys(pems))
    expect(keys.map((k) => k.kid)).toEqual([next.kid, previous.kid])
    expect(await Effect.runPromise(Jwt.verify(keys, token, now))).toMatchObject({ keyId: "key_1" })
  })

  it("text that is not one or more Ed25519 PEMs is refused, naming what is wrong", async () => {
    const refused = async (text: string) => {
      const exit = await Effect.runPromise(Effect.exit(Jwt.importVerifyingKeys(text)))
      return Exit.isFailure(exit) ? String(exit.cause) : "accepted"
    }
    expect(await refused("not a pem")).toContain("expected one or more PEMs")
    const es = (await Jose.generateKeyPair("ES256", { extractable: true })).publicKey
    expect(await refused(await Jose.exportSPKI(es))).toContain("PEM 1 (PUBLIC KEY) is not an Ed25519 key")
  })
})
