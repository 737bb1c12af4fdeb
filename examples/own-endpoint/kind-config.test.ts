/**
 * An operator's own rate-limit kind is tuned from the configuration, as the built-in kinds are:
 * `rateLimits.kinds.<name>` in the `TOLLGATE_CONFIG` file sets its requests per minute per tier
 * over the rates the declaration carries (`examples/own-endpoint/endpoints.ts`, whose `summaries`
 * kind declares `SUMMARIZE_RPM`).
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Host from "./support/Host.ts"

/** The configuration file: the `summaries` kind at 3 requests a minute for the default tier. */
const config = {
  "rateLimits": {
    "kinds": {
      "summaries": { "default": { "requests": 3 } }
    }
  }
}

/** The rate the declaration carries, and the one the configuration sets over it. */
const DECLARED_RPM = 8
const CONFIGURED_RPM = config.rateLimits.kinds.summaries.default.requests

const summarize = (key: string) =>
  fetch(`${host.origin}/v1/summarize`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ text: "the quick brown fox" })
  })

let host: Host.Host
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-kind-config-"))

beforeAll(async () => {
  const file = Path.join(dir, "tollgate.json")
  Fs.writeFileSync(file, JSON.stringify(config))
  host = await Host.start("express", { SUMMARIZE_RPM: String(DECLARED_RPM), TOLLGATE_CONFIG: file })
}, 90_000)
afterAll(async () => {
  await host?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

describe("A custom kind's requests per minute come from TOLLGATE_CONFIG rateLimits.kinds by its name: the call past the configured count is a 429 that charges nothing", () => {
  it(`examples/own-endpoint/express.ts: ${CONFIGURED_RPM} summaries a minute, not the declared ${DECLARED_RPM}, each with x-ratelimit-* headers showing the configured limit`, async () => {
    const usd = async () => {
      const response = await fetch(`${host.origin}/api/v1/api_keys/rate_limits`, {
        headers: { authorization: `Bearer ${host.inferenceKey}` }
      })
      return Host.nano((await response.json() as { balances: { usd: string } }).balances.usd)
    }
    const before = await usd()
    for (let i = 1; i <= CONFIGURED_RPM; i++) {
      const response = await summarize(host.inferenceKey)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-ratelimit-limit-requests")).toBe(String(CONFIGURED_RPM))
      expect(response.headers.get("x-ratelimit-remaining-requests")).toBe(String(CONFIGURED_RPM - i))
    }
    const refused = await summarize(host.inferenceKey)
    expect(refused.status).toBe(429)
    expect(refused.headers.get("x-ratelimit-limit-requests")).toBe(String(CONFIGURED_RPM))
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(await refused.json()).toEqual({ error: expect.any(String) })
    expect(await usd()).toBe(before - CONFIGURED_RPM * 2_000_000)
  })
})
