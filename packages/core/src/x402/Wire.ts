/**
 * The x402 v2 wire format: the payment requirements and payloads as schemas, the header names, and
 * the `PAYMENT-REQUIRED` / `PAYMENT-SIGNATURE` / `PAYMENT-RESPONSE` header codecs (the encoding
 * of `@x402/core/http`, on Node's base64). Everything here is pure.
 *
 * @since 0.1.0
 */
import { Option, Schema } from "effect"

/**
 * The x402 protocol version tollgate emits. A number: the official client looks schemes up by it.
 *
 * @category constants
 */
export const VERSION = 2

/**
 * Request headers, lower-cased. `PAYMENT-SIGNATURE` is current; `X-402-Payment` and `X-PAYMENT`
 * are legacy names still accepted.
 *
 * @category constants
 */
export const headers = {
  paymentRequired: "payment-required",
  paymentSignature: "payment-signature",
  legacyPayment: ["x-402-payment", "x-payment"],
  paymentResponse: "payment-response",
  signIn: "sign-in-with-x",
  legacySignIn: "x-sign-in-with-x"
} as const

/** @category schemas */
export const ResourceInfo = Schema.Struct({
  url: Schema.String,
  description: Schema.optionalKey(Schema.String),
  mimeType: Schema.optionalKey(Schema.String)
})

/** @category models */
export type ResourceInfo = typeof ResourceInfo.Type

