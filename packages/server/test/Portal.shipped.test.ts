/**
 * The portal at /api-keys in a real browser (Debian's Chromium through playwright-core), against
 * the shipped server on anvil with the EIP-3009 USDC: a wallet signs in, tops up 5 USD through the
 * page, creates a key, and the call made with that key shows in the usage table and chart; a spend
 * cap set on the key from the page refuses the call past it, and the keys table shows its spend. The
 * browser's wallet is an injected EIP-1193 provider whose signatures come from a viem account in
 * the test, the way MetaMask's come from the user's key. Screenshots go to `test/output/Portal/`.
 */
import { X402 } from "@tollgate/core"
import { Chromium, ShippedServer, StakeToken } from "@tollgate/testkit"
import bs58 from "bs58"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
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
/** The Solana wallet the page finds through the Wallet Standard: an ed25519 key pair of the test's. */
const solanaKeys = Crypto.generateKeyPairSync("ed25519")
const solanaAddress = bs58.encode(solanaKeys.publicKey.export({ format: "der", type: "spki" }).subarray(-32))

const output = Path.join(import.meta.dirname, "output", "Portal")

/**
 * An RPC call (20 credits) costs 0.005 USD at this price, so a cap of 0.02 USD a day fits exactly
 * four of them.
 */
const USD_PER_CREDIT = "0.00025"

/** The client address the cap tests' requests are forwarded for (TEST-NET-2). */
const CAP_CLIENT = "198.51.100.7"

