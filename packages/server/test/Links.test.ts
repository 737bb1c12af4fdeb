/**
 * What a client that follows the links of a 402 finds, and what `/docs` loads, on the shipped
 * server.
 */
import * as OpenApi from "@tollgate/http/OpenApi"
import { ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer
beforeAll(async () => {
  server = await ShippedServer.start()
}, 90_000)
afterAll(() => server.stop())

describe("The links of a 402 body resolve: /api-keys, /docs/authentication and /docs/wallets are pages of the server", () => {
  it("every URL in authOptions answers 200 with an HTML page", async () => {
    const response = await fetch(`${server.api}/image/generate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse" })
    })
    expect(response.status).toBe(402)
    const { authOptions } = await response.json() as {
      authOptions: { apiKey: { getKey: string; docs: string }; x402Wallet: { topUp: string; docs: string } }
    }
    const pages = [authOptions.apiKey.getKey, authOptions.apiKey.docs, authOptions.x402Wallet.docs]
    expect(pages.map((url) => new URL(url).pathname)).toEqual(["/api-keys", "/docs/authentication", "/docs/wallets"])
    for (const url of pages) {
      const page = await fetch(`${server.origin}${new URL(url).pathname}`)
      expect(page.status, url).toBe(200)
      expect(page.headers.get("content-type"), url).toMatch(/^text\/html/)
      const html = await page.text()
      expect(html, url).toMatch(/<h1>[^<]+<\/h1>/)
      expect(html.match(/(?:src|href)="https?:\/\/[^"]*"/g) ?? [], url).toEqual([])
    }
  })
})

describe("/docs makes no request outside the server and shows its introduction without JavaScript", () => {
  it("no external script, style or font, Scalar's CDN fonts and telemetry off, the introduction in the page", async () => {
    const response = await fetch(`${server.origin}/docs`)
    expect(response.status).toBe(200)
    const html = await response.text()
    const markup = html.replace(/<script>[\s\S]*?<\/script>/g, "")
    expect(markup.match(/(?:src|href)="https?:\/\/[^"]*"/g) ?? []).toEqual([])
    expect(markup).not.toMatch(/@import|url\(/)
    expect(html).toContain(`"withDefaultFonts":false`)
    expect(html).toContain(`"telemetry":false`)
    expect(markup).toContain(OpenApi.description)
  })
})
