/**
 * The matching of a client's payment against the requirements rebuilt for its request: the header
 * decoded, a v1 payload of a legacy client read as v2, and the `accepted` requirement found among
 * the candidates by the official server's rule.
 *
 * @since 0.1.0
 */
import { Data, Option, Result, Schema } from "effect"
import { BASE_MAINNET, SOLANA_MAINNET } from "./Config.ts"
import { type Correction, decodeHeader, PaymentPayload, PaymentPayloadV1, type PaymentRequirements } from "./Wire.ts"

const LEGACY_NETWORKS: Readonly<Record<string, string>> = {
  base: BASE_MAINNET,
  "base-sepolia": "eip155:84532",
  solana: SOLANA_MAINNET,
  "solana-devnet": "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
}

const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v)

/** Equal as JSON, keys in any order; values that are not objects are compared as they are. */
const sameJson = (a: unknown, b: unknown) =>
  a === b || (typeof a === "object" && typeof b === "object" && canonicalJson(a) === canonicalJson(b))

const extraMatches = (server: PaymentRequirements["extra"], client: PaymentRequirements["extra"]) =>
  Object.entries(server ?? {}).every(([key, value]) => sameJson(client?.[key], value))

/**
 * The requirement `accepted` chose: equal in every field but `extra`, where every server key must
 * be present and equal and the client may add keys (the official server's rule). Written here
 * because `@x402/core` exposes its matcher only as a method of `x402ResourceServer`, which would
 * need every scheme's server package registered just to compare two objects.
 *
 * @category matching
 */
export const findMatching = (
  candidates: ReadonlyArray<PaymentRequirements>,
  accepted: PaymentRequirements
): Option.Option<PaymentRequirements> =>
  Option.fromNullishOr(candidates.find((candidate) =>
    candidate.scheme === accepted.scheme &&
    candidate.network === accepted.network &&
    candidate.asset === accepted.asset &&
    candidate.amount === accepted.amount &&
    candidate.payTo === accepted.payTo &&
    candidate.maxTimeoutSeconds === accepted.maxTimeoutSeconds &&
    extraMatches(candidate.extra, accepted.extra)
  ))

/**
 * A payment and the requirement it pays.
 *
 * @category models
 */
export interface MatchedPayment {
  readonly payload: PaymentPayload
  readonly requirements: PaymentRequirements
}

/**
 * Why a payment header was refused; the reason goes into the fresh 402's `error`, and the
 * correction, if any, into its scheme's entries.
 *
 * @category errors
 */
export class PaymentRejected extends Data.TaggedError("PaymentRejected")<{
  readonly reason: string
  readonly message: string
  readonly correction?: Correction | undefined
}> {}

const decodeV1 = Schema.decodeUnknownOption(PaymentPayloadV1)
const decodeV2 = Schema.decodeUnknownOption(PaymentPayload)

const invalidHeader = new PaymentRejected({ reason: "invalid_payload", message: "The payment header is not base64 JSON" })
const malformed = new PaymentRejected({ reason: "invalid_payload", message: "The payment payload is malformed" })
const noMatch = (message: string) => new PaymentRejected({ reason: "No matching payment requirements", message })

/**
 * Decodes a payment header and matches it against `candidates`, the requirements rebuilt for the
 * request. A v1 payload (legacy clients) matches the candidate of its scheme and network.
 *
 * A plain function: nothing here waits or can fail but with a refusal, and every paid request
 * with a payment takes it, where a traced `Effect.fn` cost a span and a stack capture per call
 * (`bench/voucher.ts`).
 *
 * @category matching
 */
export const decodePayment = (
  header: string,
  candidates: ReadonlyArray<PaymentRequirements>
): Result.Result<MatchedPayment, PaymentRejected> => {
  const json = decodeHeader(header)
  if (Option.isNone(json)) return Result.fail(invalidHeader)
  // Only a payload that says it is v1 is decoded as one: a failed decode costs more than the check.
  const v1 = typeof json.value === "object" && json.value !== null && (json.value as { readonly x402Version?: unknown }).x402Version === 1
    ? decodeV1(json.value)
    : Option.none()
  if (Option.isSome(v1)) {
    const network = LEGACY_NETWORKS[v1.value.network] ?? v1.value.network
    const match = candidates.find((c) => c.scheme === v1.value.scheme && c.network === network)
    if (match === undefined) return Result.fail(noMatch("No requirement matches the payment"))
    const payload: PaymentPayload = { x402Version: 2, accepted: match, payload: v1.value.payload }
    return Result.succeed({ payload, requirements: match })
  }
  const payload = decodeV2(json.value)
  if (Option.isNone(payload)) return Result.fail(malformed)
  const match = findMatching(candidates, payload.value.accepted)
  if (Option.isNone(match)) return Result.fail(noMatch("The accepted requirement does not match this request's requirements"))
  return Result.succeed({ payload: payload.value, requirements: match.value })
}
