import { X402 } from "@tollgate/core"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { createSIWxPayload, encodeSIWxHeader } from "@x402/extensions/sign-in-with-x"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../packages/http/test/support/X402Chain.ts"
import * as Host from "./support/Host.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the chain helper's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

let chain: X402Chain.Chain
let host: Host.Host
let dir = ""

beforeAll(async () => {
  chain = await X402Chain.start()
  dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-own-wallet-"))
  const config = Path.join(dir, "config.json")
  Fs.writeFileSync(config, JSON.stringify({ x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url } }))
  // SIWX binds to the public origin: the client addresses the host by the same name.
  host = await Host.start("express", (port) => ({ TOLLGATE_CONFIG: config, TOLLGATE_PUBLIC_ORIGIN: `http://127.0.0.1:${port}` }))
}, 120_000)

afterAll(async () => {
  await host?.stop()
  await chain?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body)
})

/** A SIWX header for `path`, signed over the challenge of the discovery 402 the endpoint answers. */
const signIn = async (account: PrivateKeyAccount, path: string, body: unknown) => {
  const url = `${host.origin}${path}`
  const discovery = await fetch(url, json(body))
  expect(discovery.status).toBe(402)
  const header = JSON.parse(Buffer.from(discovery.headers.get("payment-required")!, "base64").toString()) as {
    extensions: { "sign-in-with-x": { info: Record<string, string> } }
  }
  const payload = await createSIWxPayload(
    { ...header.extensions["sign-in-with-x"].info, chainId: X402.BASE_MAINNET, type: "eip191" } as never,
    account,
    url
  )
  return { "SIGN-IN-WITH-X": encodeSIWxHeader(payload) }
}

const balanceOf = async (address: string) =>
  Host.nano(((await (await fetch(`${host.origin}/api/v1/x402/balance/${address}`)).json()) as { balanceUsd: string }).balanceUsd)

describe("The top-up link of a 402, opened with GET through the host, says how to top up where wallet payments are on", () => {
  it("enabled, the three steps, and the minimum top-up's Base USDC entry paying x402.payTo", async () => {
    const response = await fetch(`${host.origin}/api/v1/x402/top-up`)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      enabled: true,
      method: "POST",
      url: `${host.origin}/api/v1/x402/top-up`,
      minimumTopUpUsd: 5,
      steps: [expect.stringContaining("POST"), expect.any(String), expect.stringContaining("PAYMENT-SIGNATURE")],
      accepts: [{ scheme: "exact", network: X402.BASE_MAINNET, amount: "5000000", payTo }]
    })
  })
})

describe("examples/own-endpoint/express.ts: a wallet topped up by @x402/fetch on tollgate's API pays for the host's own endpoints", () => {
  it("5 USD credited through /api/v1/x402/top-up; summarize signed in with SIWX costs exactly 0.002 USD; generate 0.00001 USD a token", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    await chain.mint(wallet.address, 10_000_000n)
    const client = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
    registerExactEvmScheme(client, { signer: wallet })
    const topUp = await wrapFetchWithPayment(fetch, client)(`${host.origin}/api/v1/x402/top-up`, { method: "POST" })
    expect(topUp.status).toBe(200)
    expect(await topUp.json()).toMatchObject({ walletAddress: wallet.address, creditedUsd: "5", balanceUsd: "5" })
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)

    const summarized = await fetch(
      `${host.origin}/v1/summarize`,
      json({ text: "paid by a wallet" }, await signIn(wallet, "/v1/summarize", { text: "x" }))
    )
    expect(summarized.status).toBe(200)
    expect(await summarized.json()).toEqual({ summary: "paid by a wallet" })
    expect(summarized.headers.get("x-balance-remaining")).toBe("4.998")
    expect(await balanceOf(wallet.address)).toBe(5_000_000_000 - 2_000_000)

    const generated = await fetch(
      `${host.origin}/v1/generate`,
      json({ prompt: "a b", max_tokens: 9 }, await signIn(wallet, "/v1/generate", { prompt: "x", max_tokens: 1 }))
    )
    expect(generated.status).toBe(200)
    expect((await generated.text()).trim().split(" ")).toHaveLength(9)
    for (;;) {
      const balance = await balanceOf(wallet.address)
      if (balance !== 5_000_000_000 - 2_000_000) {
        expect(balance).toBe(5_000_000_000 - 2_000_000 - 9 * 10_000)
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })

  it("a wallet signed in with no credit gets the authenticated-wallet 402 from the host's own endpoint, and nothing is held", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const response = await fetch(
      `${host.origin}/v1/summarize`,
      json({ text: "no credit" }, await signIn(wallet, "/v1/summarize", { text: "x" }))
    )
    expect(response.status).toBe(402)
    expect(await response.json()).toMatchObject({
      code: "PAYMENT_REQUIRED",
      reason: "insufficient_balance",
      currentBalanceUsd: 0,
      minimumBalanceUsd: 0.002
    })
    expect(await balanceOf(wallet.address)).toBe(0)
  })
})
