import * as RpcUpstream from "@tollgate/backends/RpcUpstream"
import * as StakeChain from "@tollgate/backends/StakeChain"
import { type CreditLedger, IdempotencyStore, Money, PricingEngine, RpcCache, Staking, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { Anvil, StakeToken } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { createSIWxPayload, encodeSIWxHeader } from "@x402/extensions/sign-in-with-x"
import { Clock, Context, Effect, Layer } from "effect"
import { createTestClient, defineChain, http, publicActions } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, type Route, ServiceInfo } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as X402Bodies from "../src/payment/PaymentRequiredBodies.ts"
import * as RpcRoute from "../src/routes/Rpc.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as TestApp from "./support/TestApp.ts"

const ORIGIN = "http://localhost"
const RPC = `${ORIGIN}/api/v1/crypto/rpc/base-mainnet`
const DAY_MS = 86_400_000
const REFRESH_MS = 300_000
const blockNumber = {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
}

/**
 * The server's clock: real time moved by `offset`, so a test can step to the next UTC day while
 * timers (receipt polling, timeouts) still run on real time.
 */
let offset = 0
const liveClock = Context.get(Context.empty(), Clock.Clock)
const movableClock: Clock.Clock = {
  ...liveClock,
  currentTimeMillisUnsafe: () => liveClock.currentTimeMillisUnsafe() + offset,
  currentTimeMillis: Effect.sync(() => liveClock.currentTimeMillisUnsafe() + offset),
  currentTimeNanosUnsafe: () => liveClock.currentTimeNanosUnsafe() + BigInt(offset) * 1_000_000n,
  currentTimeNanos: Effect.sync(() => liveClock.currentTimeNanosUnsafe() + BigInt(offset) * 1_000_000n)
}

let anvil: Anvil.Anvil
let chain: ReturnType<typeof createTestClient> & ReturnType<typeof publicActions>
let token: StakeToken.StakeToken
let ledger: CreditLedger.CreditLedger["Service"]
let handler: (request: Request) => Promise<Response>
let dispose: () => Promise<void>
const fetchApp = (input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))

/** Moves the chain and the server's clock forward together. */
const advance = async (ms: number) => {
  offset += ms
  await chain.increaseTime({ seconds: Math.ceil(ms / 1000) })
  await chain.mine({ blocks: 1 })
}

/** An RPC call signed in with SIWX from a fresh challenge. */
const signedCall = async (account: PrivateKeyAccount) => {
  const first = await fetchApp(RPC, blockNumber)
  const challenge = decodePaymentRequiredHeader(first.headers.get("payment-required")!).extensions!["sign-in-with-x"] as {
    info: Record<string, string>
  }
  const payload = await createSIWxPayload({ ...challenge.info, chainId: X402.BASE_MAINNET, type: "eip191" } as never, account, RPC)
  return fetchApp(RPC, { ...blockNumber, headers: { ...blockNumber.headers, "SIGN-IN-WITH-X": encodeSIWxHeader(payload) } })
}

const walletBalance = async (account: PrivateKeyAccount) =>
  ((await (await fetchApp(`${ORIGIN}/api/v1/x402/balance/${account.address}`)).json()) as { balanceUsd: string }).balanceUsd

beforeAll(async () => {
  // Start just after midnight UTC, so the steps below stay inside one day until the test moves on.
  offset = Math.ceil(Date.now() / DAY_MS) * DAY_MS + 60_000 - Date.now()
  anvil = await Anvil.start({ chainId: 8453, args: ["--timestamp", String(Math.floor((Date.now() + offset) / 1000))] })
  const viemChain = defineChain({
    id: 8453,
    name: "base-test",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } }
  })
  chain = createTestClient({ chain: viemChain, mode: "anvil", transport: http(anvil.url), pollingInterval: 50 }).extend(publicActions)
  token = await StakeToken.deploy(anvil.url, 8453)

  const built = await TestApp.ledgerMemory()
  ledger = built
  const ledgerLayer = Layer.succeedContext(built.context)
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const services = Layer.mergeAll(
    X402.layer(X402.makeConfig({ publicOrigin: ORIGIN, payTo: { evm: privateKeyToAccount(generatePrivateKey()).address } })),
    ledgerLayer,
    Staking.layer({
      read: StakeChain.reader({ network: X402.BASE_MAINNET, contract: token.address, rpcUrl: anvil.url }),
      refreshMs: REFRESH_MS
    }).pipe(Layer.provide(ledgerLayer)),
    Auth.layer({ signingKey, publicOrigin: ORIGIN, chains: [X402.BASE_MAINNET] }).pipe(Layer.provideMerge(AuthStore.layerMemory)),
    RateLimiter.layerMemory(),
    IdempotencyStore.layerMemory,
    // One USD per eth_blockNumber, so three staked tokens pay for three calls a day.
    PricingEngine.layer({ rpc: { nanoPerCredit: Money.unsafeNano(Money.NANO_PER_USD), baseCredits: { "base-mainnet": 1 } } }),
    RpcUpstream.layer({ upstreams: { "base-mainnet": [anvil.url] } }),
    RpcCache.layerMemory(),
    Metered.layerLimitsDefault,
    ServiceInfo.layer({ version: "test", hostName: "test-host" }),
    Layer.succeed(Clock.Clock, movableClock)
  )
  const routes: ReadonlyArray<Route.Route<Layer.Success<typeof services> | Metered.Metered>> = [X402Route.balance, RpcRoute.route]
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
  await anvil?.stop()
})

describe("Staked tokens read from chain give a wallet 1 USD of credit per token per UTC day, spent before prepaid USD", () => {
  it("a wallet holding 3 tokens gets 3 USD a day: spent first, then USD, and back the next UTC day", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await token.mint(wallet.address, 3n)
    await Effect.runPromise(
      ledger.grant({ accountId: `wallet:evm:${wallet.address.toLowerCase()}`, amount: Money.usd(2), reference: "prepaid" })
    )

    for (const allowanceBefore of ["3", "2", "1"]) {
      const response = await signedCall(wallet)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-service-balance-token")).toBe(allowanceBefore)
      expect(response.headers.get("x-service-balance-usd")).toBe("2")
    }
    const paidInUsd = await signedCall(wallet)
    expect(paidInUsd.status).toBe(200)
    expect(paidInUsd.headers.get("x-service-balance-token")).toBe("0")
    expect(await walletBalance(wallet)).toBe("1")

    await advance(DAY_MS)
    const nextDay = await signedCall(wallet)
    expect(nextDay.status).toBe(200)
    expect(nextDay.headers.get("x-service-balance-token")).toBe("3")
    expect(await walletBalance(wallet)).toBe("1")
  })
})

describe("A stake read from chain stays current for a few minutes, then is read again", () => {
  it("tokens bought later count once the cached read is older than the refresh interval", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await token.mint(wallet.address, 1n)
    expect((await signedCall(wallet)).headers.get("x-service-balance-token")).toBe("1")
    await token.mint(wallet.address, 4n)
    // Still the cached read: the first call spent the only token, so nothing is left to pay with.
    expect((await signedCall(wallet)).status).toBe(402)
    await advance(REFRESH_MS)
    const refreshed = await signedCall(wallet)
    expect(refreshed.status).toBe(200)
    expect(refreshed.headers.get("x-service-balance-token")).toBe("4")
  })

  it("a wallet without tokens has no allowance", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const response = await signedCall(wallet)
    expect(response.status).toBe(402)
    expect(await response.json()).toMatchObject({ reason: "insufficient_balance", currentBalanceUsd: 0 })
  })
})