let chain: X402Chain.Chain
let stakeToken: StakeToken.StakeToken
let server: ShippedServer.ShippedServer
let origin = ""
let profile = ""
let context: BrowserContext
let page: Page
/** Every URL the browser asked for, to check none left the server. */
const requested: Array<string> = []
/** Errors the pages logged or threw: a CSP violation would be one. */
const pageErrors: Array<string> = []
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
      const { domain, message, primaryType, types: { EIP712Domain: _domain, ...types } } = JSON.parse(params[1] as string)
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
  stakeToken = await StakeToken.deploy(chain.anvil.url, 8453)
  server = await ShippedServer.start({
    config: {
      prices: { rpc: { usdPerCredit: USD_PER_CREDIT } },
      // The cap tests' refused changes come from an address of their own (`CAP_CLIENT`), so the
      // abuse guard does not count them with the sign-in tests' deliberate failures.
      trustedProxies: ["127.0.0.1", "::1"],
      rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
      x402: {
        payTo: { evm: payTo },
        relayerKey: RELAYER_KEY,
        evmRpcUrl: chain.anvil.url,
        staking: { chain: X402.BASE_MAINNET, token: stakeToken.address, rpcUrl: chain.anvil.url }
      }
    }
  })
  // SIWX binds to the public origin, `http://localhost:<port>` by default: the browser uses that name.
  origin = `http://localhost:${server.port}`
  profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-chromium-"))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: Chromium.executablePath,
    args: [...Chromium.args],
    headless: true,
    viewport: { width: 1280, height: 900 }
  })
  context.on("request", (request) => requested.push(request.url()))
  context.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text())
  })
  context.on("weberror", (error) => pageErrors.push(String(error.error())))
  await context.exposeFunction("tollgateWallet", answerWallet)
  await context.addInitScript(() => {
    const bridge =
      (window as unknown as { tollgateWallet: (method: string, params: ReadonlyArray<unknown>) => Promise<unknown> }).tollgateWallet
    Object.assign(window, {
      ethereum: {
        request: ({ method, params }: { method: string; params?: ReadonlyArray<unknown> }) => bridge(method, params ?? []),
        on: () => undefined,
        removeListener: () => undefined
      }
    })
  })
  await context.exposeFunction("tollgateSolanaSign", (bytes: ReadonlyArray<number>) => {
    walletCalls.push("solana:signMessage")
    return Array.from(Crypto.sign(null, Uint8Array.from(bytes), solanaKeys.privateKey))
  })
  // A Wallet Standard wallet answers the page's `wallet-standard:app-ready` by registering itself.
  await context.addInitScript((address: string) => {
    const sign =
      (window as unknown as { tollgateSolanaSign: (bytes: ReadonlyArray<number>) => Promise<ReadonlyArray<number>> }).tollgateSolanaSign
    const account = { address, publicKey: new Uint8Array(32), chains: ["solana:mainnet"], features: ["solana:signMessage"] }
    const solanaWallet = {
      version: "1.0.0",
      name: "Test Solana wallet",
      icon: "data:image/svg+xml;base64,PHN2Zy8+",
      chains: ["solana:mainnet"],
      accounts: [],
      features: {
        "standard:connect": { version: "1.0.0", connect: async () => ({ accounts: [account] }) },
        "solana:signMessage": {
          version: "1.0.0",
          signMessage: async (
            { message }: { message: Uint8Array }
          ) => [{ signedMessage: message, signature: Uint8Array.from(await sign(Array.from(message))) }]
        }
      }
    }
    window.addEventListener(
      "wallet-standard:app-ready",
      (event) => (event as CustomEvent<{ register: (wallet: unknown) => unknown }>).detail.register(solanaWallet)
    )
  }, solanaAddress)
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

  it("signs in from the keyboard with personal_sign of the server's SIWX message: an httpOnly, SameSite=Strict sign-in cookie", async () => {
    // Tab from the top of the page to the wallet button, then Enter: no mouse needed.
    for (let tabs = 0; tabs < 10 && await page.evaluate(() => document.activeElement?.id) !== "signin-evm"; tabs++) {
      await page.keyboard.press("Tab")
    }
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("signin-evm")
    await page.keyboard.press("Enter")
    await page.locator("#dashboard").waitFor({ state: "visible" })
    expect(walletCalls).toContain("personal_sign")
    expect(await text("#who")).toBe(wallet.address)
    await expect.poll(() => text("#balance-usd")).toBe("$0.00")
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
    await expect.poll(() => text("#balance-usd")).toBe("$5.00")
    expect(await text("#transactions tbody")).toMatch(/Top-up\s+\$5\.00/)
    const balance = await (await fetch(`${origin}/api/v1/x402/balance/${wallet.address}`)).json()
    expect(balance).toMatchObject({ balanceUsd: "5" })
    await shot("3-topped-up")
  })

  it("tops up any amount of at least 5 USD: 7.25 more; under 5 the form does not submit", async () => {
    await page.getByLabel("Amount in USD (at least 5)").fill("4.99")
    await page.getByRole("button", { name: "Pay with USDC on Base" }).click()
    expect(await page.locator("#topup-amount").evaluate((input: HTMLInputElement) => input.validity.rangeUnderflow)).toBe(true)
    expect(await chain.balanceOf(payTo)).toBe(5_000_000n)
    await page.getByLabel("Amount in USD (at least 5)").fill("7.25")
    await page.getByRole("button", { name: "Pay with USDC on Base" }).click()
    await expect.poll(() => text("#status"), { timeout: 30_000 }).toBe("Credited $7.25. Balance: $12.25.")
    expect(await chain.balanceOf(payTo)).toBe(12_250_000n)
    await expect.poll(() => page.locator("#transactions tbody tr").count()).toBe(2)
  })

  it("creates an INFERENCE key, shown once with a copy button, listed as active", async () => {
    await page.getByLabel("Description").fill("my <b>app</b>")
    await page.getByLabel("Description").press("Enter")
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
    expect(row).toContain("$0.005")
    expect(row).toContain(requestId)
    const today = new Date().toISOString().slice(0, 10)
    const bar = page.locator(`#usage-chart rect[data-date="${today}"]`)
    expect(await bar.count()).toBe(1)
    expect(Number(await bar.getAttribute("height"))).toBeGreaterThan(0)
    expect(await text("#usage-legend")).toMatch(/rpc/)
    expect(await (await fetch(`${origin}/api/v1/x402/balance/${wallet.address}`)).json()).toMatchObject({ balanceUsd: "12.245" })
    await expect.poll(() => text("#balance-usd")).toBe("$12.245")
  })

  it("sets a cap of 0.02 USD per day on the key from the page: four calls of 0.005 USD fit, the fifth is a 402 SPEND_CAP_REACHED, the table shows $0.02 spent", async () => {
    const cells = () => page.locator("#keys tbody tr").first().locator("td").allInnerTexts()
    // An uncapped key's spend is not counted: the call before the cap is not in it.
    expect((await cells()).slice(3, 6)).toEqual(["active", "none", "not counted"])
    expect(await page.getByLabel("Key", { exact: true }).locator("option:checked").innerText()).toMatch(/^my <b>app<\/b> \(/)
    await page.getByLabel("Cap in USD").fill("0.02")
    await page.getByLabel("Period").selectOption({ label: "per UTC day" })
    await page.getByLabel("Cap in USD").press("Enter")
    await expect.poll(() => text("#status")).toBe("The key “my <b>app</b>” may spend $0.02 per UTC day.")
    await expect.poll(async () => (await cells()).slice(3, 6)).toEqual(["active", "$0.02 per UTC day", "$0.00"])
    const statuses: Array<number> = []
    let refused: Response | undefined
    while (refused === undefined && statuses.length < 10) {
      const call = await rpcCall(apiKey)
      statuses.push(call.status)
      if (call.status !== 200) refused = call
    }
    expect(statuses).toEqual([200, 200, 200, 200, 402])
    expect(await refused!.json()).toEqual({
      error: "This API key's spend cap of 0.02 USD per UTC day leaves no room for this request (0.02 USD spent)",
      code: "SPEND_CAP_REACHED"
    })
    await page.reload()
    await page.locator("#dashboard").waitFor({ state: "visible" })
    await expect.poll(cells).toEqual([
      expect.any(String),
      expect.any(String),
      expect.any(String),
      "active",
      "$0.02 per UTC day",
      "$0.02",
      "none",
      "Revoke"
    ])
    // The refused call took nothing: five calls of 0.005 USD in all.
    await expect.poll(() => page.locator("#usage-table tbody tr").count()).toBe(5)
    await expect.poll(() => text("#balance-usd")).toBe("$12.225")
    expect(await page.getByLabel("Cap in USD").inputValue()).toBe("0.02")
    // The signed-in page as docs/portal.md shows it (docs/portal-1280.png).
    await shot("portal-1280")
  })

  it("at 390 px wide nothing overflows sideways and every control stays reachable", async () => {
    const phone = await context.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    await phone.goto(`${origin}/api-keys`)
    await phone.locator("#dashboard").waitFor({ state: "visible" })
    await phone.locator("#usage-chart svg").waitFor()
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    for (
      const name of [
        "Pay with USDC on Base",
        "Create an INFERENCE key",
        "Set the cap",
        "Remove the cap",
        "Set the restrictions",
        "Lift the restrictions",
        "Sign out"
      ]
    ) {
      const box = await phone.getByRole("button", { name }).boundingBox()
      expect(box, name).not.toBeNull()
      expect(box!.x + box!.width, name).toBeLessThanOrEqual(390)
    }
    // docs/portal-390.png
    await shot("portal-390", phone)
    await phone.close()
  })

  it("removes the cap from the page: the key's spend is no longer counted and its next call is paid again", async () => {
    await page.getByRole("button", { name: "Remove the cap" }).click()
    await expect.poll(() => text("#status")).toBe("Removed the spend cap of “my <b>app</b>”.")
    await expect.poll(async () => (await page.locator("#keys tbody tr").first().locator("td").allInnerTexts()).slice(3, 6))
      .toEqual(["active", "none", "not counted"])
    expect(await page.getByLabel("Cap in USD").inputValue()).toBe("")
    expect((await rpcCall(apiKey)).status).toBe(200)
  })

  it("revokes the key: the next call with it is a 401", async () => {
    const asked: Array<string> = []
    page.once("dialog", (dialog) => {
      asked.push(dialog.message())
      void dialog.accept()
    })
    await page.getByRole("button", { name: "Revoke the key my <b>app</b>" }).click()
    await expect.poll(() => text("#keys tbody tr")).toMatch(/revoked/)
    expect(asked).toEqual(["Revoke the key “my <b>app</b>”? Calls with it stop at once."])
    expect((await rpcCall(apiKey)).status).toBe(401)
  })

  it("the page asked nothing of another host and logged no error (no Content-Security-Policy violation)", () => {
    expect(requested.length).toBeGreaterThan(0)
    expect(requested.filter((url) => !url.startsWith(`${origin}/`))).toEqual([])
    // The browser logs the 402 that opens each top-up's x402 flow (two top-ups); nothing else.
    expect(pageErrors).toEqual(Array(2).fill("Failed to load resource: the server responded with a status of 402 (Payment Required)"))
  })
})

