import { Money, X402 } from "@tollgate/core"
import { Effect, Option } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as PaymentFacilitator from "../src/payment/PaymentFacilitator.ts"

const FEE_PAYER = "2wmVCSfPxGPjrnMMn7rchp4uaeoTqN39mXFC2zhPdri9"
const PAYER = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"

interface Seen {
  readonly path: string
  readonly authorization: string | undefined
  readonly body: unknown
}

/**
 * A facilitator speaking the x402 HTTP protocol. The Solana transaction in the payload decides its
 * answer: "ok" verifies and settles, "bad" is refused with a 400 verdict, "fails" verifies but does
 * not settle, "down" is a 500 without a verdict, "slow" never answers in time.
 */
const startFacilitator = async () => {
  const seen: Array<Seen> = []
  const server = Http.createServer((request, response) => {
    let text = ""
    request.on("data", (chunk: Buffer) => (text += chunk.toString()))
    request.on("end", () => {
      const body = text === ""
        ? undefined
        : JSON.parse(text) as { paymentPayload: { payload: { transaction: string } }; paymentRequirements: { network: string } }
      seen.push({ path: request.url ?? "", authorization: request.headers.authorization, body })
      const reply = (status: number, json: unknown) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(JSON.stringify(json))
      }
      if (request.url === "/supported") {
        return reply(200, {
          kinds: [
            { x402Version: 2, scheme: "exact", network: X402.SOLANA_MAINNET, extra: { feePayer: FEE_PAYER } },
            { x402Version: 2, scheme: "exact", network: X402.BASE_MAINNET }
          ],
          extensions: [],
          signers: { "solana:*": [FEE_PAYER] }
        })
      }
      const transaction = body?.paymentPayload.payload.transaction
      const network = body?.paymentRequirements.network
      if (transaction === "slow") return
      if (transaction === "down") {
        response.writeHead(500)
        return response.end("internal error")
      }
      if (request.url === "/verify") {
        return transaction === "bad"
          ? reply(400, {
            isValid: false,
            invalidReason: "invalid_exact_svm_payload_transaction",
            invalidMessage: "bad transaction",
            payer: PAYER
          })
          : reply(200, { isValid: true, payer: PAYER })
      }
      if (request.url === "/settle") {
        return transaction === "fails"
          ? reply(200, { success: false, errorReason: "transaction_failed", transaction: "", network })
          : reply(200, { success: true, transaction: `sig${transaction}`, network, payer: PAYER })
      }
      reply(404, {})
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/`,
    seen,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

let facilitator: Awaited<ReturnType<typeof startFacilitator>>
let client: PaymentFacilitator.Backend

beforeAll(async () => {
  facilitator = await startFacilitator()
  client = PaymentFacilitator.makeHttp({
    url: facilitator.url,
    headers: { authorization: "Bearer facilitator-key" },
    timeout: "300 millis"
  })
})

afterAll(() => facilitator.stop())

const config = X402.makeConfig({
  publicOrigin: "https://api.example.com",
  payTo: { evm: "0x1111111111111111111111111111111111111111", solana: PAYER },
  solanaFeePayer: FEE_PAYER
})

const solanaPayment = (transaction: string): X402.MatchedPayment => {
  const requirements = X402.requirements(config, Money.usd(5))[1]!
  return { requirements, payload: { x402Version: 2, accepted: requirements, payload: { transaction } } }
}

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.result(effect))

describe("HTTP facilitator: /supported gives the Solana feePayer the 402 bodies advertise", () => {
  it("reads the kinds and finds the fee payer of Solana mainnet", async () => {
    const supported = await Effect.runPromise(client.supported)
    expect(supported.kinds).toHaveLength(2)
    expect(PaymentFacilitator.feePayerOf(supported, X402.SOLANA_MAINNET)).toEqual(Option.some(FEE_PAYER))
    expect(Option.isNone(PaymentFacilitator.feePayerOf(supported, X402.BASE_MAINNET))).toBe(true)
    expect(facilitator.seen.at(-1)).toMatchObject({ path: "/supported", authorization: "Bearer facilitator-key" })
  })
})

describe("HTTP facilitator: /verify and /settle carry {x402Version, paymentPayload, paymentRequirements}", () => {
  it("verifies, then settles with the transaction signature as the credit reference", async () => {
    const payment = solanaPayment("ok")
    expect(await Effect.runPromise(client.verify(payment))).toEqual({ payer: PAYER })
    expect(facilitator.seen.at(-1)).toEqual({
      path: "/verify",
      authorization: "Bearer facilitator-key",
      body: { x402Version: 2, paymentPayload: payment.payload, paymentRequirements: payment.requirements }
    })
    const settled = await Effect.runPromise(client.settle(payment))
    expect(settled).toEqual({
      payer: PAYER,
      transaction: "sigok",
      network: X402.SOLANA_MAINNET,
      reference: `x402:${X402.SOLANA_MAINNET}:sigok`,
      amount: Money.usd(5)
    })
  })

  it("a 400 verdict is a refusal with the facilitator's reason", async () => {
    const result = await run(client.verify(solanaPayment("bad")))
    expect(result._tag === "Failure" && result.failure).toMatchObject({
      _tag: "PaymentRejected",
      reason: "invalid_exact_svm_payload_transaction"
    })
  })

  it("a failed settlement is a refusal with its errorReason", async () => {
    const result = await run(client.settle(solanaPayment("fails")))
    expect(result._tag === "Failure" && result.failure).toMatchObject({ _tag: "PaymentRejected", reason: "transaction_failed" })
  })

  it.each([["down"], ["slow"]])("a facilitator that is %s is 503, never a refusal of the payment", async (transaction) => {
    const result = await run(client.settle(solanaPayment(transaction)))
    expect(result._tag === "Failure" && result.failure._tag).toBe("ServiceUnavailable")
  })
})

describe("Payments are routed by network: local EVM settlement first, the HTTP facilitator for the rest", () => {
  it("an unsupported network is refused when no backend serves it", async () => {
    const combined = PaymentFacilitator.combine([], undefined)
    const result = await run(combined.verify(solanaPayment("ok")))
    expect(result._tag === "Failure" && result.failure).toMatchObject({ reason: "unsupported_network" })
  })

  it("a Solana payment reaches the HTTP facilitator", async () => {
    const combined = PaymentFacilitator.combine([], client)
    expect((await Effect.runPromise(combined.settle(solanaPayment("routed")))).transaction).toBe("sigrouted")
  })
})
