/**
 * API keys as JWTs: EdDSA (Ed25519) signatures through `jose`, with the algorithm pinned so a token
 * claiming `none`, an HMAC or any other algorithm never verifies, and segments that must be
 * canonical base64url, so a token that decodes to the same bytes through a different spelling is
 * refused like any other altered token.
 *
 * **Details**
 *
 * A key names its account (`sub`), its id (`jti`), its type and tier, and optionally when it
 * expires (`exp`). It also names the signing key that signed it (`kid`, the RFC 7638 thumbprint of
 * its public half, in hex), so a server can keep verifying keys of earlier signing keys while it
 * signs with a new one. A key without a `kid` (minted before keys named their signing key:
 * docs/operations.md, "Rotating the signing key") verifies under whichever of the server's keys
 * signed it.
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
 * A public key tokens are verified with, named by its thumbprint.
 *
 * @category models
 */
export interface VerifyingKey {
  /** The RFC 7638 SHA-256 thumbprint of the public key, in hex: the `kid` of every token it signs. */
  readonly kid: string
  readonly publicKey: CryptoKey
}

/**
 * The key pair a server signs and verifies keys with.
 *
 * @category models
 */
export interface SigningKey extends VerifyingKey {
  readonly privateKey: CryptoKey
}

/** @category models */
export interface Claims {
  readonly accountId: string
  readonly keyId: string
  readonly type: KeyType
  readonly tier: Tier
  readonly issuedAt: Date
  readonly expiresAt?: Date
  /**
   * Which secret of the key this is: 0 for the first, one more at each reroll (`Auth.rerollKey`).
   * Not a claim of keys minted before rerolls existed, which are their key's first secret.
   */
  readonly secret?: number
}

/**
 * What `verify` found: the claims, and the signing key that signed them (`kid`), named by the
 * token or, for a token minted before keys were named, found by trying each.
 *
 * @category models
 */
export interface Verified extends Claims {
  readonly kid: string
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
  exp: Schema.optionalKey(Schema.Finite),
  sec: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
})

const decodeClaims = Schema.decodeUnknownOption(CustomClaims)

const MAX_TOKEN_LENGTH = 4096
const SEGMENT = /^[A-Za-z0-9_-]+$/

const isCanonicalSegment = (segment: string): boolean =>
  SEGMENT.test(segment) && Buffer.from(Buffer.from(segment, "base64url")).toString("base64url") === segment

/** The public half and its thumbprint, from a private or a public key. */
const verifyingKeyOf = async (key: CryptoKey): Promise<VerifyingKey> => {
  const { d: _d, ...publicJwk } = await Jose.exportJWK(key)
  const publicKey = await Jose.importJWK(publicJwk, algorithm, { extractable: true }) as CryptoKey
  // Hex rather than base64url: a kid is typed as a CLI flag's value, which must not start with "-".
  return { kid: Buffer.from(await Jose.calculateJwkThumbprint(publicJwk, "sha256"), "base64url").toString("hex"), publicKey }
}

const derivePublicKey = (privateKey: CryptoKey) =>
  Effect.tryPromise({
    try: () => verifyingKeyOf(privateKey),
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
  const { kid, publicKey } = yield* derivePublicKey(privateKey)
  return { kid, privateKey, publicKey } satisfies SigningKey
})

const PEM = /-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----/g

/**
 * The keys of earlier signing keys, kept to verify what they signed: one or more PEMs, each a
 * PKCS#8 private key or an SPKI public key, one after the other. Fails naming the first PEM that is
 * not an Ed25519 key, or when the text holds none.
 *
 * @category constructors
 */
export const importVerifyingKeys = Effect.fn("Jwt.importVerifyingKeys")(function*(text: string) {
  const pems = [...text.matchAll(PEM)]
  if (pems.length === 0 || text.replace(PEM, "").trim() !== "") {
    return yield* new SigningKeyInvalid({ message: "expected one or more PEMs (PKCS#8 private or SPKI public keys), one after the other" })
  }
  return yield* Effect.forEach(pems, ([pem, label], index) =>
    Effect.tryPromise({
      try: async () =>
        verifyingKeyOf(
          label === "PUBLIC KEY"
            ? await Jose.importSPKI(pem, algorithm, { extractable: true })
            : await Jose.importPKCS8(pem, algorithm, { extractable: true })
        ),
      catch: (cause) =>
        new SigningKeyInvalid({
          message: `PEM ${index + 1} (${label}) is not an Ed25519 key: ${cause instanceof Error ? cause.message : String(cause)}`
        })
    }))
})