/** A portal sign-in over plain HTTP: the cookie the server set, sent back, and the CSRF token. */
interface HttpSession {
  readonly cookie: string
  readonly csrfToken: string
  readonly body: Record<string, unknown>
}

const portal = (path: string, init: RequestInit = {}) => fetch(`${origin}/api/v1/portal${path}`, init)

const json = { "content-type": "application/json" }

const signInWith = async (body: unknown): Promise<Response> =>
  portal("/session", { method: "POST", headers: json, body: JSON.stringify(body) })

const sessionOf = async (response: Response): Promise<HttpSession> => {
  expect(response.status).toBe(200)
  const setCookie = response.headers.get("set-cookie") ?? ""
  const body = await response.json() as Record<string, unknown>
  return { cookie: setCookie.slice(0, setCookie.indexOf(";")), csrfToken: String(body["csrfToken"]), body }
}

const walletMessage = async (account = privateKeyToAccount(generatePrivateKey())) => {
  const challenge = await (await portal(`/challenge?family=evm&address=${account.address.toLowerCase()}`)).json() as {
    message: string
    chainId: string
  }
  const signature = await account.signMessage({ message: challenge.message })
  return { wallet: { address: account.address, message: challenge.message, signature, chainId: challenge.chainId } }
}

describe("A Solana wallet found through the Wallet Standard signs in with the SIWS message", () => {
  it("after signing out the Ethereum wallet, the page offers it, the wallet signs the server's text, the browser is signed in to its account", async () => {
    const solana = await context.newPage()
    await solana.goto(`${origin}/api-keys`)
    await solana.getByRole("button", { name: "Sign out" }).click()
    await solana.locator("#signin").waitFor({ state: "visible" })
    expect(await context.cookies(origin)).toEqual([])
    await solana.getByRole("button", { name: "Sign in with a Solana wallet" }).click()
    await solana.locator("#dashboard").waitFor({ state: "visible" })
    expect(walletCalls).toContain("solana:signMessage")
    expect(await solana.locator("#who").innerText()).toBe(solanaAddress)
    // A top-up credits the paying wallet; this page pays on Base only, so a browser signed in with a Solana wallet is offered none.
    expect(await solana.locator("#topup-section").isHidden()).toBe(true)
    await solana.close()
  })
})

