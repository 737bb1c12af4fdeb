import { CreditLedger, Money, X402 } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { type Address, type Hex, serializeErc6492Signature } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as X402Route from "../src/routes/X402.ts"
import * as X402Chain from "./support/X402Chain.ts"

const ORIGIN = "http://localhost"
const TOP_UP = `${ORIGIN}/api/v1/x402/top-up`
const payTo = privateKeyToAccount(generatePrivateKey()).address
const config = X402.makeConfig({ publicOrigin: ORIGIN, payTo: { evm: payTo } })

let chain: X402Chain.Chain
let allowed: Awaited<ReturnType<X402Chain.Chain["deployFactory"]>>
let unknown: Awaited<ReturnType<X402Chain.Chain["deployFactory"]>>
let handler: (request: Request) => Promise<Response>
let dispose: () => Promise<void>
const fetchApp = (input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))

const balanceUsd = async (address: string) =>
  ((await (await fetchApp(`${ORIGIN}/api/v1/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd

/**
 * A signer for the official client that pays as a wallet not deployed yet: its owner signs, and
 * the signature is wrapped (EIP-6492) with the factory call that deploys the wallet.
 */
const counterfactualClient = (owner: PrivateKeyAccount, factory: Address, wallet: { address: Address; deployCall: Hex }) => {
  const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  registerExactEvmScheme(client, {
    signer: {
      address: wallet.address,
      signTypedData: async (typedData) =>
        serializeErc6492Signature({ address: factory, data: wallet.deployCall, signature: await owner.signTypedData(typedData as never) })
    }
  })
  return client
}

const salt = () => `0x${Crypto.randomBytes(32).toString("hex")}` as Hex

beforeAll(async () => {
  chain = await X402Chain.start()
  allowed = await chain.deployFactory()
  unknown = await chain.deployFactory()
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const app = App.layer(X402Route.routes).pipe(
    Layer.provide(Layer.mergeAll(
      X402.layer(config),
      CreditLedger.layerMemory,
      X402Chain.facilitator(chain, undefined, [allowed.address]),
      Auth.layer({ signingKey, publicOrigin: ORIGIN }).pipe(Layer.provide(AuthStore.layerMemory)),
      ServiceInfo.layer({ version: "test", hostName: "test-host" })
    ))
  )
  const web = Handlers.toWebHandler(app)
  handler = web.handler
  dispose = web.dispose
}, 60_000)

afterAll(async () => {
  await dispose?.()
  await chain?.stop()
})

describe("EIP-6492: a wallet not deployed yet tops up when its factory is allowed; the wallet is deployed, then paid from", () => {
  it("the official client pays $5 from a counterfactual wallet of an allowed factory", async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const wallet = allowed.counterfactual(owner.address, salt())
    await chain.mint(wallet.address, 20_000_000n)
    expect(await chain.codeAt(wallet.address)).toBeUndefined()
    const before = await chain.balanceOf(payTo)

    const response = await wrapFetchWithPayment(fetchApp, counterfactualClient(owner, allowed.address, wallet))(TOP_UP, { method: "POST" })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ walletAddress: wallet.address, creditedUsd: "5", balanceUsd: "5" })
    expect(await chain.codeAt(wallet.address)).toMatch(/^0x[0-9a-f]{10,}/)
    expect(await chain.balanceOf(payTo)).toBe(before + 5_000_000n)
    expect(await chain.balanceOf(wallet.address)).toBe(15_000_000n)
  })

  it("a factory not on the allow-list is refused: no deployment, no transfer, no credit", async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const wallet = unknown.counterfactual(owner.address, salt())
    await chain.mint(wallet.address, 20_000_000n)
    const client = counterfactualClient(owner, unknown.address, wallet)
    const required = decodePaymentRequiredHeader((await fetchApp(TOP_UP, { method: "POST" })).headers.get("payment-required")!)
    const payment = await client.createPaymentPayload(required)
    const response = await fetchApp(TOP_UP, { method: "POST", headers: { "PAYMENT-SIGNATURE": X402.encodeHeader(payment) } })
    expect(response.status).toBe(402)
    expect(decodePaymentRequiredHeader(response.headers.get("payment-required")!).error).toBe("eip6492_factory_not_allowed")
    expect(await chain.codeAt(wallet.address)).toBeUndefined()
    expect(await chain.balanceOf(wallet.address)).toBe(20_000_000n)
    expect(await balanceUsd(wallet.address)).toBe(Money.formatUsd(Money.zero))
  })
})
