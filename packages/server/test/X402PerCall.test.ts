/**
 * x402 the way agents use it, through the shipped server on anvil (FiatTokenV2_2 at Base's USDC
 * address): the official client pays the metered endpoint it calls, with no top-up and no sign-in.
 */
import { FakeChatUpstream, ShippedServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader, decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier"
import { createSIWxClientExtension, wrapFetchWithSIWx } from "@x402/extensions/sign-in-with-x"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

/** 1 nano-USD per input token and 2 per output token: a completion's charge is exact in USDC units. */
const PRICES = { inputPerMillionUsd: "1000", outputPerMillionUsd: "2000" }
/** The fake upstream's usage for every completion. */
const USAGE = { prompt_tokens: 10, completion_tokens: 2 }
/** 10 x 0.001 + 2 x 0.002 USD. */
const CHAT_CHARGE_UNITS = 14_000n

let chain: X402Chain.Chain
let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  chain = await X402Chain.start()
  upstream = await FakeChatUpstream.start(() => ({ pieces: ["Hello", " there"], usage: USAGE }))
  server = await ShippedServer.start({
    config: {
      models: [{ id: "test-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "test-model": PRICES } },
      rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url }
    }
  })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await chain?.stop()
})

/** A fetch that remembers the last payment it sent, to replay it. */
const recordingFetch = (inner: typeof fetch = fetch) => {
  const sent = { payment: undefined as string | undefined }
  const recording: typeof fetch = (input, init) => {
    const request = new Request(input, init)
    sent.payment = request.headers.get("payment-signature") ?? sent.payment
    return inner(request)
  }
  return { sent, fetch: recording }
}

const fundedWallet = async () => {
  const wallet = privateKeyToAccount(generatePrivateKey())
  await chain.mint(wallet.address, 10_000_000n)
  return wallet
}

const plainClient = (wallet: ReturnType<typeof privateKeyToAccount>) => {
  const client = new x402Client()
  registerExactEvmScheme(client, { signer: wallet })
  return client
}

/** The wallet's credit in USDC units, as `/x402/balance` reports it. */
const creditUnits = async (address: string) => {
  const { balanceUsd } = (await (await fetch(`${server.api}/x402/balance/${address}`)).json()) as { balanceUsd: string }
  return BigInt(Math.round(Number(balanceUsd) * 1_000_000))
}

const document = () => {
  const form = new FormData()
  form.append("file", new Blob(["Quarterly figures: revenue rose."], { type: "text/plain" }), "notes.txt")
  return form
}