describe("An ADMIN key signs in from the page to its own account, which tops up nothing here", () => {
  it("the key field is a password field, emptied after sign-in; the account's keys are listed", async () => {
    const admin = await context.newPage()
    // The page first asks whether the browser is signed in (the Solana wallet may still be): wait for the answer.
    const checked = admin.waitForResponse((response) => response.url() === `${origin}/api/v1/portal/session`)
    await admin.goto(`${origin}/api-keys`)
    if ((await checked).status() === 200) await admin.getByRole("button", { name: "Sign out" }).click()
    await admin.locator("#signin").waitFor({ state: "visible" })
    const field = admin.getByLabel("ADMIN key", { exact: true })
    expect(await field.getAttribute("type")).toBe("password")
    await field.fill(server.credentials!.adminKey)
    await field.press("Enter")
    await admin.locator("#dashboard").waitFor({ state: "visible" })
    expect(await admin.locator("#who").innerText()).toBe(server.credentials!.accountId)
    expect(await field.inputValue()).toBe("")
    expect(await admin.locator("#topup-section").isHidden()).toBe(true)
    await expect.poll(() => admin.locator("#keys tbody").innerText()).toMatch(/ADMIN[\s\S]*active/)
    await admin.close()
  })
})

describe("A key's restrictions are shown and set from the page: a call outside them is a 403 naming the restriction, and the audit log records who changed them", () => {
  let admin: Page
  let apiKey = ""
  const restrictionsCell = () => admin.locator("#keys tbody tr", { hasText: "front-end" }).locator("td").nth(6).innerText()

  beforeAll(async () => {
    admin = await context.newPage()
    const checked = admin.waitForResponse((response) => response.url() === `${origin}/api/v1/portal/session`)
    await admin.goto(`${origin}/api-keys`)
    if ((await checked).status() === 200) await admin.getByRole("button", { name: "Sign out" }).click()
    await admin.getByLabel("ADMIN key", { exact: true }).fill(server.credentials!.adminKey)
    await admin.getByLabel("ADMIN key", { exact: true }).press("Enter")
    await admin.locator("#dashboard").waitFor({ state: "visible" })
    await admin.getByLabel("Description").fill("front-end")
    await admin.getByLabel("Description").press("Enter")
    await admin.locator("#new-key").waitFor({ state: "visible" })
    apiKey = await admin.locator("#new-key-value").innerText()
  })

  afterAll(() => admin?.close())

  it("a new key shows no restrictions; restricted to ethereum-mainnet from the form, the table shows it and a call on base-mainnet is a 403 naming the restriction", async () => {
    expect(await restrictionsCell()).toBe("none")
    await admin.getByLabel("Key to restrict").selectOption({
      label: (await admin.locator("#restrict-key option", { hasText: "front-end" }).innerText())
    })
    await admin.getByLabel("Networks").fill("ethereum-mainnet")
    await admin.getByRole("button", { name: "Set the restrictions" }).click()
    await expect.poll(() => admin.locator("#status").innerText()).toBe("The key “front-end” is restricted to networks: ethereum-mainnet.")
    await expect.poll(restrictionsCell).toBe("networks: ethereum-mainnet")
    const refused = await rpcCall(apiKey)
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({
      error: "This API key is restricted: its networks restriction allows ethereum-mainnet, not base-mainnet"
    })
    await shot("restrictions", admin)
  })

  it("an entry that is not a network or an address is refused with the server's reason, and the key keeps its restrictions", async () => {
    await admin.getByLabel("Client addresses").fill("10.9.9.0/33")
    await admin.getByRole("button", { name: "Set the restrictions" }).click()
    await expect.poll(() => admin.locator("#status").innerText()).toContain("10.9.9.0/33 is not an IP address or CIDR range")
    expect(await restrictionsCell()).toBe("networks: ethereum-mainnet")
    await admin.getByLabel("Client addresses").fill("")
  })

  it("several restrictions at once, comma-separated, are shown in the form again when the key is chosen", async () => {
    await admin.getByLabel("Networks").fill("ethereum-mainnet, base-mainnet")
    await admin.getByLabel("RPC methods").fill("eth_blockNumber")
    await admin.getByLabel("Client addresses").fill("127.0.0.1, ::1")
    await admin.getByRole("button", { name: "Set the restrictions" }).click()
    await expect.poll(restrictionsCell).toBe(
      "networks: ethereum-mainnet, base-mainnet; RPC methods: eth_blockNumber; client addresses: 127.0.0.1, ::1"
    )
    expect((await rpcCall(apiKey)).status).toBe(200)
    await admin.reload()
    await admin.locator("#dashboard").waitFor({ state: "visible" })
    await admin.getByLabel("Key to restrict").selectOption({
      label: (await admin.locator("#restrict-key option", { hasText: "front-end" }).innerText())
    })
    expect(await admin.getByLabel("Networks").inputValue()).toBe("ethereum-mainnet, base-mainnet")
    expect(await admin.getByLabel("RPC methods").inputValue()).toBe("eth_blockNumber")
    expect(await admin.getByLabel("Models").inputValue()).toBe("")
  })

  it("lifting them shows none again, and the audit log names the ADMIN key that signed in to the page for each change", async () => {
    await admin.getByRole("button", { name: "Lift the restrictions" }).click()
    await expect.poll(() => admin.locator("#status").innerText()).toBe("Lifted the restrictions of “front-end”.")
    await expect.poll(restrictionsCell).toBe("none")
    expect(await admin.getByLabel("Networks").inputValue()).toBe("")
    const log = await (await fetch(`${server.api}/audit_log`, { headers: { authorization: `Bearer ${server.credentials!.adminKey}` } }))
      .json() as {
        data: Array<{ actor: string; action: string; details: { restrictions: unknown } }>
      }
    const restricted = log.data.filter((entry) => entry.action === "key.restricted")
    expect(restricted.map((entry) => entry.details.restrictions)).toEqual([
      null,
      { networks: ["ethereum-mainnet", "base-mainnet"], methods: ["eth_blockNumber"], ips: ["127.0.0.1", "::1"] },
      { networks: ["ethereum-mainnet"] }
    ])
    expect(new Set(restricted.map((entry) => entry.actor)).size).toBe(1)
    expect(restricted[0]!.actor).toMatch(/^key:key_/)
  })
})