/** @category schemas */
export const PaymentRequirements = Schema.Struct({
  scheme: Schema.String,
  network: Schema.String,
  asset: Schema.String,
  amount: Schema.String,
  payTo: Schema.String,
  maxTimeoutSeconds: Schema.Number,
  extra: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/** @category models */
export type PaymentRequirements = typeof PaymentRequirements.Type

/**
 * What a client sends in `PAYMENT-SIGNATURE`: the requirement it chose, verbatim, and the
 * scheme's payload (for exact EVM, an EIP-3009 authorization and its signature; for Solana, a
 * partially signed transaction).
 *
 * @category schemas
 */
export const PaymentPayload = Schema.Struct({
  x402Version: Schema.Literal(2),
  resource: Schema.optionalKey(ResourceInfo),
  accepted: PaymentRequirements,
  payload: Schema.Record(Schema.String, Schema.Unknown),
  extensions: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/** @category models */
export type PaymentPayload = typeof PaymentPayload.Type

/**
 * The v1 payload of legacy clients: the scheme and a legacy network name instead of `accepted`.
 *
 * @category schemas
 */
export const PaymentPayloadV1 = Schema.Struct({
  x402Version: Schema.Literal(1),
  scheme: Schema.String,
  network: Schema.String,
  payload: Schema.Record(Schema.String, Schema.Unknown)
})

/**
 * What a refusal adds to the `extra` of its scheme's entries in the fresh 402, for the client to
 * correct its next payment from: `batch-settlement`'s corrective 402 carries the channel's state
 * and its last voucher (`BatchSettlement.correction`).
 *
 * @category models
 */
export interface Correction {
  readonly scheme: string
  readonly extra: Readonly<Record<string, unknown>>
}

/** @category models */
export interface SettleResponse {
  readonly success: boolean
  readonly transaction: string
  readonly network: string
  readonly payer?: string
  /** `upto`: the base units settled, the call's actual charge. */
  readonly amount?: string
  readonly errorReason?: string
  readonly errorMessage?: string
  /** `batch-settlement`: the call's charge and the channel's state (`BatchSettlement.responseExtra`). */
  readonly extra?: Readonly<Record<string, unknown>>
}

/**
 * The `payment-identifier` extension (`@x402/extensions`): a client may name its payment with an
 * id of 16 to 128 letters, digits, `_` and `-`, and a retry carrying the same id is answered from
 * the first attempt. Declared as optional on every metered endpoint's 402.
 *
 * @category constants
 */
export const PAYMENT_IDENTIFIER = "payment-identifier"

/**
 * The extension's declaration, as `declarePaymentIdentifierExtension(false)` writes it.
 *
 * @category constants
 */
export const paymentIdentifierDeclaration = {
  info: { required: false },
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { required: { type: "boolean" }, id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" } },
    required: ["required"]
  }
} as const

/**
 * The id a payment names itself with (`extensions["payment-identifier"].info.id`), when valid.
 *
 * @category accessors
 */
export const paymentIdentifier = (payload: PaymentPayload): Option.Option<string> => {
  const extension = payload.extensions?.[PAYMENT_IDENTIFIER] as { readonly info?: { readonly id?: unknown } } | undefined
  const id = extension?.info?.id
  return typeof id === "string" && /^[a-zA-Z0-9_-]{16,128}$/.test(id) ? Option.some(id) : Option.none()
}

/**
 * Standard base64 (with padding) of the UTF-8 JSON, the encoding of every x402 header, as
 * `@x402/core` writes it. Node's base64 rather than `@x402/core`'s coder, which goes through a
 * binary string byte by byte: a voucher's header, where the official client echoes every
 * extension of the 402, is about 5 KB, and its coding was a tenth of a voucher-paid call's CPU
 * (`bench/voucher.ts`).
 *
 * @category encoding
 */
export const encodeHeader = (value: unknown): string => Buffer.from(JSON.stringify(value), "utf8").toString("base64")

/**
 * The `PAYMENT-RESPONSE` header of a settlement.
 *
 * @category encoding
 */
export const encodePaymentResponse = (response: SettleResponse): string => encodeHeader(response)

const EQUALS = 0x3d

/**
 * Decodes an x402 header as `@x402/core`'s decoder does (strict standard base64, then JSON);
 * `None` when it is not one. The empty string, which that decoder would read as nothing, is none
 * too.
 *
 * Strictness is checked on the decoded length rather than with a pattern over the text: Node's
 * decoder skips a character outside the alphabet and stops at a `=` before the end, so a header
 * with any such character decodes to fewer bytes than its length promises, and only the URL-safe
 * `-` and `_`, which it takes, are looked for. A pattern over a voucher's 5 KB header cost half as
 * much as its JSON parse (`bench/voucher.ts`).
 *
 * @category encoding
 */
export const decodeHeader = (value: string): Option.Option<unknown> => {
  const trimmed = value.trim()
  const length = trimmed.length
  if (length === 0 || length % 4 !== 0 || trimmed.includes("-") || trimmed.includes("_")) return Option.none()
  const padding = trimmed.charCodeAt(length - 1) !== EQUALS ? 0 : trimmed.charCodeAt(length - 2) !== EQUALS ? 1 : 2
  if (padding === 2 && trimmed.charCodeAt(length - 3) === EQUALS) return Option.none()
  const bytes = Buffer.from(trimmed, "base64")
  if (bytes.length !== (length / 4) * 3 - padding) return Option.none()
  try {
    return Option.some(JSON.parse(bytes.toString("utf8")) as unknown)
  } catch {
    return Option.none()
  }
}

/**
 * A resource URL without its query string or fragment: a 402 names the resource, not the request,
 * and a long query copied into `PAYMENT-REQUIRED` (base64, so a third larger) would make a header
 * block node and undici clients refuse to read.
 *
 * @category constructors
 */
export const resourceUrl = (url: string): string => {
  const end = url.search(/[?#]/)
  return end < 0 ? url : url.slice(0, end)
}

/**
 * The payment header of a request (current name first, then the legacy ones), if any.
 *
 * @category accessors
 */
export const paymentHeader = (requestHeaders: Readonly<Record<string, string | undefined>>): Option.Option<string> =>
  Option.fromNullishOr(
    [headers.paymentSignature, ...headers.legacyPayment].map((name) => requestHeaders[name]).find((v) => v !== undefined)
  )
