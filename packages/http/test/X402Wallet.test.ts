import * as RpcUpstream from "@tollgate/backends/RpcUpstream"
import { CreditLedger, IdempotencyStore, Money, PricingEngine, RpcCache, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { createSIWxClientExtension, createSIWxPayload, encodeSIWxHeader } from "@x402/extensions/sign-in-with-x"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect, Layer, Result } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, type Route, ServiceInfo } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as X402Bodies from "../src/payment/PaymentRequiredBodies.ts"
import * as RpcRoute from "../src/routes/Rpc.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as TestApp from "./support/TestApp.ts"
import * as X402Chain from "./support/X402Chain.ts"

const ORIGIN = "http://localhost"
const RPC = `${ORIGIN}/api/v1/crypto/rpc/base-mainnet`
const payTo = privateKeyToAccount(generatePrivateKey()).address
const payer = privateKeyToAccount(generatePrivateKey())
const config = X402.makeConfig({ publicOrigin: ORIGIN, payTo: { evm: payTo } })
const rpcPrice = PricingEngine.rpcFromCredits(PricingEngine.defaults, "base-mainnet", 20).amount

let chain: X402Chain.Chain
let handler: (request: Request) => Promise<Response>
let dispose: () => Promise<void>
const fetchApp = (input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))

const blockNumber = {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
}

const walletClient = (account = payer) => {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  registerExactEvmScheme(client, { signer: account })
  client.registerExtension(createSIWxClientExtension({ signers: [account] }))
  return wrapFetchWithPayment(fetchApp, client)
}

beforeAll(async () => {
  chain = await X402Chain.start()
  await chain.mint(payer.address, 100_000_000n)
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const services = Layer.mergeAll(
    X402.layer(config),
    CreditLedger.layerMemory,
    X402Chain.facilitator(chain),
    Auth.layer({ signingKey, publicOrigin: ORIGIN, chains: [X402.BASE_MAINNET] }).pipe(Layer.provideMerge(AuthStore.layerMemory)),
    RateLimiter.layerMemory(),
    IdempotencyStore.layerMemory,
    PricingEngine.layer(),
    RpcUpstream.layer({ upstreams: { "base-mainnet": [chain.anvil.url] } }),
    RpcCache.layerMemory(),
    Metered.layerLimitsDefault,
    ServiceInfo.layer({ version: "test", hostName: "test-host" })
  )
  const routes: ReadonlyArray<Route.Route<Layer.Success<typeof services> | Metered.Metered>> = [...X402Route.routes, RpcRoute.route]
  const app = App.layer(routes).pipe(
    Layer.provide(TestApp.layerMeteredMemory()),
    Layer.provide(X402Bodies.layer),
    Layer.provideMerge(services)
  )
  const web = Handlers.toWebHandler(app)
  handler = web.handler
  dispose = web.dispose
}, 60_000)

afterAll(async () => {
  await dispose?.()
  await chain?.stop()
})

describe("A metered call without credentials answers the x402 discovery 402 (form 2)", () => {
  it("carries the Base USDC top-up requirement, a SIWX challenge for the public origin and PAYMENT-REQUIRED", async () => {
    const response = await fetchApp(RPC, blockNumber)
    expect(response.status).toBe(402)
    expect(response.headers.get("cache-control")).toBe("no-store")
    const body = await response.json() as X402.DiscoveryBody
    expect(decodePaymentRequiredHeader(response.headers.get("payment-required")!)).toEqual(body)
    expect(body).toMatchObject({
      x402Version: 2,
      resource: { url: RPC },
      accepts: [{ scheme: "exact", network: X402.BASE_MAINNET, asset: X402.BASE_USDC, amount: "5000000", payTo }],
      extensions: { "sign-in-with-x": { info: { domain: "localhost", nonce: expect.stringMatching(/^[0-9a-f]{16}$/) } } },
      authOptions: { x402Wallet: { topUp: `${ORIGIN}/api/v1/x402/top-up` } }
    })
  })
})

describe("Spending as a wallet: top up with the official client, sign in with SIWX, X-Balance-Remaining drops by the price", () => {
  it("tops up $5, then a signed-in RPC call is charged to the wallet", async () => {
    const topUp = await walletClient()(`${ORIGIN}/api/v1/x402/top-up`, { method: "POST" })
    expect(topUp.status).toBe(200)
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)

    const response = await walletClient()(RPC, blockNumber)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 1, result: expect.stringMatching(/^0x/) })
    expect(response.headers.get("x-balance-remaining")).toBe(Money.formatUsd(Money.subtract(Money.usd(5), rpcPrice)))
    const balance = await fetchApp(`${ORIGIN}/api/v1/x402/balance/${payer.address}`)
    expect((await balance.json() as { balanceUsd: string }).balanceUsd).toBe(Money.formatUsd(Money.subtract(Money.usd(5), rpcPrice)))
  })

  it("a SIWX header built by hand with createSIWxPayload spends the same way", async () => {
    const first = await fetchApp(RPC, blockNumber)
    const challenge = decodePaymentRequiredHeader(first.headers.get("payment-required")!).extensions!["sign-in-with-x"] as {
      info: Record<string, string>
      supportedChains: Array<{ chainId: string; type: string }>
    }
    const evm = challenge.supportedChains.find((c) => c.type === "eip191")!
    const payload = await createSIWxPayload({ ...challenge.info, chainId: evm.chainId, type: "eip191" } as never, payer, RPC)
    const before = (await (await fetchApp(`${ORIGIN}/api/v1/x402/balance/${payer.address}`)).json() as { balanceUsd: string }).balanceUsd
    const response = await fetchApp(RPC, {
      ...blockNumber,
      headers: { ...blockNumber.headers, "SIGN-IN-WITH-X": encodeSIWxHeader(payload) }
    })
    expect(response.status).toBe(200)
    const after = Money.subtract(Result.getOrThrow(Money.parseUsd(before)), rpcPrice)
    expect(response.headers.get("x-balance-remaining")).toBe(Money.formatUsd(after))
  })
})

describe("A signed-in wallet with too little balance gets form 3", () => {
  it("answers 402 with the insufficient-balance body and a fresh SIWX challenge", async () => {
    const broke = privateKeyToAccount(generatePrivateKey())
    const first = await fetchApp(RPC, blockNumber)
    const challenge = decodePaymentRequiredHeader(first.headers.get("payment-required")!).extensions!["sign-in-with-x"] as {
      info: Record<string, string>
    }
    const payload = await createSIWxPayload({ ...challenge.info, chainId: X402.BASE_MAINNET, type: "eip191" } as never, broke, RPC)
    const response = await fetchApp(RPC, {
      ...blockNumber,
      headers: { ...blockNumber.headers, "SIGN-IN-WITH-X": encodeSIWxHeader(payload) }
    })
    expect(response.status).toBe(402)
    expect(await response.json()).toMatchObject({
      error: "Payment required",
      code: "PAYMENT_REQUIRED",
      reason: "insufficient_balance",
      currentBalanceUsd: 0,
      minimumBalanceUsd: Money.toUsdNumber(rpcPrice),
      suggestedTopUpUsd: 5,
      minimumTopUpUsd: 5,
      topUpInstructions: { receiverWallet: payTo, tokenAddress: X402.BASE_USDC, tokenDecimals: 6, network: "base" },
      siwxChallenge: { info: { domain: "localhost" }, supportedChains: [{ chainId: X402.BASE_MAINNET, type: "eip191" }] }
    })
  })
})
