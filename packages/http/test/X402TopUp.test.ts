import * as PaymentFacilitator from "@tollgate/backends/payment/PaymentFacilitator"
import { CreditLedger, Money, TopUpTransactions, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect, Layer, Option } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { Address } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import type * as Route from "../src/Route.ts"
import * as WalletTransactions from "../src/routes/WalletTransactions.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as X402Chain from "./support/X402Chain.ts"

const ORIGIN = "http://localhost"
const TOP_UP = `${ORIGIN}/api/v1/x402/top-up`
const payTo = privateKeyToAccount(generatePrivateKey()).address
const payer = privateKeyToAccount(generatePrivateKey())

let chain: X402Chain.Chain
let handler: (request: Request) => Promise<Response>
let dispose: () => Promise<void>

const fetchApp = (input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))

const SOLANA_PAY_TO = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
const SOLANA_PAYER = "7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV"
const FEE_PAYER = "2wmVCSfPxGPjrnMMn7rchp4uaeoTqN39mXFC2zhPdri9"

/**
 * A Solana facilitator speaking the x402 HTTP protocol (no Solana validator runs here): it
 * advertises its fee payer, verifies any transaction but "bad", and settles a transaction as the
 * signature `sig<transaction>`.
 */
const solanaFacilitator = Http.createServer((request, response) => {
  let text = ""
  request.on("data", (chunk: Buffer) => (text += chunk.toString()))
  request.on("end", () => {
    const transaction = text === ""
      ? ""
      : (JSON.parse(text) as { paymentPayload: { payload: { transaction: string } } }).paymentPayload.payload.transaction
    response.writeHead(200, { "content-type": "application/json" })
    response.end(JSON.stringify(
      request.url === "/supported"
        ? {
          kinds: [{ x402Version: 2, scheme: "exact", network: X402.SOLANA_MAINNET, extra: { feePayer: FEE_PAYER } }],
          extensions: [],
          signers: {}
        }
        : request.url === "/verify"
        ? transaction === "bad"
          ? { isValid: false, invalidReason: "invalid_exact_svm_payload_transaction", payer: SOLANA_PAYER }
          : { isValid: true, payer: SOLANA_PAYER }
        : { success: true, transaction: `sig${transaction}`, network: X402.SOLANA_MAINNET, payer: SOLANA_PAYER }
    ))
  })
})

let config: X402.Config

const balanceUsd = async (address: string) => {
  const response = await fetchApp(`${ORIGIN}/api/v1/x402/balance/${address}`)
  return ((await response.json()) as { balanceUsd: string }).balanceUsd
}

const officialClient = (account = payer) => {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  registerExactEvmScheme(client, { signer: account })
  return wrapFetchWithPayment(fetchApp, client)
}

const requirement = (usd = 5): X402.PaymentRequirements => X402.requirements(config, Money.unsafeNano(usd * Money.NANO_PER_USD))[0]!

const submit = (header: string, query = "") => fetchApp(`${TOP_UP}${query}`, { method: "POST", headers: { "PAYMENT-SIGNATURE": header } })

const refusalReason = async (response: Response) => {
  expect(response.status).toBe(402)
  const header = response.headers.get("payment-required")
  expect(header).not.toBeNull()
  return decodePaymentRequiredHeader(header!).error
}

beforeAll(async () => {
  await new Promise<void>((resolve) => solanaFacilitator.listen(0, "127.0.0.1", resolve))
  const facilitatorUrl = `http://127.0.0.1:${(solanaFacilitator.address() as AddressInfo).port}`
  const supported = await Effect.runPromise(PaymentFacilitator.makeHttp({ url: facilitatorUrl }).supported)
  config = X402.makeConfig({
    publicOrigin: ORIGIN,
    payTo: { evm: payTo, solana: SOLANA_PAY_TO },
    solanaFeePayer: Option.getOrThrow(PaymentFacilitator.feePayerOf(supported, X402.SOLANA_MAINNET))
  })
  chain = await X402Chain.start()
  await chain.mint(payer.address, 1_000_000_000n)
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const routes: ReadonlyArray<
    Route.Route<
      Auth.Auth | CreditLedger.CreditLedger | PaymentFacilitator.PaymentFacilitator | X402.X402Config | TopUpTransactions.TopUpTransactions
    >
  > = [
    ...X402Route.routes,
    ...WalletTransactions.routes
  ]
  const app = App.layer(routes).pipe(
    Layer.provide(Layer.mergeAll(
      X402.layer(config),
      CreditLedger.layerMemory,
      TopUpTransactions.layerMemory,
      X402Chain.facilitator(chain, facilitatorUrl),
      Auth.layer({ signingKey, publicOrigin: ORIGIN }).pipe(Layer.provide(AuthStore.layerMemory)),
      ServiceInfo.layer({ version: "test", hostName: "test-host" })
    ))
  )
  const web = Handlers.toWebHandler(app)
  handler = web.handler
  dispose = web.dispose
}, 60_000)

