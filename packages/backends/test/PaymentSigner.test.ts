/**
 * Who signed a payment, established from the payment alone: what a payment's `payment-identifier`
 * replay is bound to. Offline, so no chain: the EIP-3009 authorizations are signed by viem
 * accounts the way the official client signs them.
 */
import { X402 } from "@tollgate/core"
import { authorizationTypes } from "@x402/evm"
import { Effect } from "effect"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import * as PaymentSigner from "../src/payment/PaymentSigner.ts"

const requirements: X402.PaymentRequirements = {
  scheme: "exact",
  network: X402.BASE_MAINNET,
  asset: X402.BASE_USDC,
  amount: "10000",
  payTo: privateKeyToAccount(generatePrivateKey()).address,
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" }
}

const payment = async (signer: PrivateKeyAccount, from = signer.address): Promise<X402.MatchedPayment> => {
  const authorization = {
    from,
    to: requirements.payTo as `0x${string}`,
    value: "10000",
    validAfter: "0",
    validBefore: "9999999999",
    nonce: `0x${"ab".repeat(32)}` as const
  }
  const signature = await signer.signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: X402.BASE_USDC },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: { ...authorization, value: 10000n, validAfter: 0n, validBefore: 9999999999n }
  })
  return { requirements, payload: { x402Version: 2, accepted: requirements, payload: { authorization, signature } } }
}

const signerOf = (matched: X402.MatchedPayment) => Effect.runPromise(PaymentSigner.signerOf(matched))

describe("The signer of an EVM payment is the key its EIP-3009 signature recovers to, whatever the authorization names", () => {
  it("a payment signed by its payer: evm:<the payer>", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    expect(await signerOf(await payment(payer))).toBe(`evm:${payer.address}`)
  })

  it("another key's payment naming the payer as from: evm:<that key>, not the payer", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const other = privateKeyToAccount(generatePrivateKey())
    expect(await signerOf(await payment(other, payer.address))).toBe(`evm:${other.address}`)
  })

  it("a signature that recovers to no key (a contract wallet's): the payload's digest, the same for the same payload only", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const signed = await payment(payer)
    const wrapped = (signature: string): X402.MatchedPayment => ({
      ...signed,
      payload: { ...signed.payload, payload: { ...signed.payload.payload, signature } }
    })
    const long = `0x${"11".repeat(200)}`
    const first = await signerOf(wrapped(long))
    expect(first).toMatch(/^payload:[0-9a-f]{64}$/)
    expect(await signerOf(wrapped(long))).toBe(first)
    expect(await signerOf(wrapped(`0x${"22".repeat(200)}`))).not.toBe(first)
  })
})
