/**
 * x402 `upto` through the shipped server on anvil (the test USDC at Base's USDC address, Permit2 and
 * x402's upto proxy at their canonical addresses): a call whose charge is known from its outcome is
 * paid with a Permit2 permit for its worst case, and only its actual charge leaves the payer. On the
 * memory store and on Redis, whose ledger script places and captures the permit-funded hold.
 */
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { UptoEvmScheme } from "@x402/evm/upto/client"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { maxUint256 } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, the facilitator every upto permit names. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const RELAYER = privateKeyToAccount(RELAYER_KEY).address
const payTo = privateKeyToAccount(generatePrivateKey()).address

/** 1 nano-USD per input token and 2 per output token: a completion's charge is exact in USDC units. */
const PRICES = { inputPerMillionUsd: "1000", outputPerMillionUsd: "2000" }
const USAGE = { prompt_tokens: 10, completion_tokens: 2 }
/** 10 x 0.001 + 2 x 0.002 USD. */
const CHAT_CHARGE_UNITS = 14_000n
/** 0.02 USD per embedding token; the fake upstream counts one token per word. */
const EMBEDDING_UNITS_PER_TOKEN = 20_000n
const FUNDS = 10_000_000n

let chain: X402Chain.Chain
let upstream: FakeChatUpstream.FakeChatUpstream
let redis: RedisServer.RedisServer

const normalScript = () => ({ pieces: ["Hello", " there"], usage: USAGE })

beforeAll(async () => {
  chain = await X402Chain.start()
  upstream = await FakeChatUpstream.start(normalScript)
  redis = await RedisServer.start()
}, 120_000)

afterAll(async () => {
  await upstream?.close()
  await chain?.stop()
  await redis?.stop()
})

const startServer = (store: "memory" | "redis") =>
  ShippedServer.start({
    ...(store === "redis" ? { store: "redis" as const, redisUrl: redis.url } : {}),
    config: {
      models: [
        { id: "test-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        { id: "text-embedding-3-small", type: "embedding", upstreams: [{ baseUrl: upstream.baseUrl }], dimensions: 8 }
      ],
      prices: {
        chat: { "test-model": PRICES },
        embedding: { "text-embedding-3-small": { perMillionTokensUsd: "20000" } }
      },
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url }
    }
  })

/** A wallet holding 10 USDC that approved Permit2 once, as an upto payer must. */
const permit2Wallet = async () => {
  const wallet = privateKeyToAccount(generatePrivateKey())
  await chain.mint(wallet.address, FUNDS)
  await chain.approvePermit2(wallet, maxUint256)
  return wallet
}

/** The official client with the upto scheme only. */
const uptoClient = (wallet: ReturnType<typeof privateKeyToAccount>) => new x402Client().register("eip155:*", new UptoEvmScheme(wallet))

/** A fetch that remembers the last payment it sent, to replay it. */
const recordingFetch = () => {
  const sent = { payment: undefined as string | undefined }
  const recording: typeof fetch = (input, init) => {
    const request = new Request(input, init)
    sent.payment = request.headers.get("payment-signature") ?? sent.payment
    return fetch(request)
  }
  return { sent, fetch: recording }
}

