/**
 * The portal at /api-keys in a real browser (Debian's Chromium through playwright-core), against
 * the shipped server on anvil with the EIP-3009 USDC: a wallet signs in, tops up 5 USD through the
 * page, creates a key, and the call made with that key shows in the usage table and chart. The
 * browser's wallet is an injected EIP-1193 provider whose signatures come from a viem account in
 * the test, the way MetaMask's come from the user's key. Screenshots go to `test/output/Portal/`.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { type Hex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address
const wallet = privateKeyToAccount(generatePrivateKey())

const output = Path.join(import.meta.dirname, "output", "Portal")
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run"
]

let chain: X402Chain.Chain
let server: ShippedServer.ShippedServer
let origin = ""
let profile = ""
let context: BrowserContext
let page: Page
/** Every URL the browser asked for, to check none left the server. */
const requested: Array<string> = []
/** What the injected wallet was asked to do, in order. */
const walletCalls: Array<string> = []

const rpcCall = (key: string) =>
  fetch(`${origin}/api/v1/crypto/rpc/base-mainnet`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
  })

/** The EIP-1193 requests the page makes, answered by the viem account (what a wallet does). */
const answerWallet = async (method: string, params: ReadonlyArray<unknown>): Promise<unknown> => {
  walletCalls.push(method)
  switch (method) {
    case "eth_requestAccounts":
    case "eth_accounts":
      return [wallet.address]
    case "eth_chainId":
      return "0x2105"
    case "wallet_switchEthereumChain":
      return null
    case "personal_sign":
      return wallet.signMessage({ message: { raw: params[0] as Hex } })
    case "eth_signTypedData_v4": {
      const { types: { EIP712Domain: _domain, ...types }, domain, primaryType, message } = JSON.parse(params[1] as string)
      return wallet.signTypedData({ domain, types, primaryType, message })
    }
    default:
      throw new Error(`the test wallet does not do ${method}`)
  }
}

const shot = (name: string, target: Page = page) => target.screenshot({ path: Path.join(output, `${name}.png`), fullPage: true })

const text = (selector: string) => page.locator(selector).innerText()

beforeAll(async () => {
  Fs.mkdirSync(output, { recursive: true })
  chain = await X402Chain.start()
  await chain.mint(wallet.address, 20_000_000n)
  server = await ShippedServer.start({
    config: {
      rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url }
    }
  })
  // SIWX binds to the public origin, `http://localhost:<port>` by default: the browser uses that name.
  origin = `http://localhost:${server.port}`
  profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-chromium-"))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    args: CHROMIUM_ARGS,
    headless: true,
    viewport: { width: 1280, height: 900 }
  })
  context.on("request", (request) => requested.push(request.url()))
  await context.exposeFunction("tollgateWallet", answerWallet)
  await context.addInitScript(() => {
    const bridge = (window as unknown as { tollgateWallet: (method: string, params: ReadonlyArray<unknown>) => Promise<unknown> }).tollgateWallet
    Object.assign(window, {
      ethereum: {
        request: ({ method, params }: { method: string; params?: ReadonlyArray<unknown> }) => bridge(method, params ?? []),
        on: () => undefined,
        removeListener: () => undefined
      }
    })
  })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin })
  page = context.pages()[0] ?? await context.newPage()
}, 150_000)

afterAll(async () => {
  await context?.close()
  if (profile !== "") Fs.rmSync(profile, { recursive: true, force: true })
  await server?.stop()
  await chain?.stop()
})

