/**
 * Who signed a payment, established offline from the payment alone, before any facilitator sees
 * it. A kept answer (the `payment-identifier` extension) goes only to the signer of the payment
 * that earned it, and a retry's payment may be spent already (its authorization used, its
 * transaction landed), so the facilitator cannot be asked: the signature itself is the proof.
 *
 * - EVM `exact`: the key recovered from the EIP-3009 `TransferWithAuthorization` typed data and its
 *   signature. Only the holder of that key can produce a signature that recovers to it, whatever
 *   the authorization names as `from`.
 * - Solana `exact`: the token transfer's authority (the payer, as `@x402/svm` names it), when the
 *   transaction carries its valid ed25519 signature over the message.
 * - Anything else (a contract wallet's EIP-1271 or EIP-6492 signature, a malformed payload): the
 *   digest of the payload, which only the holder of that very payment can present again.
 *
 * @since 0.1.0
 */
import type { X402 } from "@tollgate/core"
import { Effect, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { type Address, recoverTypedDataAddress } from "viem"
import { ExactEvmPayload } from "./Facilitator.ts"

const digestOf = (payment: X402.MatchedPayment): string =>
  `payload:${createHash("sha256").update(JSON.stringify(payment.payload.payload)).digest("hex")}`

const evmSigner = (payment: X402.MatchedPayment): Effect.Effect<Option.Option<string>> => {
  const evm = Schema.decodeUnknownOption(ExactEvmPayload)(payment.payload.payload)
  const { asset, extra, network } = payment.requirements
  const chainId = Number(network.slice("eip155:".length))
  if (Option.isNone(evm) || typeof extra?.["name"] !== "string" || typeof extra["version"] !== "string") {
    return Effect.succeed(Option.none())
  }
  const { authorization, signature } = evm.value
  return Effect.promise(async () => {
    // Loaded only when a payment names itself, as the facilitator loads the SDK.
    const { authorizationTypes } = await import("@x402/evm")
    try {
      const signer = await recoverTypedDataAddress({
        domain: { name: extra["name"] as string, version: extra["version"] as string, chainId, verifyingContract: asset as Address },
        types: authorizationTypes,
        primaryType: "TransferWithAuthorization",
        message: {
          from: authorization.from as Address,
          to: authorization.to as Address,
          value: BigInt(authorization.value),
          validAfter: BigInt(authorization.validAfter),
          validBefore: BigInt(authorization.validBefore),
          nonce: authorization.nonce as `0x${string}`
        },
        signature: signature as `0x${string}`
      })
      return Option.some(`evm:${signer}`)
    } catch {
      return Option.none()
    }
  })
}

const svmSigner = (payment: X402.MatchedPayment): Effect.Effect<Option.Option<string>> =>
  Effect.promise(async () => {
    const [{ getPublicKeyFromAddress, verifySignature }, { decodeTransactionFromPayload, getTokenPayerFromTransaction }] = await Promise
      .all([import("@solana/kit"), import("@x402/svm")])
    try {
      const transaction = decodeTransactionFromPayload(payment.payload.payload as { transaction: string })
      const payer = getTokenPayerFromTransaction(transaction)
      const signature = payer === "" ? null : transaction.signatures[payer as keyof typeof transaction.signatures]
      if (signature === null || signature === undefined)
        return Option.none()
      const key = await getPublicKeyFromAddress(payer as Parameters<typeof getPublicKeyFromAddress>[0])
      return (await verifySignature(key, signature, transaction.messageBytes)) ? Option.some(`solana:${payer}`) : Option.none()
    } catch {
      return Option.none()
    }
  })

/**
 * The identity a payment proves: `evm:<recovered key>`, `solana:<payer>`, or `payload:<digest>`.
 *
 * @category accessors
 */
export const signerOf = (payment: X402.MatchedPayment): Effect.Effect<string> =>
  (payment.requirements.network.startsWith("solana:") ? svmSigner(payment) : evmSigner(payment)).pipe(
    Effect.map(Option.getOrElse(() => digestOf(payment)))
  )