const chatBody = JSON.stringify({ model: "test-model", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
const chatInit = (): RequestInit => ({ method: "POST", headers: { "content-type": "application/json" }, body: chatBody })

const paidBy = async (address: `0x${string}`) => FUNDS - (await chain.balanceOf(address))

describe.each(["memory", "redis"] as const)(
  "upto on the %s store: the payer signs the worst case, only the actual charge leaves it",
  (store) => {
    let server: ShippedServer.ShippedServer
    beforeAll(async () => {
      server = await startServer(store)
    }, 120_000)
    afterAll(async () => {
      await server?.stop()
    })

    const creditUnits = async (address: string) => {
      const { balanceUsd } = (await (await fetch(`${server.api}/x402/balance/${address}`)).json()) as { balanceUsd: string }
      return BigInt(Math.round(Number(balanceUsd) * 1_000_000))
    }

    it("the discovery 402 of a chat offers upto at the worst case first, then exact at the same amount, then the top-up; the text parser exact only", async () => {
      const chat = await fetch(`${server.api}/chat/completions`, chatInit())
      expect(chat.status).toBe(402)
      const offered = decodePaymentRequiredHeader(chat.headers.get("payment-required")!)
      const [upto, exact, topUp] = offered.accepts
      expect(offered.accepts).toHaveLength(3)
      expect(upto).toMatchObject({
        scheme: "upto",
        payTo,
        extra: { assetTransferMethod: "permit2", facilitatorAddress: RELAYER, name: "USD Coin", version: "2" }
      })
      expect(exact).toMatchObject({ scheme: "exact", amount: upto!.amount, payTo })
      expect(topUp).toMatchObject({ scheme: "exact", amount: "5000000" })
      expect(BigInt(upto!.amount)).toBeGreaterThan(CHAT_CHARGE_UNITS)
      expect(offered.resource.description).toMatch(
        /^Pay this call: upto .* USD with a Permit2 permit, of which what the call uses is settled/
      )

      const form = new FormData()
      form.append("file", new Blob(["Quarterly figures."], { type: "text/plain" }), "notes.txt")
      const parser = await fetch(`${server.api}/augment/text-parser`, { method: "POST", body: form })
      const parserOffer = decodePaymentRequiredHeader(parser.headers.get("payment-required")!)
      expect(parserOffer.accepts.map((entry) => [entry.scheme, entry.amount])).toEqual([["exact", "10000"], ["exact", "5000000"]])

      const document = (await (await fetch(`${server.api}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { "x-x402"?: Record<string, unknown> }>>
      }
      expect(document.paths["/api/v1/chat/completions"]!["post"]!["x-x402"]!["schemes"]).toEqual(["upto", "exact"])
      expect(document.paths["/api/v1/embeddings"]!["post"]!["x-x402"]!["schemes"]).toEqual(["upto", "exact"])
      expect(document.paths["/api/v1/augment/text-parser"]!["post"]!["x-x402"]!["schemes"]).toEqual(["exact"])
    })

    it(
      "POST /chat/completions with the upto client: 200, exactly the charge leaves the payer, no credit is left, a replay is refused and moves nothing",
      async () => {
        const wallet = await permit2Wallet()
        const payToBefore = await chain.balanceOf(payTo)
        const recording = recordingFetch()
        const response = await wrapFetchWithPayment(recording.fetch, uptoClient(wallet))(`${server.api}/chat/completions`, chatInit())
        expect(response.status).toBe(200)
        expect(((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe(
          "Hello there"
        )
        const settled = decodePaymentResponseHeader(response.headers.get("payment-response")!)
        expect(settled).toMatchObject({ success: true, payer: wallet.address, amount: String(CHAT_CHARGE_UNITS) })
        expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/)
        expect(await paidBy(wallet.address)).toBe(CHAT_CHARGE_UNITS)
        expect((await chain.balanceOf(payTo)) - payToBefore).toBe(CHAT_CHARGE_UNITS)
        expect(await creditUnits(wallet.address)).toBe(0n)

        const replay = await fetch(`${server.api}/chat/completions`, {
          ...chatInit(),
          headers: { "content-type": "application/json", "payment-signature": recording.sent.payment! }
        })
        expect(replay.status).toBe(402)
        expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).not.toBe("Payment required")
        expect(await paidBy(wallet.address)).toBe(CHAT_CHARGE_UNITS)
        expect(await creditUnits(wallet.address)).toBe(0n)
      },
      60_000
    )

    it("a replay sent while the permit's call runs is a 409 and moves nothing: the permit pays one call, once", async () => {
      const wallet = await permit2Wallet()
      upstream.script = () => ({ ...normalScript(), delayMs: 400 })
      let replay: Promise<Response> | undefined
      const racing: typeof fetch = (input, init) => {
        const request = new Request(input, init)
        const payment = request.headers.get("payment-signature")
        if (payment !== null) {
          replay = new Promise((resolve) => setTimeout(resolve, 200)).then(() =>
            fetch(`${server.api}/chat/completions`, {
              ...chatInit(),
              headers: { "content-type": "application/json", "payment-signature": payment }
            })
          )
        }
        return fetch(request)
      }
      try {
        const response = await wrapFetchWithPayment(racing, uptoClient(wallet))(`${server.api}/chat/completions`, chatInit())
        expect(response.status).toBe(200)
        const replayed = await replay!
        expect(replayed.status).toBe(409)
        expect(await replayed.json()).toEqual({ error: "This permit is already paying a call" })
      } finally {
        upstream.script = normalScript
      }
      expect(await paidBy(wallet.address)).toBe(CHAT_CHARGE_UNITS)
      expect(await creditUnits(wallet.address)).toBe(0n)
    }, 60_000)

    it(
      "POST /embeddings with the upto client: the permit covers the tokens counted here, the payer pays the tokens the upstream billed",
      async () => {
        const wallet = await permit2Wallet()
        const recording = recordingFetch()
        const response = await wrapFetchWithPayment(recording.fetch, uptoClient(wallet))(`${server.api}/embeddings`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "text-embedding-3-small", input: "antidisestablishmentarianism" })
        })
        expect(response.status).toBe(200)
        const body = (await response.json()) as { usage: { prompt_tokens: number } }
        expect(body.usage.prompt_tokens).toBe(1)
        const settled = decodePaymentResponseHeader(response.headers.get("payment-response")!)
        expect(settled).toMatchObject({ success: true, amount: String(EMBEDDING_UNITS_PER_TOKEN) })
        expect(await paidBy(wallet.address)).toBe(EMBEDDING_UNITS_PER_TOKEN)
        expect(await creditUnits(wallet.address)).toBe(0n)
      },
      60_000
    )

    it(
      "a streamed chat paid with upto: the events arrive, and the charge is settled when the stream ends (no PAYMENT-RESPONSE, the headers were sent)",
      async () => {
        const wallet = await permit2Wallet()
        const body = JSON.stringify({
          model: "test-model",
          max_tokens: 100,
          stream: true,
          stream_options: { include_usage: true },
          messages: [{ role: "user", content: "hi" }]
        })
        const response = await wrapFetchWithPayment(fetch, uptoClient(wallet))(`${server.api}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body
        })
        expect(response.status).toBe(200)
        expect(response.headers.get("payment-response")).toBeNull()
        const events = await response.text()
        expect(events).toContain("Hello")
        expect(events).toContain("data: [DONE]")
        // The settlement is sent as the stream ends, which may be just after its last bytes reach us.
        const deadline = Date.now() + 10_000
        while (await paidBy(wallet.address) !== CHAT_CHARGE_UNITS && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        expect(await paidBy(wallet.address)).toBe(CHAT_CHARGE_UNITS)
        expect(await creditUnits(wallet.address)).toBe(0n)
      },
      60_000
    )

    it("a chat whose upstream fails: the error is answered, nothing is settled or credited, and the answer says so", async () => {
      const wallet = await permit2Wallet()
      upstream.script = () => ({ pieces: [], status: 500 })
      try {
        const response = await wrapFetchWithPayment(fetch, uptoClient(wallet))(`${server.api}/chat/completions`, chatInit())
        expect(response.status).toBeGreaterThanOrEqual(500)
        expect(response.headers.get("x-payment-credit")).toBe("unsettled")
        expect(response.headers.get("payment-response")).toBeNull()
      } finally {
        upstream.script = normalScript
      }
      expect(await paidBy(wallet.address)).toBe(0n)
      expect(await creditUnits(wallet.address)).toBe(0n)
    }, 60_000)

    it(
      "the plain exact client still pays the chat with exact (it cannot sign upto): the worst case moves, the rest is credit",
      async () => {
        const wallet = await permit2Wallet()
        const client = new x402Client()
        registerExactEvmScheme(client, { signer: wallet })
        const response = await wrapFetchWithPayment(fetch, client)(`${server.api}/chat/completions`, chatInit())
        expect(response.status).toBe(200)
        const paid = await paidBy(wallet.address)
        expect(paid).toBeGreaterThan(CHAT_CHARGE_UNITS)
        expect(await creditUnits(wallet.address)).toBe(paid - CHAT_CHARGE_UNITS)
      },
      60_000
    )

    it(
      "a permit whose Permit2 allowance is revoked while the call runs: the answer is withheld for a 402, nothing moves, the operator carries the call",
      async () => {
        const wallet = await permit2Wallet()
        let revoked: Promise<void> | undefined
        upstream.script = () => {
          revoked ??= chain.approvePermit2(wallet, 0n)
          return { ...normalScript(), delayMs: 500 }
        }
        try {
          const response = await wrapFetchWithPayment(fetch, uptoClient(wallet))(`${server.api}/chat/completions`, chatInit())
          await revoked
          expect(response.status).toBe(402)
          expect(decodePaymentRequiredHeader(response.headers.get("payment-required")!).error).not.toBe("Payment required")
        } finally {
          upstream.script = normalScript
        }
        expect(await paidBy(wallet.address)).toBe(0n)
        expect(await creditUnits(wallet.address)).toBe(0n)
      },
      60_000
    )
  }
)

describe("x402.upto: false turns upto off: an operator who will not settle after the call offers exact only", () => {
  it("the chat's 402 offers exact at the worst case, then the top-up", async () => {
    const server = await ShippedServer.start({
      config: {
        models: [{ id: "test-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
        prices: { chat: { "test-model": PRICES } },
        x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url, upto: false }
      }
    })
    try {
      const chat = await fetch(`${server.api}/chat/completions`, chatInit())
      const offered = decodePaymentRequiredHeader(chat.headers.get("payment-required")!)
      expect(offered.accepts.map((entry) => entry.scheme)).toEqual(["exact", "exact"])
    } finally {
      await server.stop()
    }
  }, 60_000)
})
