/**
 * Sign-in-with-X: a wallet proves who it is by signing a short text message bound to this server's
 * origin, a chain, a nonce and a time window. EVM wallets sign EIP-4361 (SIWE) messages with
 * EIP-191 (plain accounts) or through their contract (EIP-1271, and EIP-6492 before deployment);
 * Solana wallets sign the SIWS text with ed25519.
 *
 * **Details**
 *
 * The `SIGN-IN-WITH-X` header comes in two shapes: the spec's, which carries the signed text, and
 * the official `@x402/extensions` client's, which carries the message's fields and leaves the text
 * to be rebuilt. Both end in the same `Credential`, and the text is always the canonical one the
 * official client formats: a message parses only if formatting its fields gives back every byte.
 *
 * @since 0.1.0
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import bs58 from "bs58"
import { Data, Effect, Option, Result, Schema } from "effect"
import { getAddress, hashMessage, type Hex, recoverAddress } from "viem"
import type { ChainFamily } from "./Principal.ts"

/** The CAIP-2 id of Solana mainnet. @category constants */
export const SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"

/** The CAIP-2 id of Base mainnet. @category constants */
export const BASE_MAINNET = "eip155:8453"

/**
 * The fields of a sign-in message. `chainId` is CAIP-2 (`eip155:8453`, `solana:<ref>`).
 *
 * @category models
 */
export interface Fields {
  readonly domain: string
  readonly address: string
  readonly statement?: string | undefined
  readonly uri: string
  readonly version: string
  readonly chainId: string
  readonly nonce: string
  readonly issuedAt: string
  readonly expirationTime?: string | undefined
  readonly notBefore?: string | undefined
  readonly requestId?: string | undefined
  readonly resources?: ReadonlyArray<string> | undefined
}

/**
 * A decoded header: the message as signed, its fields and the signature bytes.
 *
 * @category models
 */
export interface Credential {
  readonly family: ChainFamily
  readonly fields: Fields
  readonly message: string
  readonly signature: Uint8Array
}

/**
 * What a credential is checked against.
 *
 * @category models
 */
export interface Policy {
  /** The public origin, e.g. `https://api.example.com` or `http://localhost:8787`. */
  readonly origin: string
  /** Accepted CAIP-2 chains. */
  readonly chains: ReadonlyArray<string>
  /** Longest accepted lifetime of a message, issuedAt to expirationTime. */
  readonly maxLifetimeMs: number
  /** Allowance for clocks running ahead of ours (issuedAt, notBefore). */
  readonly clockSkewMs: number
}

/**
 * Why a credential was refused. Logged, never shown: clients see one 401.
 *
 * @category errors
 */
export class SiwxInvalid extends Data.TaggedError("SiwxInvalid")<{ readonly reason: string }> {}

/**
 * The chain client could not be asked (smart-wallet verification).
 *
 * @category errors
 */
export class SiwxVerifierUnavailable extends Data.TaggedError("SiwxVerifierUnavailable")<{ readonly cause: unknown }> {}

/**
 * Asks a chain whether `signature` is valid for `address` over `message` (EIP-1271, EIP-6492),
 * e.g. viem's `publicClient.verifyMessage`.
 *
 * @category models
 */
export type EvmVerifier = (args: { readonly address: Hex; readonly message: string; readonly signature: Hex }) => Promise<boolean>

const invalid = (reason: string) => Result.fail(new SiwxInvalid({ reason }))

const familyOfChain = (chainId: string): ChainFamily | undefined =>
  chainId.startsWith("eip155:") ? "evm" : chainId.startsWith("solana:") ? "solana" : undefined

const chainReference = (chainId: string): string => chainId.slice(chainId.indexOf(":") + 1)

/**
 * The EIP-4361 text, byte for byte as `@x402/extensions` (through the siwe library) formats it.
 * Throws on an address with a wrong EIP-55 checksum.
 *
 * @category formatting
 */
export const formatEvm = (fields: Fields): string => {
  const head = `${fields.domain} wants you to sign in with your Ethereum account:\n${getAddress(fields.address)}`
  const lines = [
    `URI: ${fields.uri}`,
    `Version: ${fields.version}`,
    `Chain ID: ${chainReference(fields.chainId)}`,
    `Nonce: ${fields.nonce}`,
    `Issued At: ${fields.issuedAt}`
  ]
  if (fields.expirationTime) lines.push(`Expiration Time: ${fields.expirationTime}`)
  if (fields.notBefore) lines.push(`Not Before: ${fields.notBefore}`)
  if (fields.requestId !== undefined) lines.push(`Request ID: ${fields.requestId}`)
  if (fields.resources !== undefined) lines.push(["Resources:", ...fields.resources.map((r) => `- ${r}`)].join("\n"))
  const prefix = fields.statement === undefined ? `${head}\n\n` : `${head}\n\n${fields.statement}\n`
  return `${prefix}\n${lines.join("\n")}`
}

