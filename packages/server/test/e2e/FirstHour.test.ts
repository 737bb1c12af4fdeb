/**
 * What a newcomer meets in the first hour, through the shipped server: the root path points
 * somewhere, `/docs` shows the reference on its first screen without calling another host, and
 * every refusal says what to change (the model that is unknown, where the JSON broke, the body
 * limit, the setting to configure), read with the clients users use (the `openai` SDK, fetch,
 * headless Chromium). Production's refusals are in ProductionStart.test.ts.
 */
import { Chromium, FreePort, ShippedServer } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import OpenAI from "openai"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start()
})

afterAll(async () => {
  await server?.stop()
})

const key = () => ({ authorization: `Bearer ${server.credentials!.inferenceKey}` })
const json = { "content-type": "application/json" }
const balance = async () =>
  (await fetch(`${server.api}/billing/balance`, { headers: { authorization: `Bearer ${server.credentials!.adminKey}` } })).headers
    .get("x-service-balance-usd")

describe("GET / is not a 404: it points at the reference and the API, as a page for a browser and JSON for a client", () => {
  it("answers 200 with the paths of /docs, the OpenAPI document and the API root", async () => {
    const response = await fetch(`${server.origin}/`)
    expect(response.status).toBe(200)
    expect(response.headers.get("vary")).toMatch(/^accept\b/)
    expect(await response.json()).toEqual({ service: "tollgate", docs: "/docs", openapi: "/api/v1/openapi.json", api: "/api/v1" })
  })

  it("a client that accepts JSON, or anything, gets the JSON", async () => {
    for (const accept of ["application/json", "*/*"]) {
      const response = await fetch(`${server.origin}/`, { headers: { accept } })
      expect(response.headers.get("content-type"), accept).toMatch(/^application\/json/)
    }
  })

  it("headless Chromium gets a page whose links open the reference, the portal and the OpenAPI document", async () => {
    const browser = await chromium.launch({ executablePath: Chromium.executablePath, args: [...Chromium.args] })
    try {
      const page = await browser.newPage()
      const response = await page.goto(`${server.origin}/`)
      expect(response!.status()).toBe(200)
      expect(response!.headers()["content-type"]).toMatch(/^text\/html/)
      const links = await page.locator("body > ul a").evaluateAll((anchors) =>
        anchors.map((anchor) => [anchor.textContent, (anchor as HTMLAnchorElement).pathname])
      )
      expect(links).toEqual([
        ["The API reference", "/docs"],
        ["The portal", "/api-keys"],
        ["The OpenAPI document", "/api/v1/openapi.json"]
      ])
      for (const [, path] of links) {
        const target = await page.request.get(`${server.origin}${path}`)
        expect(target.status(), path!).toBe(200)
      }
    } finally {
      await browser.close()
    }
  }, 60_000)
})

