/**
 * A sign-in to the self-service portal (`Session`, see `Portal.ts`): who signed in (a wallet
 * through sign-in-with-x, or an ADMIN key of an account), sealed into one short-lived cookie that
 * is httpOnly and SameSite=Strict (Secure on an https origin), and the CSRF token every state
 * change must carry in `x-csrf-token`. Every instance and worker sharing the server's signing key
 * accepts the cookie, and a sign-out ends it on every instance that shares the store.
 *
 * **Details**
 *
 * The cookie is the sign-in itself, signed with HMAC-SHA256 rather than looked up in a store, so
 * nothing has to expire it server-side: it carries its own end, 30 minutes after sign-in. Only a
 * sign-in ended early is stored: a sign-out revokes its `id` until that end (`SessionRevocations`),
 * so a copy of the cookie stops working too. The key is derived from the API-key signing key
 * (`layerFromSigningKey`); without that layer it is random per process, which suits one process (an
 * embedder's, a test's) and nothing more.
 *
 * @since 0.1.0
 */
import type { Jwt, Principal } from "@tollgate/core"
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as Crypto from "node:crypto"

/** @category constants */
export const cookieName = "tollgate_portal"

/** @category constants */
export const csrfHeader = "x-csrf-token"

/** How long a sign-in lasts. @category constants */
export const LIFETIME_MS = 30 * 60_000

/**
 * A sign-in: the account it acts for and how it signed in.
 *
 * @category models
 */
export const Session = Schema.Struct({
  /** Random, unique to the sign-in: what a sign-out revokes. */
  id: Schema.String,
  accountId: Schema.String,
  via: Schema.Literals(["wallet", "key"]),
  /** The wallet that signed in (`via: "wallet"`). */
  wallet: Schema.optionalKey(Schema.Struct({
    address: Schema.String,
    family: Schema.Literals(["evm", "solana"]),
    chainId: Schema.String
  })),
  /** The ADMIN key that signed in (`via: "key"`): its revocation ends the sign-in. */
  keyId: Schema.optionalKey(Schema.String),
  /** That key's tier, which the keys made while signed in get, as `POST /api_keys` gives them. */
  tier: Schema.optionalKey(Schema.Literals(["default", "partner"])),
  csrfToken: Schema.String,
  expiresAt: Schema.Finite
})

/** @category models */
export type Session = typeof Session.Type

const decodeSession = Schema.decodeUnknownOption(Schema.fromJsonString(Session))

/**
 * The HMAC key sign-ins are sealed with.
 *
 * @category references
 */
export const SessionKey = Context.Reference<Uint8Array>("@tollgate/http/PortalSession/SessionKey", {
  defaultValue: () => Crypto.randomBytes(32)
})

/**
 * The sealing key derived from the API-key signing key, so that every process holding it accepts
 * the sign-ins of the others.
 *
 * @category layers
 */
export const layerFromSigningKey = (signingKey: Jwt.SigningKey): Layer.Layer<never> =>
  Layer.effect(
    SessionKey,
    Effect.promise(async () => {
      const jwk = await crypto.subtle.exportKey("jwk", signingKey.privateKey)
      return Crypto.createHash("sha256").update("tollgate portal session\0").update(jwk.d ?? "").digest()
    })
  )

const mac = (key: Uint8Array, payload: string) => Crypto.createHmac("sha256", key).update(payload).digest("base64url")

/**
 * A sign-in for a principal that just signed in.
 *
 * @category constructors
 */
export const start = (principal: Principal.Principal, now: number): Session => ({
  id: Crypto.randomBytes(16).toString("base64url"),
  accountId: principal.accountId,
  ...(principal._tag === "Wallet"
    ? { via: "wallet" as const, wallet: { address: principal.address, family: principal.family, chainId: principal.chainId } }
    : { via: "key" as const, keyId: principal.keyId, tier: principal.tier }),
  csrfToken: Crypto.randomBytes(24).toString("base64url"),
  expiresAt: now + LIFETIME_MS
})

/**
 * The cookie value of a sign-in: its JSON and the MAC of it, both base64url.
 *
 * @category encoding
 */
export const seal = (key: Uint8Array, session: Session): string => {
  const payload = Buffer.from(JSON.stringify(session)).toString("base64url")
  return `${payload}.${mac(key, payload)}`
}

/**
 * The sign-in of a cookie value, when its MAC is right and it has not ended.
 *
 * @category decoding
 */
export const open = (key: Uint8Array, value: string, now: number): Session | undefined => {
  const dot = value.indexOf(".")
  if (dot <= 0) return undefined
  const payload = value.slice(0, dot)
  const expected = Buffer.from(mac(key, payload))
  const given = Buffer.from(value.slice(dot + 1))
  if (given.length !== expected.length || !Crypto.timingSafeEqual(given, expected)) return undefined
  const session = decodeSession(Buffer.from(payload, "base64url").toString("utf8"))
  return Option.isSome(session) && session.value.expiresAt > now ? session.value : undefined
}

/**
 * The sign-in cookie in a `Cookie` request header.
 *
 * @category decoding
 */
export const fromCookieHeader = (header: string | undefined): string | undefined => {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=")
    if (eq !== -1 && part.slice(0, eq).trim() === cookieName) return part.slice(eq + 1).trim()
  }
  return undefined
}

/**
 * Whether the CSRF header of a state change names the sign-in's token.
 *
 * @category validation
 */
export const csrfMatches = (session: Session, header: string | undefined): boolean => {
  if (header === undefined) return false
  const given = Buffer.from(header)
  const expected = Buffer.from(session.csrfToken)
  return given.length === expected.length && Crypto.timingSafeEqual(given, expected)
}

/**
 * `Set-Cookie` for a sealed sign-in, living as long as the sign-in (or, without one, the header
 * that ends it). Secure when the public origin is https: a browser on plain-http localhost would
 * otherwise never send it back.
 *
 * @category encoding
 */
export const setCookie = (sealed: string | undefined, options: { readonly secure: boolean }): string =>
  [
    `${cookieName}=${sealed ?? ""}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    `Max-Age=${sealed === undefined ? 0 : LIFETIME_MS / 1000}`,
    ...(options.secure ? ["Secure"] : [])
  ].join("; ")