describe("Portal sign-in: a wallet's SIWX message (once) or an ADMIN key; an INFERENCE key, a bad signature or a replay does not", () => {
  it("the challenge is the server's EIP-4361 message for the checksummed address on Base", async () => {
    const account = privateKeyToAccount(generatePrivateKey())
    const response = await portal(`/challenge?family=evm&address=${account.address.toLowerCase()}`)
    expect(response.status).toBe(200)
    const challenge = await response.json() as { message: string; chainId: string }
    expect(challenge.chainId).toBe("eip155:8453")
    expect(challenge.message.split("\n").slice(0, 2)).toEqual([
      `localhost:${server.port} wants you to sign in with your Ethereum account:`,
      account.address
    ])
    const bad = await portal("/challenge?family=evm&address=not-an-address")
    expect(bad.status).toBe(400)
    expect(await bad.json()).toEqual({
      error: "Invalid request parameters: address: Not an EVM address",
      details: { _errors: [], address: { _errors: ["Not an EVM address"] } }
    })
  })

  it("a signed message signs a wallet in once; the same message again is a 401", async () => {
    const body = await walletMessage()
    const session = await sessionOf(await signInWith(body))
    expect(session.body).toMatchObject({ via: "wallet", wallet: { address: body.wallet.address, family: "evm", chainId: "eip155:8453" } })
    const replay = await signInWith(body)
    expect(replay.status).toBe(401)
    expect(replay.headers.get("set-cookie")).toBeNull()
  })

  it("a signature by another key is a 401", async () => {
    const body = await walletMessage()
    const forged = await privateKeyToAccount(generatePrivateKey()).signMessage({ message: body.wallet.message })
    const response = await signInWith({ wallet: { ...body.wallet, signature: forged } })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({ error: "Invalid or expired sign-in-with-x credentials" })
  })

  it("the ADMIN key signs in to its account; the INFERENCE key is a 403, a made-up key a 401, an empty body a 400", async () => {
    const credentials = server.credentials!
    const session = await sessionOf(await signInWith({ apiKey: credentials.adminKey }))
    expect(session.body).toMatchObject({ accountId: credentials.accountId, via: "key", wallet: null })
    const inference = await signInWith({ apiKey: credentials.inferenceKey })
    expect(inference.status).toBe(403)
    expect(await inference.json()).toEqual({ error: "This operation requires an ADMIN API key" })
    expect((await signInWith({ apiKey: "not.a.key" })).status).toBe(401)
    expect((await signInWith({})).status).toBe(400)
  })

  it("a body that is not sent as application/json (what a cross-site form can post) is a 400 and sets no cookie", async () => {
    const response = await portal("/session", {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: JSON.stringify({ apiKey: server.credentials!.adminKey })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: "Sign-in takes a JSON body (content-type: application/json)" })
    expect(response.headers.get("set-cookie")).toBeNull()
  })
})