afterAll(async () => {
  solanaFacilitator.close()
  await dispose?.()
  await chain?.stop()
})

describe("POST /x402/top-up without a payment header: 402 with Base and Solana requirements, amount from the request, minimum 5 USD", () => {
  it("answers the discovery form with PAYMENT-REQUIRED and Cache-Control: no-store", async () => {
    const response = await fetchApp(TOP_UP, { method: "POST" })
    expect(response.status).toBe(402)
    expect(response.headers.get("cache-control")).toBe("no-store")
    const body = await response.json() as X402.DiscoveryBody
    expect(decodePaymentRequiredHeader(response.headers.get("payment-required")!)).toEqual(body)
    expect(body.x402Version).toBe(2)
    expect(body.resource.url).toBe(TOP_UP)
    expect(body.accepts.map((a) => [a.network, a.amount])).toEqual([
      [X402.BASE_MAINNET, "5000000"],
      [X402.SOLANA_MAINNET, "5000000"]
    ])
    expect(body.extensions["sign-in-with-x"].info.domain).toBe("localhost")
  })

  it("prices the amount asked for, in the query or the JSON body, the same on every retry", async () => {
    const fromQuery = await fetchApp(`${TOP_UP}?amountUsd=12.5`, { method: "POST" })
    expect((await fromQuery.json() as X402.DiscoveryBody).accepts[0]!.amount).toBe("12500000")
    const fromBody = await fetchApp(TOP_UP, {
      method: "POST",
      body: JSON.stringify({ amountUsd: 7 }),
      headers: { "content-type": "application/json" }
    })
    expect((await fromBody.json() as X402.DiscoveryBody).accepts[0]!.amount).toBe("7000000")
  })

  it.each([["4.99"], ["0"], ["abc"], ["5.0000001"]])("refuses amountUsd=%s with 400", async (amount) => {
    const response = await fetchApp(`${TOP_UP}?amountUsd=${amount}`, { method: "POST" })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: expect.any(String) })
  })
})

