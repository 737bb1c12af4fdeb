import { Models } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

const redis = await RedisServer.start()
let chain: X402Chain.Chain
let instances: ReadonlyArray<ShippedServer.ShippedServer> = []

beforeAll(async () => {
  chain = await X402Chain.start()
  const options = {
    store: "redis" as const,
    redisUrl: redis.url,
    signingKey: ShippedServer.generateSigningKey(),
    provision: false,
    config: {
      models: Models.defaults.filter((model) => model.id === "local-renderer"),
      // A block not mined within a second is a late receipt: the top-up answers 503.
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url, receiptTimeoutSeconds: 1 }
    }
  }
  instances = await Promise.all([ShippedServer.start(options), ShippedServer.start(options)])
}, 120_000)

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()))
  await chain?.stop()
  await redis.stop()
})

const balanceUsd = async (instance: ShippedServer.ShippedServer, address: string) =>
  ((await (await fetch(`${instance.api}/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd

describe("On Redis, a top-up whose receipt was late on one instance is credited once when it is retried on another", () => {
  it("503 from the first instance while the block is not mined; the same payment sent to the second: 200 with 5 USD; a replay to either is refused", async () => {
    const [first, second] = instances as [ShippedServer.ShippedServer, ShippedServer.ShippedServer]
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 10_000_000n)
    const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
    registerExactEvmScheme(client, { signer: wallet })
    // The official client pays; the payment it signed is what a client sends again after a 503.
    let payment: string | undefined
    const recordingFetch: typeof fetch = (input, init) => {
      const request = new Request(input, init)
      payment = request.headers.get("payment-signature") ?? payment
      return fetch(request)
    }
    await chain.client.setAutomine(false)
    try {
      const late = await wrapFetchWithPayment(recordingFetch, client)(`${first.api}/x402/top-up`, { method: "POST" })
      expect(late.status).toBe(503)
      expect(late.headers.get("retry-after")).not.toBeNull()
      expect(await balanceUsd(second, wallet.address)).toBe("0")
      await chain.client.mine({ blocks: 1 })
    } finally {
      await chain.client.setAutomine(true)
    }
    expect(payment).toBeDefined()
    const topUp = (instance: ShippedServer.ShippedServer) =>
      fetch(`${instance.api}/x402/top-up`, { method: "POST", headers: { "PAYMENT-SIGNATURE": payment! } })

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
  }, 60_000)
})