describe("The account shows the balance and today's staked-token allowance read from chain (1 token = 1 USD a day)", () => {
  it("a wallet holding 3 tokens sees 3 staked tokens and 3 USD of allowance, and no USD", async () => {
    const holder = privateKeyToAccount(generatePrivateKey())
    await stakeToken.mint(holder.address, 3n)
    const session = await sessionOf(await signInWith(await walletMessage(holder)))
    const account = await portal("/account", { headers: { cookie: session.cookie } })
    expect(account.status).toBe(200)
    expect(await account.json()).toEqual({
      accountId: `wallet:evm:${holder.address.toLowerCase()}`,
      balanceUsd: "0",
      availableUsd: "0",
      stakedTokens: 3,
      allowanceUsd: "3",
      transactions: []
    })
  })
})

describe("The portal's sign-in is a sealed, short-lived, httpOnly SameSite=Strict cookie; every change needs its CSRF token", () => {
  it("the cookie's attributes and lifetime", async () => {
    const response = await signInWith({ apiKey: server.credentials!.adminKey })
    const setCookie = response.headers.get("set-cookie") ?? ""
    expect(setCookie).toMatch(/^tollgate_portal=[\w-]+\.[\w-]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=1800$/)
    const { expiresAt } = await response.json() as { expiresAt: string }
    expect(Date.parse(expiresAt) - Date.now()).toBeGreaterThan(29 * 60_000)
  })

  it("without a cookie, or with an altered one, every portal read is a 401, and GET /session a 204", async () => {
    const session = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    const [value, mac] = session.cookie.split(".") as [string, string]
    const altered = `${value.slice(0, -2)}AA.${mac}`
    expect((await portal("/session")).status).toBe(204)
    expect((await portal("/session", { headers: { cookie: altered } })).status).toBe(204)
    expect((await portal("/session", { headers: { cookie: session.cookie } })).status).toBe(200)
    for (const path of ["/account", "/keys", "/usage"]) {
      expect((await portal(path)).status, path).toBe(401)
      expect((await portal(path, { headers: { cookie: altered } })).status, path).toBe(401)
      expect((await portal(path, { headers: { cookie: session.cookie } })).status, path).toBe(200)
    }
  })

  it("a key created without the CSRF token is a 403 and no key is made; with it, a 201", async () => {
    const session = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    const keys = async () =>
      ((await (await portal("/keys", { headers: { cookie: session.cookie } })).json()) as { data: Array<unknown> }).data.length
    const before = await keys()
    const body = JSON.stringify({ description: "ci" })
    const refused = await portal("/keys", { method: "POST", headers: { ...json, cookie: session.cookie }, body })
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({ error: "A change needs the session's CSRF token in x-csrf-token" })
    const wrong = await portal("/keys", {
      method: "POST",
      headers: { ...json, cookie: session.cookie, "x-csrf-token": "x".repeat(32) },
      body
    })
    expect(wrong.status).toBe(403)
    expect(await keys()).toBe(before)
    const made = await portal("/keys", {
      method: "POST",
      headers: { ...json, cookie: session.cookie, "x-csrf-token": session.csrfToken },
      body
    })
    expect(made.status).toBe(201)
    expect(await made.json()).toMatchObject({ apiKeyType: "INFERENCE", tier: "default", description: "ci", apiKey: expect.any(String) })
    expect(await keys()).toBe(before + 1)
  })

  it("revoking the ADMIN key that signed in ends its sign-in", async () => {
    const admin = await fetch(`${server.api}/api_keys`, {
      method: "POST",
      headers: { ...json, authorization: `Bearer ${server.credentials!.adminKey}` },
      body: JSON.stringify({ apiKeyType: "ADMIN", description: "short-lived" })
    })
    const { apiKey, id } = await admin.json() as { apiKey: string; id: string }
    const session = await sessionOf(await signInWith({ apiKey }))
    const revoke = await portal(`/keys?id=${id}`, {
      method: "DELETE",
      headers: { cookie: session.cookie, "x-csrf-token": session.csrfToken }
    })
    expect(revoke.status).toBe(200)
    expect((await portal("/account", { headers: { cookie: session.cookie } })).status).toBe(401)
  })

  it("sign-out needs the token and clears the cookie", async () => {
    const session = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    expect((await portal("/session", { method: "DELETE", headers: { cookie: session.cookie } })).status).toBe(403)
    const out = await portal("/session", { method: "DELETE", headers: { cookie: session.cookie, "x-csrf-token": session.csrfToken } })
    expect(out.status).toBe(200)
    expect(out.headers.get("set-cookie")).toBe("tollgate_portal=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
  })
})

describe("Sign-out ends the sign-in on the server: a copy of the cookie kept from before is refused, other sign-ins stand", () => {
  // The copy is used from an address of its own, so the abuse guard counts its 401s apart from the other tests'.
  const fromCopy = { "x-forwarded-for": "198.51.100.8" }

  it("after sign-out the copied cookie gets 401 on every read and on a change, and GET /session a 204; a second sign-in of the key still reads", async () => {
    const session = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    const other = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    const copied = session.cookie
    const out = await portal("/session", { method: "DELETE", headers: { cookie: session.cookie, "x-csrf-token": session.csrfToken } })
    expect(out.status).toBe(200)
    for (const path of ["/account", "/keys", "/usage"]) {
      const read = await portal(path, { headers: { ...fromCopy, cookie: copied } })
      expect(read.status, path).toBe(401)
      expect(await read.json(), path).toEqual({ error: "Sign in to the portal first (the session may have ended)" })
    }
    expect((await portal("/session", { headers: { ...fromCopy, cookie: copied } })).status).toBe(204)
    const change = await portal("/keys", {
      method: "POST",
      headers: { ...json, ...fromCopy, cookie: copied, "x-csrf-token": session.csrfToken },
      body: JSON.stringify({ description: "after sign-out" })
    })
    expect(change.status).toBe(401)
    expect((await portal("/account", { headers: { cookie: other.cookie } })).status).toBe(200)
  })
})

describe("A key's spend cap is set and removed through the portal with PATCH /api_keys's body and answer, behind the sign-in cookie and its CSRF token", () => {
  const capKey = async () => {
    const session = await sessionOf(await signInWith({ apiKey: server.credentials!.adminKey }))
    const change = { ...json, cookie: session.cookie, "x-csrf-token": session.csrfToken }
    const fromCapClient = { "x-forwarded-for": CAP_CLIENT }
    const made = await portal("/keys", { method: "POST", headers: change, body: JSON.stringify({ description: "capped" }) })
    const { id } = await made.json() as { id: string }
    const cap = (body: unknown, headers: Record<string, string> = change) =>
      portal("/keys", { method: "PATCH", headers: { ...headers, ...fromCapClient }, body: JSON.stringify(body) })
    const listed = async () =>
      ((await (await portal("/keys", { headers: { cookie: session.cookie } })).json()) as { data: Array<Record<string, unknown>> }).data
        .find((key) => key.id === id)
    return { session, id, cap, listed }
  }

  it("a cap of 1.5 USD a month: the key's metadata carries it and a spend of 0; the list shows the same", async () => {
    const { cap, id, listed } = await capKey()
    const response = await cap({ id, consumptionLimit: { usd: 1.5 }, limitPeriod: "MONTH" })
    expect(response.status).toBe(200)
    expect(response.headers.get("cache-control")).toBe("no-store, private")
    const answer = await response.json()
    expect(answer).toMatchObject({
      id,
      apiKeyType: "INFERENCE",
      consumptionLimits: { usd: 1.5 },
      limitPeriod: "MONTH",
      currentPeriodUsage: { usd: "0" }
    })
    expect(await listed()).toEqual(answer)
    const removed = await cap({ id, consumptionLimit: { usd: null } })
    expect(await removed.json()).toMatchObject({ id, consumptionLimits: { usd: null }, limitPeriod: "EPOCH" })
    expect(await listed()).not.toHaveProperty("currentPeriodUsage")
  })

  it("without the CSRF token a 403 that changes nothing; a negative cap or a period alone on an uncapped key a 400; another account's key a 404", async () => {
    const { cap, id, listed, session } = await capKey()
    const before = await listed()
    const refused = await cap({ id, consumptionLimit: { usd: 1 } }, { ...json, cookie: session.cookie })
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({ error: "A change needs the session's CSRF token in x-csrf-token" })
    const negative = await cap({ id, consumptionLimit: { usd: -1 } })
    expect(negative.status).toBe(400)
    expect(await negative.json()).toMatchObject({ error: expect.stringContaining("consumptionLimit.usd"), details: expect.any(Object) })
    const periodAlone = await cap({ id, limitPeriod: "MONTH" })
    expect(periodAlone.status).toBe(400)
    expect(await periodAlone.json()).toEqual({
      error:
        "limitPeriod applies to a consumption limit: set consumptionLimit.usd too: limitPeriod: needs consumptionLimit.usd on a key without one",
      details: { _errors: [], limitPeriod: { _errors: ["needs consumptionLimit.usd on a key without one"] } }
    })
    const wallet = await sessionOf(await signInWith(await walletMessage()))
    const foreign = await cap({ id, consumptionLimit: { usd: 1 } }, { ...json, cookie: wallet.cookie, "x-csrf-token": wallet.csrfToken })
    expect(foreign.status).toBe(404)
    expect(await listed()).toEqual(before)
  })
})

describe("/api-keys, the 402's getKey link, is the portal and its terminal example works as printed", () => {
  it("the 402 links to /api-keys, which serves the portal with its assets under the same policy", async () => {
    const paid = await fetch(`${server.api}/crypto/rpc/base-mainnet`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
    })
    const { authOptions } = await paid.json() as { authOptions: { apiKey: { getKey: string } } }
    expect(authOptions.apiKey.getKey).toBe(`${origin}/api-keys`)
    for (const path of ["/api-keys", "/portal/portal.js", "/portal/portal.css"]) {
      const response = await fetch(`${origin}${path}`)
      expect(response.status, path).toBe(200)
      expect(response.headers.get("content-security-policy"), path).toBe(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; " +
          "form-action 'self'; frame-ancestors 'none'"
      )
      expect(response.headers.get("x-content-type-options"), path).toBe("nosniff")
    }
  })

  it("the curl on the page names this server and expands $ADMIN_KEY: run by a shell, it mints a key", async () => {
    const html = await (await fetch(`${origin}/api-keys`)).text()
    const printed = /<pre><code>(curl [\s\S]*?)<\/code><\/pre>/.exec(html)![1]!
      .replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&quot;", "\"").replaceAll("&#39;", "'").replaceAll("&amp;", "&")
    expect(printed).toContain(`curl -X POST ${origin}/api/v1/api_keys`)
    const answer = await new Promise<string>((resolve, reject) =>
      ChildProcess.execFile("bash", ["-c", `${printed} --silent --show-error`], {
        env: { PATH: process.env["PATH"] ?? "", ADMIN_KEY: server.credentials!.adminKey }
      }, (error, stdout) => error === null ? resolve(stdout) : reject(error))
    )
    expect(JSON.parse(answer)).toMatchObject({ apiKeyType: "INFERENCE", description: "my app", apiKey: expect.any(String) })
  })
})