/**
 * The Solana text, byte for byte as `@x402/extensions` `formatSIWSMessage` formats it.
 *
 * @category formatting
 */
export const formatSolana = (fields: Fields): string => {
  const lines = [`${fields.domain} wants you to sign in with your Solana account:`, fields.address, ""]
  if (fields.statement) lines.push(fields.statement, "")
  lines.push(
    `URI: ${fields.uri}`,
    `Version: ${fields.version}`,
    `Chain ID: ${chainReference(fields.chainId)}`,
    `Nonce: ${fields.nonce}`,
    `Issued At: ${fields.issuedAt}`
  )
  if (fields.expirationTime) lines.push(`Expiration Time: ${fields.expirationTime}`)
  if (fields.notBefore) lines.push(`Not Before: ${fields.notBefore}`)
  if (fields.requestId) lines.push(`Request ID: ${fields.requestId}`)
  if (fields.resources && fields.resources.length > 0) {
    lines.push("Resources:")
    for (const resource of fields.resources) lines.push(`- ${resource}`)
  }
  return lines.join("\n")
}

/**
 * The text of a message for its family, or why it cannot be formatted.
 *
 * @category formatting
 */
export const format = (family: ChainFamily, fields: Fields): Result.Result<string, SiwxInvalid> => {
  try {
    return Result.succeed(family === "evm" ? formatEvm(fields) : formatSolana(fields))
  } catch {
    return invalid("address is not a valid EVM address")
  }
}

const HEADER = /^(\S+) wants you to sign in with your (Ethereum|Solana) account:$/

/**
 * Parses a sign-in message. Only canonical text parses: formatting the parsed fields must give
 * back the exact input.
 *
 * @category parsing
 */
export const parse = (text: string): Result.Result<{ readonly family: ChainFamily; readonly fields: Fields }, SiwxInvalid> => {
  const lines = text.split("\n")
  const header = HEADER.exec(lines[0] ?? "")
  if (header === null) return invalid("no sign-in header line")
  const family: ChainFamily = header[2] === "Ethereum" ? "evm" : "solana"
  const address = lines[1] ?? ""
  if (lines[2] !== "") return invalid("no blank line after the address")
  let index: number
  let statement: string | undefined
  const noStatement = family === "evm"
    ? lines[3] === "" && (lines[4] ?? "").startsWith("URI: ")
    : (lines[3] ?? "").startsWith("URI: ")
  if (noStatement) {
    index = family === "evm" ? 4 : 3
  } else {
    statement = lines[3]
    if (lines[4] !== "") return invalid("no blank line after the statement")
    index = 5
  }
  const take = (prefix: string): string | undefined => {
    const line = lines[index]
    if (line === undefined || !line.startsWith(prefix)) return undefined
    index++
    return line.slice(prefix.length)
  }
  const uri = take("URI: ")
  const version = take("Version: ")
  const chain = take("Chain ID: ")
  const nonce = take("Nonce: ")
  const issuedAt = take("Issued At: ")
  if (uri === undefined || version === undefined || chain === undefined || nonce === undefined || issuedAt === undefined) {
    return invalid("missing a required field")
  }
  const expirationTime = take("Expiration Time: ")
  const notBefore = take("Not Before: ")
  const requestId = take("Request ID: ")
  let resources: Array<string> | undefined
  if (take("Resources:") === "") {
    resources = []
    for (let line = take("- "); line !== undefined; line = take("- ")) resources.push(line)
  }
  if (index !== lines.length) return invalid("unexpected trailing lines")
  const fields: Fields = {
    domain: header[1]!,
    address,
    statement,
    uri,
    version,
    chainId: family === "evm" ? `eip155:${chain}` : `solana:${chain}`,
    nonce,
    issuedAt,
    expirationTime,
    notBefore,
    requestId,
    resources
  }
  return Result.flatMap(
    format(family, fields),
    (canonical) => canonical === text ? Result.succeed({ family, fields }) : invalid("message is not in canonical form")
  )
}