describe("The official x402 client tops up a wallet: USDC moves on chain, the credit appears at /x402/balance", () => {
  it("pays $5 with @x402/fetch + @x402/evm and gets 200 with the new balance and PAYMENT-RESPONSE", async () => {
    const before = await chain.balanceOf(payTo)
    const response = await officialClient()(TOP_UP, { method: "POST" })
    expect(response.status).toBe(200)
    const body = await response.json() as { balanceUsd: string; creditedUsd: string; walletAddress: string; transaction: string }
    expect(body).toMatchObject({ balanceUsd: "5", creditedUsd: "5", walletAddress: payer.address })
    const settle = decodePaymentResponseHeader(response.headers.get("payment-response")!)
    expect(settle).toMatchObject({ success: true, network: X402.BASE_MAINNET, payer: payer.address, transaction: body.transaction })
    expect(await chain.balanceOf(payTo)).toBe(before + 5_000_000n)
    const receipt = await chain.client.getTransactionReceipt({ hash: body.transaction as `0x${string}` })
    expect(receipt.status).toBe("success")
    expect(await balanceUsd(payer.address)).toBe("5")
    expect(await balanceUsd(payer.address.toLowerCase())).toBe("5")
  })

  it("GET /x402/transactions/{wallet} shows the top-up with the hash of the transaction that paid it", async () => {
    const message = createSiweMessage({
      domain: "localhost",
      address: payer.address,
      uri: `${ORIGIN}/`,
      version: "1",
      chainId: 8453,
      nonce: "0123456789abcdef",
      issuedAt: new Date(),
      expirationTime: new Date(Date.now() + 600_000),
      statement: "Sign in to use your prepaid credits."
    })
    const header = Buffer.from(JSON.stringify({
      address: payer.address,
      message,
      signature: await payer.signMessage({ message }),
      timestamp: Date.now(),
      chainId: 8453
    })).toString("base64")
    const response = await fetchApp(`${ORIGIN}/api/v1/x402/transactions/${payer.address}`, { headers: { "sign-in-with-x": header } })
    expect(response.status).toBe(200)
    const { data } = await response.json() as {
      data: { transactions: Array<{ type: string; amount: number; balanceAfter: number; transactionHash: string | null }> }
    }
    expect(data.transactions).toHaveLength(1)
    const [topUp] = data.transactions
    expect(topUp).toMatchObject({ type: "TOP_UP", amount: 5, balanceAfter: 5, transactionHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
    const receipt = await chain.client.getTransactionReceipt({ hash: topUp!.transactionHash as `0x${string}` })
    expect(receipt.status).toBe("success")
  })

  it("pays a larger amount asked for in the query", async () => {
    const response = await officialClient()(`${TOP_UP}?amountUsd=7.25`, { method: "POST" })
    expect(response.status).toBe(200)
    expect((await response.json() as { balanceUsd: string }).balanceUsd).toBe("12.25")
  })

  it("credits an EIP-1271 contract wallet whose owner signed", async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const wallet = await chain.deployWallet(owner.address)
    await chain.mint(wallet, 10_000_000n)
    const payload = await X402Chain.authorize(owner, { from: wallet, to: payTo, value: 5_000_000n })
    const response = await submit(X402Chain.paymentHeader(requirement(), payload))
    expect(response.status).toBe(200)
    expect(await balanceUsd(wallet)).toBe("5")
    expect(await chain.balanceOf(wallet)).toBe(5_000_000n)
  })
})

describe("The legacy payment headers X-PAYMENT (v1 payload) and X-402-Payment are accepted", () => {
  it("X-PAYMENT with a v1 payload naming the legacy network \"base\"", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 5_000_000n)
    const payload = await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n })
    const header = X402.encodeHeader({ x402Version: 1, scheme: "exact", network: "base", payload })
    const response = await fetchApp(TOP_UP, { method: "POST", headers: { "X-PAYMENT": header } })
    expect(response.status).toBe(200)
    expect(await balanceUsd(wallet.address)).toBe("5")
  })

  it("X-402-Payment with a v2 payload", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 5_000_000n)
    const header = X402Chain.paymentHeader(requirement(), await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n }))
    const response = await fetchApp(TOP_UP, { method: "POST", headers: { "X-402-Payment": header } })
    expect(response.status).toBe(200)
    expect(await balanceUsd(wallet.address)).toBe("5")
  })
})