describe("/docs in a browser: the first screen shows the reference, each group once, and no request leaves the server", () => {
  it("headless Chromium loads /docs: every request is to the server, none fails, the title is on the first screen", async () => {
    const browser = await chromium.launch({
      executablePath: Chromium.executablePath,
      args: [...Chromium.args]
    })
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
      const requests: Array<string> = []
      const failed: Array<string> = []
      page.on("request", (request) => requests.push(request.url()))
      page.on("requestfailed", (request) => failed.push(request.url()))
      page.on("response", (response) => {
        if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`)
      })
      await page.goto(`${server.origin}/docs`, { waitUntil: "networkidle" })
      const title = page.locator("h1", { hasText: "tollgate" })
      await title.waitFor({ timeout: 30_000 })
      const box = await title.boundingBox()
      expect(box!.y).toBeLessThan(800)
      // Scalar's grey loading placeholders, on the first screen
      const placeholders = await page.evaluate(() =>
        [...document.querySelectorAll(".loading")].filter((element) => element.getBoundingClientRect().top < window.innerHeight).length
      )
      expect(placeholders).toBe(0)
      // The sidebar lists the API's groups, "Models" among them, and no second entry of that name
      const sidebar = await page.locator("aside").first().innerText()
      expect(sidebar.split("\n").filter((line) => line.trim() === "Models")).toHaveLength(1)
      await page.waitForLoadState("networkidle")
      expect(requests.length).toBeGreaterThan(0)
      expect(requests.filter((url) => new URL(url).origin !== server.origin && !url.startsWith("data:"))).toEqual([])
      expect(failed).toEqual([])
    } finally {
      await browser.close()
    }
  }, 90_000)
})

describe("A 400 says what is wrong in `error`, which the openai SDK shows; `details` keeps every field", () => {
  it("an unknown chat model: the SDK's error message names the model, and nothing is charged", async () => {
    const client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
    const before = await balance()
    const error = await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toBe(
      "400 \"Invalid request parameters: model: Unknown text model: no-such-model\""
    )
    expect(await balance()).toBe(before)
  })

  it("the same call over fetch: the body is still a DetailedError, every problem in details", async () => {
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { ...key(), ...json },
      body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "Invalid request parameters: model: Unknown text model: no-such-model",
      details: { _errors: [], model: { _errors: ["Unknown text model: no-such-model"] } }
    })
  })

  it("several bad fields: the first is in `error` and the others are counted", async () => {
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { ...key(), ...json },
      body: JSON.stringify({ model: "local-echo", max_tokens: -1 })
    })
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string; details: Record<string, unknown> }
    expect(body.error).toMatch(/^Invalid request parameters: [a-z_]+: .+ \(and [1-9][0-9]* more in details\)$/)
    expect(Object.keys(body.details)).toEqual(expect.arrayContaining(["_errors", "messages", "max_tokens"]))
  })

  it("a body that is not JSON: the parser's words, which quote where it broke", async () => {
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { ...key(), ...json },
      body: "{\"model\": \"local-echo\", \"messages\": [}"
    })
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string }
    expect(Object.keys(body)).toEqual(["error"])
    expect(body.error).toBe("The body is not valid JSON: Unexpected token '}', ...\"ssages\": [}\" is not valid JSON")
  })

  it("a body over the server's limit (1 MiB by default): the 413 states the limit in bytes", async () => {
    const response = await fetch(`${server.api}/embeddings`, {
      method: "POST",
      headers: { ...key(), ...json },
      body: JSON.stringify({ model: "dev-embedding", input: "x".repeat(1_100_000) })
    })
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ error: "Request body is too large: the limit is 1048576 bytes" })
  })
})

describe("A refusal caused by the configuration names the setting to change", () => {
  it("RPC on a network with no upstream: the 503 names rpc.upstreams.<network>, and nothing is charged", async () => {
    const before = await balance()
    const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
      method: "POST",
      headers: { ...key(), ...json },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
    })
    expect(response.status).toBe(503)
    expect(await response.json()).toEqual({
      error:
        "No upstream is configured for ethereum-mainnet: add its node URLs under rpc.upstreams.ethereum-mainnet in the TOLLGATE_CONFIG file"
    })
    expect(await balance()).toBe(before)
  })
})

// `script` runs the server on a pseudo-terminal, as `pnpm start` in a terminal does.
const scriptPath = "/usr/bin/script"

describe("Dev mode on a terminal shows the keys as a short block with a curl to paste; the JSON line stays", () => {
  it.skipIf(!Fs.existsSync(scriptPath))("the block names the account and both keys, and its curl makes a chat call", async () => {
    const port = await FreePort.freePort()
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-tty-"))
    const file = Path.join(dir, "credentials.json")
    const child = ChildProcess.spawn(scriptPath, ["-qfec", `"${process.execPath}" "${ShippedServer.mainPath}"`, "/dev/null"], {
      env: { PATH: process.env["PATH"] ?? "", PORT: String(port), TOLLGATE_DEV_CREDENTIALS_FILE: file },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString().replaceAll("\r", "")))
    try {
      const deadline = Date.now() + 60_000
      while (!output.includes("tollgate listening")) {
        if (Date.now() > deadline) throw new Error(`no listening line: ${output}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      const credentials = JSON.parse(Fs.readFileSync(file, "utf8")) as { accountId: string; adminKey: string; inferenceKey: string }
      expect(output).toContain("  tollgate dev mode: account acct_demo with 25 USD of credit\n")
      expect(output).toContain(`\n  ADMIN key      ${credentials.adminKey}\n  INFERENCE key  ${credentials.inferenceKey}\n`)
      expect(output).toMatch(/^\{"message":"dev mode: no TOLLGATE_SIGNING_KEY/mu)
      const lines = output.split("\n")
      const from = lines.indexOf("  Try it:") + 1
      const curl = lines.slice(from, lines.indexOf("", from)).join("\n")
      expect(curl).toContain(`http://localhost:${port}/api/v1/chat/completions`)
      const answer = ChildProcess.execSync(curl, { shell: "/bin/sh", encoding: "utf8" })
      expect((JSON.parse(answer) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toContain("hello")
    } finally {
      // The server runs in the terminal's own session: ending `script` closes the terminal, and the
      // server gets SIGHUP.
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGKILL")
      await exited
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})

describe("Dev mode offers no wallet payment it cannot settle: with nothing configured to settle Base, the 402s offer no USDC entry", () => {
  it("a paid call without credentials: 402 with an empty accepts and the API key named; the top-up answers 503 instead of offering Base", async () => {
    const paid = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ model: "llama-3.3-70b", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
    })
    expect(paid.status).toBe(402)
    const body = await paid.json() as { accepts: ReadonlyArray<unknown>; resource: { description: string } }
    expect(body.accepts).toEqual([])
    expect(body.resource.description).toBe("Send an API key (Authorization: Bearer); wallet top-ups are not configured on this server")
    const header = JSON.parse(Buffer.from(paid.headers.get("payment-required")!, "base64").toString()) as {
      accepts: ReadonlyArray<unknown>
    }
    expect(header.accepts).toEqual([])
    const topUp = await fetch(`${server.api}/x402/top-up`, { method: "POST" })
    expect(topUp.status).toBe(503)
    expect((await topUp.json() as { error: string }).error).toMatch(/Wallet payments are not configured/)
  })
})
