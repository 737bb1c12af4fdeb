/**
 * API keys as JWTs: EdDSA (Ed25519) signatures through `jose`, with the algorithm pinned so a token
 * claiming `none`, an HMAC or any other algorithm never verifies. A key names its account (`sub`),
 * its id (`jti`), its type and tier, and optionally when it expires (`exp`). Segments must be
 * canonical base64url, so a token that decodes to the same bytes through a different spelling is
 * refused like any other altered token.
 *
 * @since 0.1.0
 */
import { Data, Effect, Schema } from "effect"
import * as Jose from "jose"
import type { KeyType, Tier } from "./Principal.ts"

/**
 * The one algorithm tokens are signed and verified with.
 *
 * @category constants
 */
export const algorithm = "EdDSA"

/**
 * The key pair a server signs and verifies keys with.
 *
 * @category models
 */
export interface SigningKey {
  readonly privateKey: CryptoKey
  readonly publicKey: CryptoKey
}

/** @category models */
export interface Claims {
  readonly accountId: string
  readonly keyId: string
  readonly type: KeyType
  readonly tier: Tier
  readonly issuedAt: Date
  readonly expiresAt?: Date
}

/**
 * Why a token was refused. Never shown to clients (they see one 401), only logged.
 *
 * @category errors
 */
export class JwtInvalid extends Data.TaggedError("JwtInvalid")<{ readonly reason: string }> {}

/** @category errors */
export class SigningKeyInvalid extends Data.TaggedError("SigningKeyInvalid")<{ readonly message: string }> {}

const CustomClaims = Schema.Struct({
  sub: Schema.String.check(Schema.isMinLength(1)),
  jti: Schema.String.check(Schema.isMinLength(1)),
  type: Schema.Literals(["INFERENCE", "ADMIN"]),
  tier: Schema.Literals(["default", "partner"]),
  iat: Schema.optionalKey(Schema.Finite),
  exp: Schema.optionalKey(Schema.Finite)
})

const decodeClaims = Schema.decodeUnknownOption(CustomClaims)

const MAX_TOKEN_LENGTH = 4096
const SEGMENT = /^[A-Za-z0-9_-]+$/

const isCanonicalSegment = (segment: string): boolean =>
  SEGMENT.test(segment) && Buffer.from(Buffer.from(segment, "base64url")).toString("base64url") === segment

const derivePublicKey = (privateKey: CryptoKey) =>
  Effect.tryPromise({
    try: async () => {
      const { d: _d, ...publicJwk } = await Jose.exportJWK(privateKey)
      return await Jose.importJWK(publicJwk, algorithm) as CryptoKey
    },
    catch: (cause) => new SigningKeyInvalid({ message: `cannot derive the public key: ${String(cause)}` })
  })

/**
 * A signing key from config: an Ed25519 private JWK (JSON) or a PKCS8 PEM.
 *
 * @category constructors
 */
export const importSigningKey = Effect.fn("Jwt.importSigningKey")(function*(text: string) {
  const trimmed = text.trim()
  const privateKey = yield* Effect.tryPromise({
    try: async () => {
      if (trimmed.startsWith("{")) {
        const jwk = JSON.parse(trimmed) as Jose.JWK
        if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || jwk.d === undefined) {
          throw new Error("expected an OKP Ed25519 private JWK")
        }
        return await Jose.importJWK(jwk, algorithm, { extractable: true }) as CryptoKey
      }
      return await Jose.importPKCS8(trimmed, algorithm, { extractable: true })
    },
    catch: (cause) => new SigningKeyInvalid({ message: `invalid signing key: ${String(cause)}` })
  })
  const publicKey = yield* derivePublicKey(privateKey)
  return { privateKey, publicKey } satisfies SigningKey
})

/**
 * A fresh key pair (dev mode, tests, benchmarks).
 *
 * @category constructors
 */
export const generateSigningKey: Effect.Effect<SigningKey> = Effect.promise(() =>
  Jose.generateKeyPair(algorithm, { crv: "Ed25519", extractable: true })
)

/**
 * The private key as PKCS8 PEM, the form `importSigningKey` reads back.
 *
 * @category conversions
 */
export const exportSigningKey = (key: SigningKey): Effect.Effect<string> =>
  Effect.promise(() => Jose.exportPKCS8(key.privateKey))

/**
 * Signs the claims of a key.
 *
 * @category signing
 */
export const sign = (key: SigningKey, claims: Claims): Effect.Effect<string> =>
  Effect.promise(() => {
    const jwt = new Jose.SignJWT({ type: claims.type, tier: claims.tier })
      .setProtectedHeader({ alg: algorithm, typ: "JWT" })
      .setSubject(claims.accountId)
      .setJti(claims.keyId)
      .setIssuedAt(Math.floor(claims.issuedAt.getTime() / 1000))
    if (claims.expiresAt !== undefined) jwt.setExpirationTime(Math.floor(claims.expiresAt.getTime() / 1000))
    return jwt.sign(key.privateKey)
  })

/**
 * Verifies a token's signature and expiry at `now` and returns its claims. Revocation and the
 * account's existence are the caller's business (they live in the store).
 *
 * @category verification
 */
export const verify = (key: SigningKey, token: string, now: Date): Effect.Effect<Claims, JwtInvalid> =>
  Effect.gen(function*() {
    if (token.length > MAX_TOKEN_LENGTH) return yield* new JwtInvalid({ reason: "too long" })
    const segments = token.split(".")
    if (segments.length !== 3 || !segments.every(isCanonicalSegment)) {
      return yield* new JwtInvalid({ reason: "not a compact JWS in canonical base64url" })
    }
    const { payload } = yield* Effect.tryPromise({
      try: () =>
        Jose.jwtVerify(token, key.publicKey, {
          algorithms: [algorithm],
          typ: "JWT",
          currentDate: now,
          clockTolerance: 0,
          requiredClaims: ["sub", "jti"]
        }),
      catch: (cause) => new JwtInvalid({ reason: cause instanceof Error ? cause.message : String(cause) })
    })
    const claims = decodeClaims(payload)
    if (claims._tag === "None") return yield* new JwtInvalid({ reason: "claims do not match" })
    const { exp, iat, jti, sub, tier, type } = claims.value
    return {
      accountId: sub,
      keyId: jti,
      type,
      tier,
      issuedAt: new Date((iat ?? 0) * 1000),
      ...(exp === undefined ? {} : { expiresAt: new Date(exp * 1000) })
    } satisfies Claims
  })