describe("Refused payments credit nothing and answer 402 with a fresh PAYMENT-REQUIRED saying why", () => {
  const expectNothingMoved = async (run: () => Promise<void>, wallet: Address = payer.address) => {
    const credit = await balanceUsd(wallet)
    const received = await chain.balanceOf(payTo)
    await run()
    expect(await balanceUsd(wallet)).toBe(credit)
    expect(await chain.balanceOf(payTo)).toBe(received)
  }

  it("a replayed payment", async () => {
    const header = X402Chain.paymentHeader(requirement(), await X402Chain.authorize(payer, { to: payTo, value: 5_000_000n }))
    expect((await submit(header)).status).toBe(200)
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(header))).toBe("invalid_exact_evm_nonce_already_used")
    })
  })

  it("a forged signature", async () => {
    const forger = privateKeyToAccount(generatePrivateKey())
    const payload = await X402Chain.authorize(forger, { from: payer.address, to: payTo, value: 5_000_000n })
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload)))).toBe("invalid_exact_evm_signature")
    })
  })

  it("too small an amount for the requirement", async () => {
    const payload = await X402Chain.authorize(payer, { to: payTo, value: 1_000_000n })
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload))))
        .toBe("invalid_exact_evm_payload_authorization_value_mismatch")
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(1), payload))))
        .toBe("No matching payment requirements")
    })
  })

  it("an expired authorization", async () => {
    const payload = await X402Chain.authorize(payer, {
      to: payTo,
      value: 5_000_000n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) - 60)
    })
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload))))
        .toBe("invalid_exact_evm_payload_authorization_valid_before")
    })
  })

  it("a wrong recipient", async () => {
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address
    const payload = await X402Chain.authorize(payer, { to: elsewhere, value: 5_000_000n })
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload))))
        .toBe("invalid_exact_evm_recipient_mismatch")
      expect(await refusalReason(await submit(X402Chain.paymentHeader({ ...requirement(), payTo: elsewhere }, payload))))
        .toBe("No matching payment requirements")
    })
  })

  it("a wrong asset", async () => {
    const other = privateKeyToAccount(generatePrivateKey()).address
    const payload = await X402Chain.authorize(payer, { to: payTo, value: 5_000_000n, verifyingContract: other })
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit(X402Chain.paymentHeader({ ...requirement(), asset: other }, payload))))
        .toBe("No matching payment requirements")
      expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload))))
        .toBe("invalid_exact_evm_signature")
    })
  })

  it("a settlement that reverts on chain", async () => {
    const payload = await X402Chain.authorize(payer, { to: payTo, value: 5_000_000n })
    await chain.setBlocked(payer.address, true)
    try {
      await expectNothingMoved(async () => {
        expect(await refusalReason(await submit(X402Chain.paymentHeader(requirement(), payload)))).toBe("settlement_reverted")
      })
    } finally {
      await chain.setBlocked(payer.address, false)
    }
  })

  it("a header that is not a payment", async () => {
    await expectNothingMoved(async () => {
      expect(await refusalReason(await submit("bm90IGpzb24="))).toBe("invalid_payload")
    })
  })
})

describe("Solana top-ups settle through the HTTP facilitator and credit once per transaction signature", () => {
  const solanaHeader = (transaction: string) => X402Chain.paymentHeader(X402.requirements(config, Money.usd(5))[1]!, { transaction })

  it("advertises the facilitator's feePayer and credits the payer once however often the payment is sent", async () => {
    const discovery = await fetchApp(TOP_UP, { method: "POST" })
    expect((await discovery.json() as X402.DiscoveryBody).accepts[1]!.extra).toEqual({ feePayer: FEE_PAYER })
    const first = await submit(solanaHeader("tx1"))
    expect(first.status).toBe(200)
    expect(await first.json()).toMatchObject({ walletAddress: SOLANA_PAYER, transaction: "sigtx1", balanceUsd: "5" })
    expect((await submit(solanaHeader("tx1"))).status).toBe(200)
    expect(await balanceUsd(SOLANA_PAYER)).toBe("5")
  })

  it("a transaction the facilitator refuses is a 402 with its reason", async () => {
    const before = await balanceUsd(SOLANA_PAYER)
    expect(await refusalReason(await submit(solanaHeader("bad")))).toBe("invalid_exact_svm_payload_transaction")
    expect(await balanceUsd(SOLANA_PAYER)).toBe(before)
  })
})

describe("Concurrent submissions of one payment credit once", () => {
  it("eight parallel submissions of one authorization: one 200, seven 402, 5 USD credited", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 50_000_000n)
    const header = X402Chain.paymentHeader(requirement(), await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n }))
    const responses = await Promise.all(Array.from({ length: 8 }, () => submit(header)))
    expect(responses.map((r) => r.status).sort()).toEqual([200, 402, 402, 402, 402, 402, 402, 402])
    expect(await balanceUsd(wallet.address)).toBe("5")
    expect(await chain.balanceOf(wallet.address)).toBe(45_000_000n)
  })
})

describe("GET /x402/balance/{walletAddress}: a malformed address is a 400", () => {
  it.each([
    ["0x123"],
    ["0xZZ3589fCD6eDb6E08f4c7C32D4f71b54bdA02913"],
    ["0x833589FCD6eDb6E08f4c7C32D4f71b54bdA02913"],
    ["0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl"],
    ["abc"]
  ])("%s", async (address) => {
    const response = await fetchApp(`${ORIGIN}/api/v1/x402/balance/${address}`)
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: expect.any(String) })
  })

  it("a well-formed wallet with no credit has balance 0 (EVM and Solana)", async () => {
    expect(await balanceUsd(privateKeyToAccount(generatePrivateKey()).address)).toBe("0")
    expect(await balanceUsd("9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin")).toBe("0")
  })
})