const SpecPayload = Schema.Struct({
  address: Schema.String,
  message: Schema.String,
  signature: Schema.String,
  timestamp: Schema.optionalKey(Schema.Finite),
  chainId: Schema.Union([Schema.Finite, Schema.String]),
  type: Schema.optionalKey(Schema.String)
})

const OptionalString = Schema.optionalKey(Schema.String)

const OfficialPayload = Schema.Struct({
  domain: Schema.String,
  address: Schema.String,
  statement: OptionalString,
  uri: Schema.String,
  version: Schema.String,
  chainId: Schema.String,
  type: OptionalString,
  nonce: Schema.String,
  issuedAt: Schema.String,
  expirationTime: OptionalString,
  notBefore: OptionalString,
  requestId: OptionalString,
  resources: Schema.optionalKey(Schema.Array(Schema.String)),
  signatureScheme: OptionalString,
  signature: Schema.String
})

const decodeSpec = Schema.decodeUnknownOption(SpecPayload)
const decodeOfficial = Schema.decodeUnknownOption(OfficialPayload)

/**
 * The CAIP-2 id of a spec payload's `chainId`: `8453`, `"8453"` and `"eip155:8453"` all name Base.
 *
 * @category parsing
 */
export const normalizeChainId = (chainId: number | string): string =>
  typeof chainId === "number"
    ? `eip155:${chainId}`
    : /^\d+$/.test(chainId)
    ? `eip155:${chainId}`
    : chainId

const HEX = /^0x(?:[0-9a-fA-F]{2})+$/
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

const decodeSignature = (family: ChainFamily, text: string): Result.Result<Uint8Array, SiwxInvalid> => {
  if (family === "evm") {
    return HEX.test(text) ? Result.succeed(Uint8Array.from(Buffer.from(text.slice(2), "hex"))) : invalid("signature is not hex")
  }
  try {
    const bytes = bs58.decode(text)
    if (bytes.length === 64) return Result.succeed(bytes)
  } catch {
    // not base58; base64 is tried next
  }
  if (BASE64.test(text)) {
    const bytes = Buffer.from(text, "base64")
    if (bytes.length === 64 && bytes.toString("base64") === text) return Result.succeed(Uint8Array.from(bytes))
  }
  return invalid("signature is neither base58 nor base64 of 64 bytes")
}

const sameAddress = (family: ChainFamily, a: string, b: string) => family === "evm" ? a.toLowerCase() === b.toLowerCase() : a === b

const MAX_HEADER_LENGTH = 16_384
const HEADER_BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/

/**
 * Decodes a `SIGN-IN-WITH-X` header value (base64 of JSON, either payload shape) into a
 * credential. Checks shape and consistency only; `validate` and `verifySignature` do the rest.
 *
 * @category parsing
 */