/**
 * A fresh key pair (dev mode, tests, benchmarks).
 *
 * @category constructors
 */
export const generateSigningKey: Effect.Effect<SigningKey> = Effect.promise(async () => {
  const { privateKey } = await Jose.generateKeyPair(algorithm, { crv: "Ed25519", extractable: true })
  const { kid, publicKey } = await verifyingKeyOf(privateKey)
  return { kid, privateKey, publicKey }
})

/**
 * The public key as SPKI PEM: what an operator keeps in `TOLLGATE_PREVIOUS_SIGNING_KEYS` after a
 * rotation, with no secret in it.
 *
 * @category conversions
 */
export const exportVerifyingKey = (key: VerifyingKey): Effect.Effect<string> => Effect.promise(() => Jose.exportSPKI(key.publicKey))

/**
 * The private key as PKCS8 PEM, the form `importSigningKey` reads back.
 *
 * @category conversions
 */
export const exportSigningKey = (key: SigningKey): Effect.Effect<string> => Effect.promise(() => Jose.exportPKCS8(key.privateKey))

/**
 * Signs the claims of a key.
 *
 * @category signing
 */
export const sign = (key: SigningKey, claims: Claims): Effect.Effect<string> =>
  Effect.promise(() => {
    const custom = claims.secret === undefined || claims.secret === 0
      ? { type: claims.type, tier: claims.tier }
      : { type: claims.type, tier: claims.tier, sec: claims.secret }
    const jwt = new Jose.SignJWT(custom)
      .setProtectedHeader({ alg: algorithm, typ: "JWT", kid: key.kid })
      .setSubject(claims.accountId)
      .setJti(claims.keyId)
      .setIssuedAt(Math.floor(claims.issuedAt.getTime() / 1000))
    if (claims.expiresAt !== undefined) jwt.setExpirationTime(Math.floor(claims.expiresAt.getTime() / 1000))
    return jwt.sign(key.privateKey)
  })

const verifyWith = (key: VerifyingKey, token: string, now: Date) =>
  Jose.jwtVerify(token, key.publicKey, {
    algorithms: [algorithm],
    typ: "JWT",
    currentDate: now,
    clockTolerance: 0,
    requiredClaims: ["sub", "jti"]
  })

/**
 * Verifies a token's signature and expiry at `now` with the key its `kid` names among `keys` (a
 * `kid` none of them has is refused), or, for a token without `kid`, with the first of `keys` it
 * verifies under. Revocation and the account's existence are the caller's business (they live in
 * the store).
 *
 * @category verification
 */
export const verify = (
  keys: VerifyingKey | ReadonlyArray<VerifyingKey>,
  token: string,
  now: Date
): Effect.Effect<Verified, JwtInvalid> =>
  Effect.gen(function*() {
    if (token.length > MAX_TOKEN_LENGTH) return yield* new JwtInvalid({ reason: "too long" })
    const segments = token.split(".")
    if (segments.length !== 3 || !segments.every(isCanonicalSegment)) {
      return yield* new JwtInvalid({ reason: "not a compact JWS in canonical base64url" })
    }
    const ring: ReadonlyArray<VerifyingKey> = "kid" in keys ? [keys as VerifyingKey] : keys as ReadonlyArray<VerifyingKey>
    const { kid, payload } = yield* Effect.tryPromise({
      try: async () => {
        const named = Jose.decodeProtectedHeader(token).kid
        if (named !== undefined) {
          const key = ring.find((candidate) => candidate.kid === named)
          if (key === undefined) throw new Error(`signed by an unknown key (kid ${named})`)
          return { kid: key.kid, payload: (await verifyWith(key, token, now)).payload }
        }
        let failure: unknown = new Error("no verifying key")
        for (const key of ring) {
          try {
            return { kid: key.kid, payload: (await verifyWith(key, token, now)).payload }
          } catch (cause) {
            failure = cause
          }
        }
        throw failure
      },
      catch: (cause) => new JwtInvalid({ reason: cause instanceof Error ? cause.message : String(cause) })
    })
    const claims = decodeClaims(payload)
    if (claims._tag === "None") return yield* new JwtInvalid({ reason: "claims do not match" })
    const { exp, iat, jti, sec, sub, tier, type } = claims.value
    return {
      accountId: sub,
      keyId: jti,
      type,
      tier,
      kid,
      issuedAt: new Date((iat ?? 0) * 1000),
      ...(exp === undefined ? {} : { expiresAt: new Date(exp * 1000) }),
      ...(sec === undefined ? {} : { secret: sec })
    } satisfies Verified
  })
