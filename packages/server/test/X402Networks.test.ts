/**
 * A network is offered in a 402 only where something settles its payments, in dev mode as in
 * production: an entry nothing settles would have every payment refused.
 */
import { generateKeyPairSigner } from "@solana/kit"
import { X402 } from "@tollgate/core"
import { Anvil, ShippedServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { describe, expect, it } from "vitest"

const networksOffered = async (config: unknown) => {
  const server = await ShippedServer.start({ config })
  try {
    const answer = await fetch(`${server.origin}/api/v1/x402/top-up`, { method: "POST" })
    expect(answer.status).toBe(402)
    return decodePaymentRequiredHeader(answer.headers.get("payment-required")!).accepts.map((accept) => accept.network)
  } finally {
    await server.stop()
  }
}

describe("A network is offered only where something settles it: Solana's receiver and fee payer alone offer nothing", () => {
  it("a dev server with payTo.solana and solanaFeePayer, settling only Base, offers Base only", async () => {
    const payTo = { evm: "0x1111111111111111111111111111111111111111", solana: (await generateKeyPairSigner()).address }
    const solanaFeePayer = (await generateKeyPairSigner()).address
    expect(
      await networksOffered({
        x402: { payTo, solanaFeePayer, relayerKey: Anvil.devPrivateKey, evmRpcUrl: "http://127.0.0.1:9" }
      })
    ).toEqual([X402.BASE_MAINNET])
  })

  it("the same server with a hosted facilitator, which settles Solana, offers both", async () => {
    const payTo = { evm: "0x1111111111111111111111111111111111111111", solana: (await generateKeyPairSigner()).address }
    const solanaFeePayer = (await generateKeyPairSigner()).address
    expect(
      await networksOffered({
        x402: {
          payTo,
          solanaFeePayer,
          relayerKey: Anvil.devPrivateKey,
          evmRpcUrl: "http://127.0.0.1:9",
          facilitatorUrl: "http://127.0.0.1:9"
        }
      })
    ).toEqual([X402.BASE_MAINNET, X402.SOLANA_MAINNET])
  })
})
