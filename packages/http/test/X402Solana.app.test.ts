import type { KeyPairSigner } from "@solana/kit"
import * as PaymentFacilitator from "@tollgate/backends/payment/PaymentFacilitator"
import { CreditLedger, Money, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect, Layer, Redacted } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as SolanaChain from "./support/SolanaChain.ts"
import * as X402Chain from "./support/X402Chain.ts"

const ORIGIN = "http://localhost"
const TOP_UP = `${ORIGIN}/api/v1/x402/top-up`

let chain: SolanaChain.Chain
let config: X402.Config
let treasury: string
let handler: (request: Request) => Promise<Response>
let dispose: () => Promise<void>

const fetchApp = (input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))

const balanceUsd = async (address: string) =>
  ((await (await fetchApp(`${ORIGIN}/api/v1/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd

const officialClient = (signer: KeyPairSigner) => {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  client.register("solana:*", chain.scheme(signer))
  return wrapFetchWithPayment(fetchApp, client)
}

const solanaRequirement = (usd: number) => X402.requirements(config, Money.unsafeNano(usd * Money.NANO_PER_USD))[1]!

/** A payment the official client scheme signs for `signed`, presented as paying `accepted`. */
const paymentFor = async (signer: KeyPairSigner, signed: X402.PaymentRequirements, accepted = signed) => {
  const { payload } = await chain.scheme(signer).createPaymentPayload(2, signed as never)
  return X402Chain.paymentHeader(accepted, payload)
}

const submit = (header: string, query = "") => fetchApp(`${TOP_UP}${query}`, { method: "POST", headers: { "PAYMENT-SIGNATURE": header } })

const refusalReason = async (response: Response) => {
  expect(response.status).toBe(402)
  return decodePaymentRequiredHeader(response.headers.get("payment-required")!).error
}

beforeAll(async () => {
  chain = await SolanaChain.start()
  treasury = await chain.receiver()
  config = X402.makeConfig({
    publicOrigin: ORIGIN,
    payTo: { evm: privateKeyToAccount(generatePrivateKey()).address, solana: treasury },
    solanaFeePayer: chain.feePayer
  })
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const app = App.layer(X402Route.routes).pipe(
    Layer.provide(Layer.mergeAll(
      X402.layer(config),
      CreditLedger.layerMemory,
      PaymentFacilitator.layer({
        svm: { networks: { [X402.SOLANA_MAINNET]: { rpcUrl: chain.rpc.url } }, feePayerKey: Redacted.make(chain.feePayerKey) }
      }),
      Auth.layer({ signingKey, publicOrigin: ORIGIN }).pipe(Layer.provide(AuthStore.layerMemory)),
      ServiceInfo.layer({ version: "test", hostName: "test-host" })
    ))
  )
  const web = Handlers.toWebHandler(app)
  handler = web.handler
  dispose = web.dispose
}, 60_000)

afterAll(async () => {
  await dispose?.()
  await chain?.stop()
})

describe("Solana USDC top-ups are settled by tollgate itself: the official client pays, USDC moves on chain, the wallet is credited", () => {
  it("the official client (@x402/fetch + @x402/svm) pays $5, then $7.50; the balance shows 12.50 and the treasury holds 12.50 USDC", async () => {
    const payer = await chain.wallet(100_000_000n)
    const first = await officialClient(payer)(TOP_UP, { method: "POST" })
    expect(first.status).toBe(200)
    expect(await first.json()).toMatchObject({
      walletAddress: payer.address,
      network: X402.SOLANA_MAINNET,
      creditedUsd: "5",
      balanceUsd: "5"
    })
    expect(decodePaymentResponseHeader(first.headers.get("payment-response")!)).toMatchObject({ success: true, payer: payer.address })
    const second = await officialClient(payer)(`${TOP_UP}?amountUsd=7.5`, { method: "POST" })
    expect(second.status).toBe(200)
    expect(await balanceUsd(payer.address)).toBe("12.5")
    expect(await chain.usdcOf(treasury)).toBe(12_500_000n)
    expect(await chain.usdcOf(payer.address)).toBe(87_500_000n)
  })
})

describe("Refused Solana payments credit nothing and move nothing", () => {
  const expectNothingMoved = async (payer: KeyPairSigner, run: () => Promise<void>) => {
    const treasuryBefore = await chain.usdcOf(treasury)
    const payerBefore = await chain.usdcOf(payer.address)
    await run()
    expect(await balanceUsd(payer.address)).toBe("0")
    expect(await chain.usdcOf(treasury)).toBe(treasuryBefore)
    expect(await chain.usdcOf(payer.address)).toBe(payerBefore)
  }

  it("a replayed transaction: credited once, the replay refused", async () => {
    const payer = await chain.wallet(100_000_000n)
    const header = await paymentFor(payer, solanaRequirement(5))
    expect((await submit(header)).status).toBe(200)
    expect(await refusalReason(await submit(header))).toBe("duplicate_settlement")
    expect(await balanceUsd(payer.address)).toBe("5")
    expect(await chain.usdcOf(payer.address)).toBe(95_000_000n)
  })

  it("an altered transaction (its amount raised after the payer signed)", async () => {
    const payer = await chain.wallet(100_000_000n)
    const { payload } = await chain.scheme(payer).createPaymentPayload(2, solanaRequirement(5) as never)
    const bytes = Buffer.from(payload["transaction"] as string, "base64")
    // TransferChecked's data: the instruction tag 12, then the amount as a little-endian u64.
    const signedAmount = Buffer.from([12, ...Buffer.from(new BigUint64Array([5_000_000n]).buffer)])
    const at = bytes.indexOf(signedAmount)
    expect(at).toBeGreaterThan(0)
    bytes.writeBigUInt64LE(50_000_000n, at + 1)
    await expectNothingMoved(payer, async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader(solanaRequirement(5), { transaction: bytes.toString("base64") }))))
        .toBe("invalid_exact_svm_payload_signature_invalid")
    })
  })

  it("a transfer of another mint", async () => {
    const payer = await chain.wallet(100_000_000n)
    const otherMint = (await chain.wallet(0n)).address
    chain.rpc.createMint(otherMint, 6)
    await chain.rpc.fund(otherMint, payer.address, 100_000_000n)
    await chain.rpc.fund(otherMint, treasury, 0n)
    await expectNothingMoved(payer, async () => {
      const header = await paymentFor(payer, { ...solanaRequirement(5), asset: otherMint }, solanaRequirement(5))
      expect(await refusalReason(await submit(header))).toBe("invalid_exact_svm_payload_mint_mismatch")
    })
  })

  it("a transfer to another receiver", async () => {
    const payer = await chain.wallet(100_000_000n)
    const elsewhere = await chain.receiver()
    await expectNothingMoved(payer, async () => {
      const header = await paymentFor(payer, { ...solanaRequirement(5), payTo: elsewhere }, solanaRequirement(5))
      expect(await refusalReason(await submit(header))).toBe("invalid_exact_svm_payload_recipient_mismatch")
    })
  })

  it("an amount under 5 USD: asked for, a 400; signed against the 5 USD requirement, a 402", async () => {
    const payer = await chain.wallet(100_000_000n)
    await expectNothingMoved(payer, async () => {
      expect((await fetchApp(`${TOP_UP}?amountUsd=4.99`, { method: "POST" })).status).toBe(400)
      const header = await paymentFor(payer, { ...solanaRequirement(5), amount: "4990000" }, solanaRequirement(5))
      expect(await refusalReason(await submit(header))).toBe("invalid_exact_svm_payload_amount_mismatch")
    })
  })

  it("a transaction whose blockhash has expired", async () => {
    const payer = await chain.wallet(100_000_000n)
    const header = await paymentFor(payer, solanaRequirement(5))
    chain.rpc.expireBlockhash()
    await expectNothingMoved(payer, async () => {
      expect(await refusalReason(await submit(header))).toBe("invalid_exact_svm_transaction_simulation_failed")
    })
  })
})