export const decodeHeader = (value: string): Result.Result<Credential, SiwxInvalid> => {
  if (value.length > MAX_HEADER_LENGTH || !HEADER_BASE64.test(value)) return invalid("header is not base64")
  let json: unknown
  try {
    json = JSON.parse(Buffer.from(value, value.includes("-") || value.includes("_") ? "base64url" : "base64").toString("utf8"))
  } catch {
    return invalid("header is not base64 of JSON")
  }
  const spec = decodeSpec(json)
  if (Option.isSome(spec)) {
    const payload = spec.value
    return Result.flatMap(parse(payload.message), ({ family, fields }) => {
      if (normalizeChainId(payload.chainId) !== fields.chainId) return invalid("chainId differs from the message")
      const typeFamily = payload.type === undefined ? "evm" : payload.type === "ed25519" ? "solana" : "evm"
      if (typeFamily !== family) return invalid("type differs from the message")
      if (!sameAddress(family, payload.address, fields.address)) return invalid("address differs from the message")
      return Result.map(decodeSignature(family, payload.signature), (signature) => ({
        family,
        fields,
        message: payload.message,
        signature
      }))
    })
  }
  const official = decodeOfficial(json)
  if (Option.isNone(official)) return invalid("payload has neither known shape")
  const { signature: signatureText, signatureScheme: _scheme, type: _type, ...fields } = official.value
  const family = familyOfChain(fields.chainId)
  if (family === undefined) return invalid("unsupported chain")
  return Result.flatMap(
    format(family, fields),
    (message) => Result.map(decodeSignature(family, signatureText), (signature) => ({ family, fields, message, signature }))
  )
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/
const NONCE = /^[A-Za-z0-9]{8,}$/
/** A Solana address: base58 of 32 bytes. @category constants */
export const SOLANA_ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/

const parseTime = (text: string): number | undefined => {
  if (!TIMESTAMP.test(text)) return undefined
  const ms = Date.parse(text)
  return Number.isNaN(ms) ? undefined : ms
}

/**
 * Checks a credential against the policy at `now` (ms). Succeeds with the instant the message
 * stops being valid, which is how long its nonce must be remembered.
 *
 * @category validation
 */
export const validate = (credential: Credential, policy: Policy, now: number): Result.Result<number, SiwxInvalid> => {
  const { fields } = credential
  const origin = new URL(policy.origin)
  if (fields.domain !== origin.host) return invalid("domain mismatch")
  let uri: URL
  try {
    uri = new URL(fields.uri)
  } catch {
    return invalid("uri is not a URL")
  }
  if (uri.origin !== origin.origin) return invalid("uri is not on the public origin")
  if (fields.version !== "1") return invalid("version is not 1")
  if (!policy.chains.includes(fields.chainId)) return invalid("chain not accepted")
  if (!NONCE.test(fields.nonce)) return invalid("nonce is not 8+ alphanumerics")
  if (credential.family === "solana" && !SOLANA_ADDRESS.test(fields.address)) return invalid("not a base58 address")
  const issuedAt = parseTime(fields.issuedAt)
  if (issuedAt === undefined) return invalid("issuedAt is not a timestamp")
  if (issuedAt > now + policy.clockSkewMs) return invalid("issued in the future")
  let expiresAt = issuedAt + policy.maxLifetimeMs
  if (fields.expirationTime) {
    const expiration = parseTime(fields.expirationTime)
    if (expiration === undefined) return invalid("expirationTime is not a timestamp")
    if (expiration - issuedAt > policy.maxLifetimeMs) return invalid("lifetime too long")
    expiresAt = expiration
  }
  if (now >= expiresAt) return invalid("expired")
  if (fields.notBefore) {
    const notBefore = parseTime(fields.notBefore)
    if (notBefore === undefined) return invalid("notBefore is not a timestamp")
    if (notBefore > now + policy.clockSkewMs) return invalid("not yet valid")
  }
  return Result.succeed(expiresAt)
}

const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n

const isCanonicalEoaSignature = (signature: Uint8Array): boolean => {
  if (signature.length !== 65) return false
  const v = signature[64]
  if (v !== 27 && v !== 28) return false
  return BigInt(`0x${Buffer.from(signature.subarray(32, 64)).toString("hex")}`) <= SECP256K1_HALF_N
}

const verifyEoa = (address: string, message: string, signature: Uint8Array): Effect.Effect<boolean> =>
  isCanonicalEoaSignature(signature)
    ? Effect.promise(() =>
      recoverAddress({ hash: hashMessage(message), signature: `0x${Buffer.from(signature).toString("hex")}` }).then(
        (recovered) => recovered.toLowerCase() === address.toLowerCase(),
        () => false
      )
    )
    : Effect.succeed(false)

const verifySolana = (address: string, message: string, signature: Uint8Array): boolean => {
  try {
    const publicKey = bs58.decode(address)
    if (publicKey.length !== 32 || ed25519.Point.fromBytes(publicKey).isSmallOrder()) return false
    return ed25519.verify(signature, new TextEncoder().encode(message), publicKey, { zip215: false })
  } catch {
    return false
  }
}

/**
 * Whether the signature is the address's over the message. EVM: a canonical EIP-191 signature of
 * the address's key is accepted locally; anything else goes to the chain (`evmVerifier`), which
 * answers for contract wallets (EIP-1271) and undeployed ones (EIP-6492).
 *
 * @category verification
 */
export const verifySignature = (
  credential: Credential,
  evmVerifier: Option.Option<EvmVerifier>
): Effect.Effect<boolean, SiwxVerifierUnavailable> => {
  const { fields, message, signature } = credential
  if (credential.family === "solana") return Effect.sync(() => verifySolana(fields.address, message, signature))
  return Effect.flatMap(verifyEoa(fields.address, message, signature), (ok) => {
    if (ok || Option.isNone(evmVerifier)) return Effect.succeed(ok)
    const verifier = evmVerifier.value
    return Effect.tryPromise({
      try: () =>
        verifier({
          address: getAddress(fields.address),
          message,
          signature: `0x${Buffer.from(signature).toString("hex")}`
        }),
      catch: (cause) => new SiwxVerifierUnavailable({ cause })
    })
  })
}
