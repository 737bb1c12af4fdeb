import { Jwt, Principal } from "@tollgate/core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as PortalSession from "../src/portal/Session.ts"

const wallet = new Principal.WalletPrincipal({
  accountId: "wallet:evm:0x00000000000000000000000000000000000000aa",
  address: "0x00000000000000000000000000000000000000AA",
  family: "evm",
  chainId: "eip155:8453"
})
const key = new Uint8Array(32).fill(7)
const now = Date.parse("2026-11-27T12:00:00Z")

describe("A portal sign-in opens only with its own MAC and only until it ends, 30 minutes after sign-in", () => {
  const session = PortalSession.start(wallet, now)
  const sealed = PortalSession.seal(key, session)

  it("opens as it was sealed, up to its last millisecond", () => {
    expect(session).toMatchObject({ accountId: wallet.accountId, via: "wallet", expiresAt: now + 30 * 60_000 })
    expect(PortalSession.open(key, sealed, now + 30 * 60_000 - 1)).toEqual(session)
    expect(PortalSession.open(key, sealed, now + 30 * 60_000)).toBeUndefined()
  })

  it("does not open under another key, altered, or without its MAC", () => {
    const [payload, mac] = sealed.split(".") as [string, string]
    const altered = Buffer.from(JSON.stringify({ ...session, accountId: "acct_other" })).toString("base64url")
    expect(PortalSession.open(new Uint8Array(32).fill(8), sealed, now)).toBeUndefined()
    expect(PortalSession.open(key, `${altered}.${mac}`, now)).toBeUndefined()
    expect(PortalSession.open(key, payload, now)).toBeUndefined()
    expect(PortalSession.open(key, `${payload}.`, now)).toBeUndefined()
  })

  it("every sign-in has its own CSRF token, and only that token matches", () => {
    const other = PortalSession.start(wallet, now)
    expect(other.csrfToken).not.toBe(session.csrfToken)
    expect(PortalSession.csrfMatches(session, session.csrfToken)).toBe(true)
    expect(PortalSession.csrfMatches(session, other.csrfToken)).toBe(false)
    expect(PortalSession.csrfMatches(session, undefined)).toBe(false)
  })

  it("is found among the other cookies of a Cookie header", () => {
    expect(PortalSession.fromCookieHeader(`theme=dark; tollgate_portal=${sealed}; other=1`)).toBe(sealed)
    expect(PortalSession.fromCookieHeader("theme=dark")).toBeUndefined()
    expect(PortalSession.fromCookieHeader(undefined)).toBeUndefined()
  })
})

describe("The sign-in cookie is httpOnly and SameSite=Strict, Secure on an https origin, and lives as long as the sign-in", () => {
  it("set, and cleared", () => {
    expect(PortalSession.setCookie("v.m", { secure: true })).toBe(
      "tollgate_portal=v.m; Path=/; HttpOnly; SameSite=Strict; Max-Age=1800; Secure"
    )
    expect(PortalSession.setCookie("v.m", { secure: false })).toBe("tollgate_portal=v.m; Path=/; HttpOnly; SameSite=Strict; Max-Age=1800")
    expect(PortalSession.setCookie(undefined, { secure: true })).toBe(
      "tollgate_portal=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure"
    )
  })
})

describe("The sealing key is derived from the API-key signing key: the same key gives the same seal, another key another", () => {
  const derive = (signingKey: Jwt.SigningKey) =>
    Effect.runPromise(Effect.provide(
      Effect.gen(function*() {
        return yield* PortalSession.SessionKey
      }),
      PortalSession.layerFromSigningKey(signingKey)
    ))

  it("two imports of one PEM agree; a fresh key differs", async () => {
    const generated = await Effect.runPromise(Jwt.generateSigningKey)
    const pem = await Effect.runPromise(Jwt.exportSigningKey(generated))
    const imported = await Effect.runPromise(Jwt.importSigningKey(pem))
    const [a, b, c] = await Promise.all([derive(generated), derive(imported), derive(await Effect.runPromise(Jwt.generateSigningKey))])
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true)
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false)
  })
})
