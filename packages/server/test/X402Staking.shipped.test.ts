import { X402 } from "@tollgate/core"
import { Anvil, ShippedServer, StakeToken } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { createSIWxPayload, encodeSIWxHeader } from "@x402/extensions/sign-in-with-x"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const blockNumber = {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
}

let anvil: Anvil.Anvil
let token: StakeToken.StakeToken
let server: ShippedServer.ShippedServer | undefined
let origin = ""

/** A metered RPC call signed in with SIWX from a fresh challenge of the server. */
const signedCall = async (account: PrivateKeyAccount) => {
  const url = `${origin}/api/v1/crypto/rpc/base-mainnet`
  const first = await fetch(url, blockNumber)
  const challenge = decodePaymentRequiredHeader(first.headers.get("payment-required")!).extensions!["sign-in-with-x"] as {
    info: Record<string, string>
  }
  const payload = await createSIWxPayload({ ...challenge.info, chainId: X402.BASE_MAINNET, type: "eip191" } as never, account, url)
  return fetch(url, { ...blockNumber, headers: { ...blockNumber.headers, "SIGN-IN-WITH-X": encodeSIWxHeader(payload) } })
}

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
  token = await StakeToken.deploy(anvil.url, 8453)
  server = await ShippedServer.start({
    config: {
      rpc: { upstreams: { "base-mainnet": [anvil.url] } },
      prices: { rpc: { usdPerCredit: "1", baseCredits: { "base-mainnet": 1 } } },
      x402: {
        payTo: { evm: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" },
        staking: { chain: X402.BASE_MAINNET, token: token.address, rpcUrl: anvil.url }
      }
    }
  })
  // SIWX binds to the public origin, which is `http://localhost:<port>` by default: the client
  // addresses the server by that name.
  origin = `http://localhost:${server.port}`
})

afterAll(async () => {
  await server?.stop()
  await anvil?.stop()
})

describe("The shipped server reads stakes from chain (x402.staking): 1 token = 1 USD of credit per UTC day", () => {
  it("a wallet holding 3 tokens signs in and spends its 3 USD allowance, then gets a 402", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await token.mint(wallet.address, 3n)
    for (const allowanceBefore of ["3", "2", "1"]) {
      const response = await signedCall(wallet)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-service-balance-token")).toBe(allowanceBefore)
      expect(response.headers.get("x-service-balance-usd")).toBe("0")
    }
    const spent = await signedCall(wallet)
    expect(spent.status).toBe(402)
    expect(await spent.json()).toMatchObject({ reason: "insufficient_balance" })
  })
})
