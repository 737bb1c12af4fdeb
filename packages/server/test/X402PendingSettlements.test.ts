import { createKeyPairSignerFromBytes, generateKeyPairSigner } from "@solana/kit"
import { Models, X402 } from "@tollgate/core"
import { RedisServer, ShippedServer, SolanaRpc } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { ExactSvmScheme } from "@x402/svm/exact/client"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

const feePayerKey = SolanaRpc.keyPairBytes()

const redis = await RedisServer.start()
let chain: X402Chain.Chain
let solana: SolanaRpc.SolanaRpc
let treasury: string
let instances: ReadonlyArray<ShippedServer.ShippedServer> = []

beforeAll(async () => {
  chain = await X402Chain.start()
  solana = await SolanaRpc.start()
  solana.createMint(X402.SOLANA_USDC, 6)
  solana.airdrop((await createKeyPairSignerFromBytes(feePayerKey)).address, 10_000_000_000n)
  treasury = (await generateKeyPairSigner()).address
  await solana.fund(X402.SOLANA_USDC, treasury, 0n)
  const options = {
    store: "redis" as const,
    redisUrl: redis.url,
    signingKey: ShippedServer.generateSigningKey(),
    provision: false,
    config: {
      models: Models.defaults.filter((model) => model.id === "local-renderer"),
      // A block not mined within a second is a late receipt: the top-up answers 503.
      x402: {
        payTo: { evm: payTo, solana: treasury },
        relayerKey: RELAYER_KEY,
        evmRpcUrl: chain.anvil.url,
        receiptTimeoutSeconds: 1,
        solana: { rpcUrl: solana.url, feePayerKey: Array.from(feePayerKey) }
      }
    }
  }
  instances = await Promise.all([ShippedServer.start(options), ShippedServer.start(options)])
}, 120_000)

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()))
  await chain?.stop()
  await solana?.stop()
  await redis.stop()
})

/** A fetch that remembers the last `PAYMENT-SIGNATURE` sent: what a client sends again after a 503. */
const recordingFetch = () => {
  const sent = { payment: undefined as string | undefined }
  const fetchRecording: typeof fetch = (input, init) => {
    const request = new Request(input, init)
    sent.payment = request.headers.get("payment-signature") ?? sent.payment
    return fetch(request)
  }
  return { sent, fetch: fetchRecording }
}

const topUpWith = (payment: string) => (instance: ShippedServer.ShippedServer) =>
  fetch(`${instance.api}/x402/top-up`, { method: "POST", headers: { "PAYMENT-SIGNATURE": payment } })

const balanceUsd = async (instance: ShippedServer.ShippedServer, address: string) =>
  ((await (await fetch(`${instance.api}/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd

describe("On Redis, a top-up whose receipt was late on one instance is credited once when it is retried on another", () => {
  it(
    "503 from the first instance while the block is not mined; the same payment sent to the second: 200 with 5 USD; a replay to either is refused",
    async () => {
      const [first, second] = instances as [ShippedServer.ShippedServer, ShippedServer.ShippedServer]
      const wallet = privateKeyToAccount(generatePrivateKey())
      await chain.mint(wallet.address, 10_000_000n)
      const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
      registerExactEvmScheme(client, { signer: wallet })
      const recording = recordingFetch()
      await chain.client.setAutomine(false)
      try {
        const late = await wrapFetchWithPayment(recording.fetch, client)(`${first.api}/x402/top-up`, { method: "POST" })
        expect(late.status).toBe(503)
        expect(late.headers.get("retry-after")).not.toBeNull()
        expect(await balanceUsd(second, wallet.address)).toBe("0")
        await chain.client.mine({ blocks: 1 })
      } finally {
        await chain.client.setAutomine(true)
      }
      expect(recording.sent.payment).toBeDefined()
      const topUp = topUpWith(recording.sent.payment!)

      const retried = await topUp(second)
      expect(retried.status).toBe(200)
      expect(await retried.json()).toMatchObject({ walletAddress: wallet.address, creditedUsd: "5", balanceUsd: "5" })
      expect(await chain.balanceOf(payTo)).toBe(5_000_000n)

      for (const instance of [first, second]) {
        const replay = await topUp(instance)
        expect(replay.status).toBe(402)
        expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).toBe("invalid_exact_evm_nonce_already_used")
      }
      expect(await balanceUsd(first, wallet.address)).toBe("5")
      expect(await balanceUsd(second, wallet.address)).toBe("5")
      expect(await chain.balanceOf(wallet.address)).toBe(5_000_000n)
    },
    60_000
  )
})

describe("On Redis, a Solana top-up whose confirmation was late on one instance is credited once when it is retried on another", () => {
  it(
    "503 from the first instance while the node cannot confirm; the same payment sent to the second: 200 with 5 USD; a replay is refused",
    async () => {
      const [first, second] = instances as [ShippedServer.ShippedServer, ShippedServer.ShippedServer]
      // Exactly the price: once the transfer has landed, a fresh check of the same transaction fails
      // (its simulation finds no USDC left), so only the pending settlement lets the retry through.
      const payer = await generateKeyPairSigner()
      await solana.fund(X402.SOLANA_USDC, payer.address, 5_000_000n)
      const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
      client.register("solana:*", new ExactSvmScheme(payer, { rpcUrl: solana.url }))
      const recording = recordingFetch()
      solana.lagStatuses(true)
      try {
        const late = await wrapFetchWithPayment(recording.fetch, client)(`${first.api}/x402/top-up`, { method: "POST" })
        expect(late.status).toBe(503)
        expect(await solana.tokenBalance(X402.SOLANA_USDC, treasury)).toBe(5_000_000n)
        expect(await balanceUsd(second, payer.address)).toBe("0")
      } finally {
        solana.lagStatuses(false)
      }
      const topUp = topUpWith(recording.sent.payment!)

      const retried = await topUp(second)
      expect(retried.status).toBe(200)
      expect(await retried.json()).toMatchObject({
        walletAddress: payer.address,
        network: X402.SOLANA_MAINNET,
        creditedUsd: "5",
        balanceUsd: "5"
      })

      for (const instance of [first, second]) expect((await topUp(instance)).status).toBe(402)
      expect(await balanceUsd(first, payer.address)).toBe("5")
      expect(await solana.tokenBalance(X402.SOLANA_USDC, treasury)).toBe(5_000_000n)
      expect(await solana.tokenBalance(X402.SOLANA_USDC, payer.address)).toBe(0n)
    },
    60_000
  )
})
