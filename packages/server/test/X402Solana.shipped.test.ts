import { createKeyPairSignerFromBytes, generateKeyPairSigner, type KeyPairSigner } from "@solana/kit"
import { X402 } from "@tollgate/core"
import { ShippedServer, SolanaRpc } from "@tollgate/testkit"
import { decodePaymentRequiredHeader, decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { ExactSvmScheme } from "@x402/svm/exact/client"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let rpc: SolanaRpc.SolanaRpc
let server: ShippedServer.ShippedServer
let treasury: string
const feePayerKey = SolanaRpc.keyPairBytes()
let feePayer: string

const wallet = async (units: bigint) => {
  const signer = await generateKeyPairSigner()
  await rpc.fund(X402.SOLANA_USDC, signer.address, units)
  return signer
}

const officialClient = (signer: KeyPairSigner) => {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  client.register("solana:*", new ExactSvmScheme(signer, { rpcUrl: rpc.url }))
  return { client, fetch: wrapFetchWithPayment(fetch, client) }
}

const balanceUsd = async (address: string) =>
  ((await (await fetch(`${server.origin}/api/v1/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd

const x402Section = (solana: Record<string, unknown>) => ({
  x402: { payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", solana: treasury }, solana }
})

beforeAll(async () => {
  rpc = await SolanaRpc.start()
  rpc.createMint(X402.SOLANA_USDC, 6)
  feePayer = (await createKeyPairSignerFromBytes(feePayerKey)).address
  rpc.airdrop(feePayer, 10_000_000_000n)
  treasury = (await generateKeyPairSigner()).address
  await rpc.fund(X402.SOLANA_USDC, treasury, 0n)
  server = await ShippedServer.start({ config: x402Section({ rpcUrl: rpc.url, feePayerKey: Array.from(feePayerKey) }) })
})

afterAll(async () => {
  await server?.stop()
  await rpc?.stop()
})

describe("The shipped server settles Solana USDC top-ups itself: x402.solana with an RPC URL and a fee payer key", () => {
  it("the official client pays $5 and $7.50 over HTTP; the balance shows 12.50 and USDC moved on chain", async () => {
    const payer = await wallet(50_000_000n)
    const { fetch: pay } = officialClient(payer)
    const first = await pay(`${server.origin}/api/v1/x402/top-up`, { method: "POST" })
    expect(first.status).toBe(200)
    expect(await first.json()).toMatchObject({ walletAddress: payer.address, network: X402.SOLANA_MAINNET, balanceUsd: "5" })
    const second = await pay(`${server.origin}/api/v1/x402/top-up?amountUsd=7.50`, { method: "POST" })
    expect(second.status).toBe(200)
    expect(await balanceUsd(payer.address)).toBe("12.5")
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, treasury)).toBe(12_500_000n)
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(37_500_000n)
  })

  it("a replayed payment and a payment to another receiver are 402s that credit nothing more", async () => {
    const payer = await wallet(50_000_000n)
    const { client } = officialClient(payer)
    const topUp = `${server.origin}/api/v1/x402/top-up`
    const required = decodePaymentRequiredHeader((await fetch(topUp, { method: "POST" })).headers.get("payment-required")!)
    const solana = required.accepts.find((accept) => accept.network.startsWith("solana:"))!
    expect(solana.extra).toEqual({ feePayer })
    const payment = await client.createPaymentPayload({ ...required, accepts: [solana] })
    const header = encodePaymentSignatureHeader(payment)
    expect((await fetch(topUp, { method: "POST", headers: { "PAYMENT-SIGNATURE": header } })).status).toBe(200)
    const replay = await fetch(topUp, { method: "POST", headers: { "PAYMENT-SIGNATURE": header } })
    expect(replay.status).toBe(402)
    expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).toBe("duplicate_settlement")

    const elsewhere = (await generateKeyPairSigner()).address
    const misdirected = await client.createPaymentPayload({ ...required, accepts: [{ ...solana, payTo: elsewhere }] })
    const refused = await fetch(topUp, {
      method: "POST",
      headers: { "PAYMENT-SIGNATURE": encodePaymentSignatureHeader({ ...misdirected, accepted: solana }) }
    })
    expect(refused.status).toBe(402)
    expect(decodePaymentRequiredHeader(refused.headers.get("payment-required")!).error).toBe("invalid_exact_svm_payload_recipient_mismatch")
    expect(await balanceUsd(payer.address)).toBe("5")
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(45_000_000n)
  })
})

describe("A Solana payment sent with a metered call pays for it (exact, @x402/svm on litesvm)", () => {
  it("the plain client pays the text parser 0.01 USDC from Solana: 200, the USDC that moved is the signed amount, no credit is left; a replay is refused", async () => {
    const payer = await wallet(1_000_000n)
    const client = new x402Client()
    client.register("solana:*", new ExactSvmScheme(payer, { rpcUrl: rpc.url }))
    const sent = { payment: "" }
    const recording: typeof fetch = (input, init) => {
      const request = new Request(input, init)
      sent.payment = request.headers.get("payment-signature") ?? sent.payment
      return fetch(request)
    }
    const form = () => {
      const data = new FormData()
      data.append("file", new Blob(["Solana pays per call."], { type: "text/plain" }), "note.txt")
      return data
    }
    const parser = `${server.origin}/api/v1/augment/text-parser`
    const treasuryBefore = await rpc.tokenBalance(X402.SOLANA_USDC, treasury)
    const response = await wrapFetchWithPayment(recording, client)(parser, { method: "POST", body: form() })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ text: expect.stringContaining("pays per call") })
    const signed = decodePaymentSignatureHeader(sent.payment)
    expect(signed.accepted).toMatchObject({ scheme: "exact", network: X402.SOLANA_MAINNET, amount: "10000" })
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(1_000_000n - 10_000n)
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, treasury)).toBe(treasuryBefore + 10_000n)
    expect(await balanceUsd(payer.address)).toBe("0")

    const replay = await fetch(parser, { method: "POST", headers: { "PAYMENT-SIGNATURE": sent.payment }, body: form() })
    expect(replay.status).toBe(402)
    expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).toBe("duplicate_settlement")
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(1_000_000n - 10_000n)
    expect(await balanceUsd(payer.address)).toBe("0")
  })
})

describe("payment-identifier on Solana: the kept answer goes to the wallet that signed the first payment, not to another one sending the id", () => {
  it("the payer signs anew with the same id: the kept 200, no USDC moves again; another wallet with that id: 402 payment_identifier_mismatch, nothing moves", async () => {
    const id = generatePaymentId()
    const sent = { payments: [] as Array<string> }
    const recording: typeof fetch = (input, init) => {
      const request = new Request(input, init)
      const payment = request.headers.get("payment-signature")
      if (payment !== null) sent.payments.push(payment)
      return fetch(request)
    }
    const payWith = (signer: KeyPairSigner) => {
      const client = new x402Client()
      client.register("solana:*", new ExactSvmScheme(signer, { rpcUrl: rpc.url }))
      client.onBeforePaymentCreation(async ({ paymentRequired }) => {
        appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id)
      })
      const data = new FormData()
      data.append("file", new Blob(["Solana pays once."], { type: "text/plain" }), "note.txt")
      return wrapFetchWithPayment(recording, client)(`${server.origin}/api/v1/augment/text-parser`, { method: "POST", body: data })
    }
    const payer = await wallet(1_000_000n)
    expect((await payWith(payer)).status).toBe(200)
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(1_000_000n - 10_000n)

    const retried = await payWith(payer)
    expect(retried.status).toBe(200)
    expect(retried.headers.get("idempotent-replayed")).toBe("true")
    expect(await retried.json()).toMatchObject({ text: expect.stringContaining("pays once") })
    // Signed anew, not the same bytes: the replay rests on the signer, proven from the signature.
    expect(decodePaymentSignatureHeader(sent.payments[1]!).payload).not.toEqual(decodePaymentSignatureHeader(sent.payments[0]!).payload)
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(1_000_000n - 10_000n)

    const other = await wallet(1_000_000n)
    const taken = await payWith(other)
    expect(taken.status).toBe(402)
    expect(decodePaymentRequiredHeader(taken.headers.get("payment-required")!).error).toBe("payment_identifier_mismatch")
    expect(await rpc.tokenBalance(X402.SOLANA_USDC, other.address)).toBe(1_000_000n)
    expect(await balanceUsd(other.address)).toBe("0")
  })
})

describe("A bad Solana fee payer key stops the server at start with one line", () => {
  it("a key that is not 64 bytes", async () => {
    const instance = await ShippedServer.spawn({ config: x402Section({ rpcUrl: rpc.url, feePayerKey: "abc" }) })
    expect(await instance.exited).not.toBe(0)
    expect(instance.output()).toContain("TOLLGATE_CONFIG.x402.solana.feePayerKey: must be a 64-byte key pair")
  })
})