describe("A wallet gets a key at /api-keys: sign in, top up 5 USD through x402, create a key, see the call it paid for", () => {
  let apiKey = ""

  it("the page loads under a strict Content-Security-Policy and offers the wallet sign-in", async () => {
    const response = await page.goto(`${origin}/api-keys`)
    expect(response?.status()).toBe(200)
    const csp = response?.headers()["content-security-policy"] ?? ""
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("default-src 'none'")
    expect(csp).not.toContain("unsafe-inline")
    await expect(page.locator("#signin-evm").isVisible()).resolves.toBe(true)
    expect(await page.locator("#dashboard").isHidden()).toBe(true)
    await shot("1-sign-in")
  })

  it("signs in with personal_sign of the server's SIWX message: an httpOnly, SameSite=Strict session", async () => {
    await page.getByRole("button", { name: "Sign in with an Ethereum wallet (Base)" }).click()
    await page.locator("#dashboard").waitFor({ state: "visible" })
    expect(walletCalls).toContain("personal_sign")
    expect(await text("#who")).toBe(wallet.address)
    expect(await text("#balance-usd")).toBe("$0.00")
    const [cookie] = await context.cookies(origin)
    expect(cookie).toMatchObject({ name: "tollgate_portal", httpOnly: true, sameSite: "Strict", secure: false })
    expect(await page.evaluate(() => document.cookie)).toBe("")
    await shot("2-signed-in")
  })

  it("tops up 5 USD: the page signs the EIP-3009 authorization, USDC moves on chain, the balance shows 5", async () => {
    const before = await chain.balanceOf(wallet.address)
    await page.getByLabel("Amount in USD (at least 5)").fill("5")
    await page.getByRole("button", { name: "Pay with USDC on Base" }).click()
    await expect.poll(() => text("#status"), { timeout: 30_000 }).toBe("Credited $5.00. Balance: $5.00.")
    expect(walletCalls).toContain("eth_signTypedData_v4")
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)
    expect(await chain.balanceOf(wallet.address)).toBe(before - 5_000_000n)
    expect(await text("#balance-usd")).toBe("$5.00")
    expect(await text("#transactions tbody")).toMatch(/topup\s+\$5\.00/)
    const balance = await (await fetch(`${origin}/api/v1/x402/balance/${wallet.address}`)).json()
    expect(balance).toMatchObject({ balanceUsd: "5" })
    await shot("3-topped-up")
  })

  it("creates an INFERENCE key, shown once with a copy button, listed as active", async () => {
    await page.getByLabel("Description").fill("my <b>app</b>")
    await page.getByRole("button", { name: "Create an INFERENCE key" }).click()
    await page.locator("#new-key").waitFor({ state: "visible" })
    apiKey = await text("#new-key-value")
    expect(apiKey).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/)
    await page.getByRole("button", { name: "Copy" }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(apiKey)
    // The description is shown as text, never as markup.
    const row = page.locator("#keys tbody tr").first()
    expect(await row.locator("td").first().innerText()).toBe("my <b>app</b>")
    expect(await page.locator("#keys b").count()).toBe(0)
    expect(await row.innerText()).toMatch(/INFERENCE[\s\S]*active/)
    await shot("4-key-created")
  })

  it("a paid call with that key is charged to the wallet and shows in the usage table and the chart", async () => {
    const call = await rpcCall(apiKey)
    expect(call.status).toBe(200)
    const requestId = call.headers.get("x-request-id")
    await page.reload()
    await page.locator("#dashboard").waitFor({ state: "visible" })
    await expect.poll(() => page.locator("#usage-table tbody tr").count()).toBe(1)
    const row = await text("#usage-table tbody tr")
    expect(row).toContain("rpc")
    expect(row).toContain(requestId)
    const today = new Date().toISOString().slice(0, 10)
    const bar = page.locator(`#usage-chart rect[data-date="${today}"]`)
    expect(await bar.count()).toBe(1)
    expect(Number(await bar.getAttribute("height"))).toBeGreaterThan(0)
    expect(await text("#usage-legend")).toMatch(/rpc/)
    const { balanceUsd } = await (await fetch(`${origin}/api/v1/x402/balance/${wallet.address}`)).json() as { balanceUsd: string }
    expect(Number(balanceUsd)).toBeLessThan(5)
    expect(await text("#balance-usd")).toBe(`$${balanceUsd}`)
    await shot("5-usage")
    // The signed-in page as docs/portal.md shows it.
    await page.screenshot({ path: Path.join(output, "portal-1280.png") })
  })

  it("at 390 px wide nothing overflows sideways and every control stays reachable", async () => {
    const phone = await context.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    await phone.goto(`${origin}/api-keys`)
    await phone.locator("#dashboard").waitFor({ state: "visible" })
    await phone.locator("#usage-chart svg").waitFor()
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    for (const name of ["Pay with USDC on Base", "Create an INFERENCE key", "Sign out"]) {
      const box = await phone.getByRole("button", { name }).boundingBox()
      expect(box, name).not.toBeNull()
      expect(box!.x + box!.width, name).toBeLessThanOrEqual(390)
    }
    await shot("6-phone", phone)
    await phone.screenshot({ path: Path.join(output, "portal-390.png") })
    await phone.close()
  })

  it("revokes the key: the next call with it is a 401", async () => {
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Revoke the key my <b>app</b>" }).click()
    await expect.poll(() => text("#keys tbody tr")).toMatch(/revoked/)
    expect((await rpcCall(apiKey)).status).toBe(401)
  })

  it("the page asked nothing of another host", () => {
    expect(requested.length).toBeGreaterThan(0)
    expect(requested.filter((url) => !url.startsWith(`${origin}/`))).toEqual([])
  })
})
