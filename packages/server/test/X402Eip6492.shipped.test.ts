import { ShippedServer } from "@tollgate/testkit"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import * as Crypto from "node:crypto"
import { type Hex, serializeErc6492Signature } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

let chain: X402Chain.Chain
let factory: Awaited<ReturnType<X402Chain.Chain["deployFactory"]>>
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  chain = await X402Chain.start()
  factory = await chain.deployFactory()
  server = await ShippedServer.start({
    config: {
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url, eip6492AllowedFactories: [factory.address] }
    }
  })
})

afterAll(async () => {
  await server?.stop()
  await chain?.stop()
})

describe("The shipped server settles an EIP-6492 top-up from a wallet of an allowed factory (x402.eip6492AllowedFactories)", () => {
  it("the official client pays $5 as a wallet not deployed yet: the wallet is deployed, USDC moves, the wallet is credited", async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const wallet = factory.counterfactual(owner.address, `0x${Crypto.randomBytes(32).toString("hex")}` as Hex)
    await chain.mint(wallet.address, 10_000_000n)
    const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
    registerExactEvmScheme(client, {
      signer: {
        address: wallet.address,
        signTypedData: async (typedData) =>
          serializeErc6492Signature({
            address: factory.address,
            data: wallet.deployCall,
            signature: await owner.signTypedData(typedData as never)
          })
      }
    })
    const response = await wrapFetchWithPayment(fetch, client)(`${server.api}/x402/top-up`, { method: "POST" })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ walletAddress: wallet.address, balanceUsd: "5" })
    expect(await chain.codeAt(wallet.address)).toMatch(/^0x[0-9a-f]{10,}/)
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)
    const balance = await fetch(`${server.api}/x402/balance/${wallet.address}`)
    expect(await balance.json()).toMatchObject({ balanceUsd: "5" })
  })
})