const chatBody = JSON.stringify({ model: "test-model", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
const chatInit = (): RequestInit => ({ method: "POST", headers: { "content-type": "application/json" }, body: chatBody })

const signedAmount = (payment: string) => BigInt(decodePaymentSignatureHeader(payment).accepted.amount)

describe("A payment sent with a metered call is honoured: the plain official client gets 200, the leftover is credit, a replay is refused", () => {
  it("POST /augment/text-parser: 0.01 USDC leaves the payer, exactly the signed entry, and the flat charge leaves no credit", async () => {
    const wallet = await fundedWallet()
    const recording = recordingFetch()
    const response = await wrapFetchWithPayment(recording.fetch, plainClient(wallet))(`${server.api}/augment/text-parser`, {
      method: "POST",
      body: document()
    })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ text: expect.stringContaining("revenue rose") })
    expect(decodePaymentResponseHeader(response.headers.get("payment-response")!)).toMatchObject({ success: true, payer: wallet.address })
    const signed = signedAmount(recording.sent.payment!)
    expect(signed).toBe(10_000n)
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
    expect(await chain.balanceOf(payTo)).toBeGreaterThanOrEqual(signed)
    expect(await creditUnits(wallet.address)).toBe(signed - 10_000n)

    const replay = await fetch(`${server.api}/augment/text-parser`, {
      method: "POST",
      headers: { "payment-signature": recording.sent.payment! },
      body: document()
    })
    expect(replay.status).toBe(402)
    expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).toBe("invalid_exact_evm_nonce_already_used")
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
    expect(await creditUnits(wallet.address)).toBe(0n)
  }, 60_000)

  it(
    "POST /chat/completions: the worst-case quote is paid, the actual charge taken, the rest is the wallet's credit to the unit",
    async () => {
      const wallet = await fundedWallet()
      const recording = recordingFetch()
      const response = await wrapFetchWithPayment(recording.fetch, plainClient(wallet))(`${server.api}/chat/completions`, chatInit())
      expect(response.status).toBe(200)
      expect(((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe(
        "Hello there"
      )
      const signed = signedAmount(recording.sent.payment!)
      expect(signed).toBeGreaterThan(CHAT_CHARGE_UNITS)
      expect(response.headers.get("x-payment-credited-usd")).toBe(String(Number(signed) / 1_000_000))
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
      expect(await creditUnits(wallet.address)).toBe(signed - CHAT_CHARGE_UNITS)

      const replay = await fetch(`${server.api}/chat/completions`, {
        ...chatInit(),
        headers: { "content-type": "application/json", "payment-signature": recording.sent.payment! }
      })
      expect(replay.status).toBe(402)
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
      expect(await creditUnits(wallet.address)).toBe(signed - CHAT_CHARGE_UNITS)
    },
    60_000
  )
})

describe("A streamed chat completion paid with the call: the stream is served, and its charge is taken when it ends", () => {
  it(
    "stream: true with the plain client: the events arrive, PAYMENT-RESPONSE is on the answer, the credit is the payment minus the charge",
    async () => {
      const wallet = await fundedWallet()
      const recording = recordingFetch()
      const body = JSON.stringify({
        model: "test-model",
        max_tokens: 100,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "hi" }]
      })
      const response = await wrapFetchWithPayment(recording.fetch, plainClient(wallet))(`${server.api}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body
      })
      expect(response.status).toBe(200)
      expect(response.headers.get("payment-response")).not.toBeNull()
      const events = await response.text()
      expect(events).toContain("Hello")
      expect(events).toContain("data: [DONE]")
      const signed = signedAmount(recording.sent.payment!)
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
      // The charge is captured as the stream ends, which may be just after the last bytes reach us.
      const deadline = Date.now() + 5_000
      while (await creditUnits(wallet.address) !== signed - CHAT_CHARGE_UNITS && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(await creditUnits(wallet.address)).toBe(signed - CHAT_CHARGE_UNITS)
    },
    60_000
  )
})

describe("The discovery 402 of a metered call offers the call at its price, then the minimum top-up; below the floor, a voucher on a payment channel and the top-up", () => {
  it("text-parser: exact 0.01 USDC first, 5 USDC second; an RPC call (below 0.001 USD) offers a batch-settlement voucher, then 5 USDC", async () => {
    const parser = await fetch(`${server.api}/augment/text-parser`, { method: "POST", body: document() })
    expect(parser.status).toBe(402)
    const offered = decodePaymentRequiredHeader(parser.headers.get("payment-required")!)
    expect(offered.accepts.map((entry) => [entry.scheme, entry.amount, entry.payTo])).toEqual([["exact", "10000", payTo], [
      "exact",
      "5000000",
      payTo
    ]])

    const rpc = await fetch(`${server.api}/crypto/rpc/base-mainnet`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
    })
    expect(rpc.status).toBe(402)
    const cheap = decodePaymentRequiredHeader(rpc.headers.get("payment-required")!)
    // Below the floor: a batch-settlement voucher (Base is settled here), then the top-up.
    expect(cheap.accepts.map((entry) => [entry.scheme, entry.amount])).toEqual([["batch-settlement", "13"], ["exact", "5000000"]])
    expect(cheap.resource.description).toMatch(/with a batch-settlement voucher .* or top up USDC credit .* then sign in with SIWX/)
  })

  it("an anonymous body over 64 KiB is not read to be priced: its 402 offers the minimum top-up only", async () => {
    const large = JSON.stringify({ model: "test-model", max_tokens: 100, messages: [{ role: "user", content: "x".repeat(70 * 1024) }] })
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: large
    })
    expect(response.status).toBe(402)
    const offered = decodePaymentRequiredHeader(response.headers.get("payment-required")!)
    expect(offered.accepts.map((entry) => entry.amount)).toEqual(["5000000"])
    expect(offered.resource.description).toBe("Sign in with a wallet holding prepaid credit, or top up USDC credit on Base")
  })
})

describe("A call below the per-call floor takes the top-up entry's payment (a client that knows only exact): the 5 USD are credited and the call is charged to them", () => {
  it(
    "an RPC call paid with the 5 USDC entry of its 402: 200 with the block number, 5 USDC moved, 4.9999875 USD of credit left",
    async () => {
      const wallet = await fundedWallet()
      const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$10" })
      registerExactEvmScheme(client, { signer: wallet })
      const response = await wrapFetchWithPayment(fetch, client)(`${server.api}/crypto/rpc/base-mainnet`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
      })
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 1, result: expect.stringMatching(/^0x/) })
      expect(response.headers.get("x-payment-credited-usd")).toBe("5")
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(5_000_000n)
      const { balanceUsd } = (await (await fetch(`${server.api}/x402/balance/${wallet.address}`)).json()) as { balanceUsd: string }
      expect(balanceUsd).toBe("4.9999875")
    },
    60_000
  )
})

describe("The legacy X-PAYMENT header pays a metered call as PAYMENT-SIGNATURE does", () => {
  it("a payment built from the 402 and sent as X-PAYMENT: 200 with PAYMENT-RESPONSE, 0.01 USDC moved", async () => {
    const wallet = await fundedWallet()
    const client = plainClient(wallet)
    const required = decodePaymentRequiredHeader(
      (await fetch(`${server.api}/augment/text-parser`, { method: "POST", body: document() })).headers.get("payment-required")!
    )
    const payment = encodePaymentSignatureHeader(await client.createPaymentPayload(required))
    const response = await fetch(`${server.api}/augment/text-parser`, {
      method: "POST",
      headers: { "x-payment": payment },
      body: document()
    })
    expect(response.status).toBe(200)
    expect(decodePaymentResponseHeader(response.headers.get("payment-response")!)).toMatchObject({ success: true, payer: wallet.address })
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(10_000n)
  }, 60_000)
})

describe("A failed call after its payment settled leaves the whole payment as credit, and the answer says so", () => {
  it("the upstream fails: 502 with PAYMENT-RESPONSE and X-Payment-Credit: kept; the payment is the wallet's credit", async () => {
    const wallet = await fundedWallet()
    const recording = recordingFetch()
    upstream.script = () => ({ pieces: [], status: 500 })
    try {
      const response = await wrapFetchWithPayment(recording.fetch, plainClient(wallet))(`${server.api}/chat/completions`, chatInit())
      expect(response.status).toBeGreaterThanOrEqual(500)
      expect(response.headers.get("x-payment-credit")).toBe("kept")
      expect(decodePaymentResponseHeader(response.headers.get("payment-response")!)).toMatchObject({ success: true })
    } finally {
      upstream.script = () => ({ pieces: ["Hello", " there"], usage: USAGE })
    }
    const signed = signedAmount(recording.sent.payment!)
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(signed)
    expect(await creditUnits(wallet.address)).toBe(signed)
  }, 60_000)
})

describe("Credit first: a wallet that signs in with credit is never asked to pay", () => {
  it(
    "wrapFetchWithPayment around wrapFetchWithSIWx: the first call pays, the next calls spend the leftover credit with no payment",
    async () => {
      const wallet = await fundedWallet()
      const client = plainClient(wallet)
      const agent = wrapFetchWithPayment(wrapFetchWithSIWx(fetch, wallet), client)
      // SIWX binds to the server's public origin, which names the host localhost.
      const api = server.api.replace("127.0.0.1", "localhost")
      const first = await agent(`${api}/chat/completions`, chatInit())
      expect(first.status).toBe(200)
      expect(first.headers.get("payment-response")).not.toBeNull()
      const paid = 10_000_000n - (await chain.balanceOf(wallet.address))
      const credit = await creditUnits(wallet.address)
      expect(credit).toBe(paid - CHAT_CHARGE_UNITS)

      for (let call = 1; call <= 3; call++) {
        const next = await agent(`${api}/augment/text-parser`, { method: "POST", body: document() })
        expect(next.status).toBe(200)
        expect(next.headers.get("payment-response")).toBeNull()
        expect(await creditUnits(wallet.address)).toBe(credit - BigInt(call) * 10_000n)
      }
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(paid)
    },
    60_000
  )
})

describe("The other nesting, wrapFetchWithSIWx outside wrapFetchWithPayment, pays every call: the payment wrapper meets each 402 first", () => {
  it("two text-parser calls: two payments of 0.01 USDC, no credit used", async () => {
    const wallet = await fundedWallet()
    const agent = wrapFetchWithSIWx(wrapFetchWithPayment(fetch, plainClient(wallet)), wallet)
    const api = server.api.replace("127.0.0.1", "localhost")
    for (let call = 1; call <= 2; call++) {
      const response = await agent(`${api}/augment/text-parser`, { method: "POST", body: document() })
      expect(response.status).toBe(200)
      expect(response.headers.get("payment-response")).not.toBeNull()
    }
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(20_000n)
  }, 60_000)
})

describe("Credit first with the SIWX client extension registered on the payment client instead of the SIWX wrapper", () => {
  it("createSIWxClientExtension: the first call pays, the next one is served from the leftover credit", async () => {
    const wallet = await fundedWallet()
    const client = plainClient(wallet)
    client.registerExtension(createSIWxClientExtension({ signers: [wallet] }))
    const agent = wrapFetchWithPayment(fetch, client)
    const api = server.api.replace("127.0.0.1", "localhost")
    const first = await agent(`${api}/chat/completions`, chatInit())
    expect(first.status).toBe(200)
    expect(first.headers.get("payment-response")).not.toBeNull()
    const paid = 10_000_000n - (await chain.balanceOf(wallet.address))
    const next = await agent(`${api}/augment/text-parser`, { method: "POST", body: document() })
    expect(next.status).toBe(200)
    expect(next.headers.get("payment-response")).toBeNull()
    expect(await creditUnits(wallet.address)).toBe(paid - CHAT_CHARGE_UNITS - 10_000n)
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(paid)
  }, 60_000)
})

describe("payment-identifier: a client's retry with the same identifier is answered from the first attempt, never paid or served twice", () => {
  it(
    "the first answer is lost on the way back; the retry, signed anew with the same id, gets the kept 200 and no USDC moves again",
    async () => {
      const wallet = await fundedWallet()
      const client = plainClient(wallet)
      const id = generatePaymentId()
      client.onBeforePaymentCreation(async ({ paymentRequired }) => {
        appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id)
      })
      const lost = { answers: 0 }
      const losing: typeof fetch = async (input, init) => {
        const response = await fetch(input, init)
        if (response.status === 200 && lost.answers++ === 0) throw new TypeError("fetch failed: the connection was reset")
        return response
      }
      const agent = wrapFetchWithPayment(losing, client)
      const call = () => agent(`${server.api}/augment/text-parser`, { method: "POST", body: document() })
      await expect(call()).rejects.toThrow("connection was reset")
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(10_000n)

      const retried = await call()
      expect(retried.status).toBe(200)
      expect(retried.headers.get("idempotent-replayed")).toBe("true")
      expect(await retried.json()).toMatchObject({ text: expect.stringContaining("revenue rose") })
      expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(10_000n)
      expect(await creditUnits(wallet.address)).toBe(0n)
    },
    60_000
  )

  it("the same payment re-sent as it was (its authorization already spent) gets the kept 200, not a refusal", async () => {
    const wallet = await fundedWallet()
    const client = plainClient(wallet)
    const id = generatePaymentId()
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id)
    })
    const recording = recordingFetch()
    expect(
      (await wrapFetchWithPayment(recording.fetch, client)(`${server.api}/augment/text-parser`, { method: "POST", body: document() }))
        .status
    )
      .toBe(200)
    const resent = await fetch(`${server.api}/augment/text-parser`, {
      method: "POST",
      headers: { "payment-signature": recording.sent.payment! },
      body: document()
    })
    expect(resent.status).toBe(200)
    expect(resent.headers.get("idempotent-replayed")).toBe("true")
    expect(10_000_000n - (await chain.balanceOf(wallet.address))).toBe(10_000n)
  }, 60_000)
})

describe("payment-identifier: another wallet sending a known identifier gets no replay; the kept answer is only for the payer who signed it", () => {
  it("wallet B pays with wallet A's identifier: 402 payment_identifier_mismatch, not A's answer, and no USDC of either moves", async () => {
    const id = generatePaymentId()
    const withId = (wallet: ReturnType<typeof privateKeyToAccount>) => {
      const client = plainClient(wallet)
      client.onBeforePaymentCreation(async ({ paymentRequired }) => {
        appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id)
      })
      return client
    }
    const payer = await fundedWallet()
    const first = await wrapFetchWithPayment(fetch, withId(payer))(`${server.api}/augment/text-parser`, {
      method: "POST",
      body: document()
    })
    expect(first.status).toBe(200)
    expect(10_000_000n - (await chain.balanceOf(payer.address))).toBe(10_000n)

    const other = await fundedWallet()
    const taken = await wrapFetchWithPayment(fetch, withId(other))(`${server.api}/augment/text-parser`, {
      method: "POST",
      body: document()
    })
    expect(taken.status).toBe(402)
    expect(taken.headers.get("idempotent-replayed")).toBeNull()
    expect(decodePaymentRequiredHeader(taken.headers.get("payment-required")!).error).toBe("payment_identifier_mismatch")
    const body = (await taken.json()) as { error: string; accepts: Array<{ amount: string }> }
    expect(body.error).toBe("payment_identifier_mismatch")
    expect(body.accepts.map((entry) => entry.amount)).toEqual(["10000", "5000000"])
    expect(JSON.stringify(body)).not.toContain("revenue rose")
    expect(await chain.balanceOf(other.address)).toBe(10_000_000n)
    expect(await creditUnits(other.address)).toBe(0n)
    expect(10_000_000n - (await chain.balanceOf(payer.address))).toBe(10_000n)
  }, 60_000)
})

describe("The OpenAPI document states each metered operation's x402 payment", () => {
  it("the text parser: exact 0.01 USD with the entries its 402 offers; chat: quoted per request; both name the floor, the top-up and their bazaar discovery info", async () => {
    const document = (await (await fetch(`${server.api}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { "x-x402"?: Record<string, unknown> }>>
    }
    const parser = document.paths["/api/v1/augment/text-parser"]!["post"]!["x-x402"]!
    expect(parser).toMatchObject({ x402Version: 2, scheme: "exact", priceUsd: "0.01", minimumPerCallUsd: "0.001" })
    expect((parser["accepts"] as Array<{ amount: string }>).map((entry) => entry.amount)).toEqual(["10000", "5000000"])
    const chat = document.paths["/api/v1/chat/completions"]!["post"]!["x-x402"]!
    expect(chat["price"]).toMatch(/^quoted per request/)
    expect(chat["topUp"]).toMatch(/\/api\/v1\/x402\/top-up$/)
    // The SDK's bazaar discovery info: a JSON body whose schema is the operation's request schema.
    expect(chat["extensions"]).toMatchObject({ bazaar: { info: { input: { type: "http", bodyType: "json" } } } })
    expect(parser["extensions"]).toMatchObject({ bazaar: { info: { input: { type: "http", bodyType: "form-data" } } } })
    expect(document.paths["/api/v1/x402/balance/{walletAddress}"]!["get"]!["x-x402"]).toBeUndefined()
  })
})
