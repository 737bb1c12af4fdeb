import * as PaymentFacilitator from "@tollgate/backends/payment/PaymentFacilitator"
import { CreditLedger, Money, PendingSettlements, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import { PendingSettlementsRedis, RedisConnection } from "@tollgate/redis"
import { Anvil, FreePort, RedisServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { Effect, Layer, Redacted } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as X402Chain from "./support/X402Chain.ts"

const ORIGIN = "http://localhost"
const TOP_UP = `${ORIGIN}/api/v1/x402/top-up`
const payTo = privateKeyToAccount(generatePrivateKey()).address
const config = X402.makeConfig({ publicOrigin: ORIGIN, payTo: { evm: payTo } })
const requirement = X402.requirements(config, Money.usd(5))[0]!

let chain: X402Chain.Chain
const disposals: Array<() => Promise<void>> = []

/**
 * The top-up routes in process, settling EVM payments locally over `rpcUrl`, with pending
 * settlements in the SDK's memory store or in the Redis at `redisUrl`.
 */
const serve = async (rpcUrl: string, redisUrl?: string) => {
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const pendingSettlements = redisUrl === undefined
    ? PendingSettlements.layerMemory
    : PendingSettlementsRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url: redisUrl })))
  const facilitator = Layer.unwrap(Effect.gen(function*() {
    return PaymentFacilitator.layer({
      local: {
        chains: { [X402.BASE_MAINNET]: { rpcUrl } },
        relayerKey: Redacted.make(Anvil.devPrivateKey),
        pollingIntervalMs: 50,
        receiptTimeout: "1 second",
        pendingSettlements: yield* PendingSettlements.PendingSettlements
      }
    })
  })).pipe(Layer.provide(pendingSettlements))
  const web = Handlers.toWebHandler(
    App.layer(X402Route.routes).pipe(
      Layer.provide(Layer.mergeAll(
        X402.layer(config),
        CreditLedger.layerMemory,
        facilitator,
        Auth.layer({ signingKey, publicOrigin: ORIGIN }).pipe(Layer.provide(AuthStore.layerMemory)),
        ServiceInfo.layer({ version: "test", hostName: "test-host" })
      ))
    )
  )
  disposals.push(web.dispose)
  const fetchApp = (input: string, init?: RequestInit) => web.handler(new Request(input, init))
  return {
    topUp: (header: string) => fetchApp(TOP_UP, { method: "POST", headers: { "PAYMENT-SIGNATURE": header } }),
    balanceUsd: async (address: string) =>
      ((await (await fetchApp(`${ORIGIN}/api/v1/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd
  }
}

beforeAll(async () => {
  chain = await X402Chain.start()
}, 60_000)

afterAll(async () => {
  for (const dispose of disposals) await dispose()
  await chain?.stop()
})

describe("A settlement sent but not confirmed in time is a 503; the same payment sent again is credited once it is mined", () => {
  it("503 while the block is not mined, then 200 with 5 USD, then the replay is refused", async () => {
    const app = await serve(chain.anvil.url)
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 5_000_000n)
    const header = X402Chain.paymentHeader(requirement, await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n }))
    await chain.client.setAutomine(false)
    try {
      const late = await app.topUp(header)
      expect(late.status).toBe(503)
      expect(await app.balanceUsd(wallet.address)).toBe("0")
      await chain.client.mine({ blocks: 1 })
    } finally {
      await chain.client.setAutomine(true)
    }
    const retried = await app.topUp(header)
    expect(retried.status).toBe(200)
    expect(await retried.json()).toMatchObject({ creditedUsd: "5", balanceUsd: "5" })
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)
    const replay = await app.topUp(header)
    expect(decodePaymentRequiredHeader(replay.headers.get("payment-required")!).error).toBe("invalid_exact_evm_nonce_already_used")
    expect(await app.balanceUsd(wallet.address)).toBe("5")
  }, 30_000)
})

describe("A chain that cannot be reached is a 503, never a refusal of the payment", () => {
  it("a valid authorization checked against an RPC URL nobody listens on", async () => {
    const app = await serve(`http://127.0.0.1:${await FreePort.freePort()}`)
    const wallet = privateKeyToAccount(generatePrivateKey())
    const header = X402Chain.paymentHeader(requirement, await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n }))
    const response = await app.topUp(header)
    expect(response.status).toBe(503)
    expect(await app.balanceUsd(wallet.address)).toBe("0")
  }, 30_000)
})

describe("A late receipt while Redis is down is still a 503: the sent transaction is recorded once Redis answers, and the retry is credited", () => {
  it("Redis killed while the block is not mined and started again after the receipt wait: 503, then 200 with 5 USD", async () => {
    const redis = await RedisServer.start()
    disposals.push(redis.stop)
    const app = await serve(chain.anvil.url, redis.url)
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 5_000_000n)
    const header = X402Chain.paymentHeader(requirement, await X402Chain.authorize(wallet, { to: payTo, value: 5_000_000n }))
    await chain.client.setAutomine(false)
    try {
      const late = app.topUp(header)
      const deadline = Date.now() + 10_000
      while ((await chain.client.getTxpoolStatus()).pending === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      expect((await chain.client.getTxpoolStatus()).pending).toBe(1)
      await redis.kill()
      // The receipt wait (1 s, started before the transaction reached the pool) ends while Redis is
      // down: the SDK fails to record the transaction. Nothing outside the server shows that moment
      // (the answer itself waits for Redis), so Redis stays down three times as long.
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      await redis.restart()
      expect((await late).status).toBe(503)
      expect(await app.balanceUsd(wallet.address)).toBe("0")
      await chain.client.mine({ blocks: 1 })
    } finally {
      await chain.client.setAutomine(true)
    }
    const retried = await app.topUp(header)
    expect(retried.status).toBe(200)
    expect(await retried.json()).toMatchObject({ creditedUsd: "5", balanceUsd: "5" })
  }, 30_000)
})
