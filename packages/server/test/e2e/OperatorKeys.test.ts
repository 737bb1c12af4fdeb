/**
 * Keys an operator can run a business on, through the shipped server in production mode on Redis
 * and the shipped CLI: signing-key rotation without an outage, keys restricted to what they may
 * call, keys rerolled with a grace period, rate-limit overrides kept in the store, and the audit log
 * of all of it.
 */
import { Jwt } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { Effect } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../../http/test/support/SiwxHeader.ts"

const redis = await RedisServer.start()
const config = {
  models: [{ id: "house-model", type: "text", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] }],
  prices: { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } }
}

// A loaded machine starts a production server slowly; this file starts several.
const timeoutMs = 180_000

let server: ShippedServer.ShippedServer
/** A second instance on the same Redis and signing key. */
let other: ShippedServer.ShippedServer

beforeAll(async () => {
  // The two instances start side by side: neither needs the other to be up.
  const signingKey = ShippedServer.generateSigningKey()
  const env = { TOLLGATE_OPERATOR_ACCOUNTS: "acct_e2e" }
  ;[server, other] = await Promise.all([
    ShippedServer.start({ store: "redis", redisUrl: redis.url, timeoutMs, signingKey, config, env }),
    ShippedServer.start({ store: "redis", redisUrl: redis.url, timeoutMs, signingKey, provision: false, config, env })
  ])
}, 2 * timeoutMs)

afterAll(async () => {
  await other?.stop()
  await server?.stop()
  await redis.stop()
})

const admin = () => ({ authorization: `Bearer ${server.credentials!.adminKey}`, "content-type": "application/json" })

/** Mints a key through the API with the account's ADMIN key. */
const mint = async (body: Record<string, unknown>) => {
  const response = await fetch(`${server.api}/api_keys`, {
    method: "POST",
    headers: admin(),
    body: JSON.stringify({ apiKeyType: "INFERENCE", description: "", ...body })
  })
  expect(response.status).toBe(201)
  return await response.json() as { id: string; apiKey: string; restrictions: unknown }
}

const rpc = (key: string, network: string) =>
  fetch(`${server.api}/crypto/rpc/${network}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })
  })

const rateLimits = (key: string) => fetch(`${server.api}/api_keys/rate_limits`, { headers: { authorization: `Bearer ${key}` } })

const kidOf = (pem: string) => Effect.runPromise(Effect.map(Jwt.importSigningKey(pem), (key) => key.kid))

const listKeys = (server: ShippedServer.ShippedServer, key: string) =>
  fetch(`${server.api}/api_keys`, { headers: { authorization: `Bearer ${key}` } })

describe("Signing-key rotation: a key minted under the old signing key works while it is a previous key, and is 401 once it is dropped", () => {
  it(
    "mint under key 1, restart on key 2 with key 1 kept: the key works; restart without key 1: 401; the CLI lists the keys of key 1",
    async () => {
      const key1 = ShippedServer.generateSigningKey()
      const key2 = ShippedServer.generateSigningKey()
      const first = await ShippedServer.start({
        store: "redis",
        redisUrl: redis.url,
        timeoutMs,
        signingKey: key1,
        accountId: "acct_rotation",
        config
      })
      const { adminKey } = first.credentials!
      expect((await listKeys(first, adminKey)).status).toBe(200)
      await first.stop()

      const rotated = await ShippedServer.start({
        store: "redis",
        redisUrl: redis.url,
        timeoutMs,
        signingKey: key2,
        provision: false,
        config,
        env: { TOLLGATE_PREVIOUS_SIGNING_KEYS: key1 }
      })
      try {
        expect((await listKeys(rotated, adminKey)).status).toBe(200)
        // The CLI mints with the current key: its key names key 2.
        const minted = await rotated.cli(["keys", "mint", "--account", "acct_rotation", "--type", "INFERENCE"])
        const signedBy1 = await rotated.cli(["keys", "signed-by", "--kid", await kidOf(key1)])
        const signedBy2 = await rotated.cli(["keys", "signed-by", "--kid", await kidOf(key2)])
        expect((signedBy1["keys"] as Array<{ type: string }>).map((key) => key.type).sort()).toEqual(["ADMIN", "INFERENCE"])
        expect(signedBy2["keys"]).toEqual([expect.objectContaining({ keyId: minted["keyId"], kid: await kidOf(key2) })])
      } finally {
        await rotated.stop()
      }

      const dropped = await ShippedServer.start({
        store: "redis",
        redisUrl: redis.url,
        timeoutMs,
        signingKey: key2,
        provision: false,
        config
      })
      try {
        const refused = await listKeys(dropped, adminKey)
        expect(refused.status).toBe(401)
        expect(await refused.json()).toEqual({ error: "Invalid or expired API key" })
      } finally {
        await dropped.stop()
      }
    },
    600_000
  )
})

describe("A restricted key gets 403 naming the restriction outside it, before its body is read or any credit held", () => {
  it("a key restricted to ethereum-mainnet (POST /api_keys) is refused on base-mainnet; GET /api_keys shows the restriction; PATCH lifts it", async () => {
    const key = await mint({ description: "mainnet only", restrictions: { networks: ["ethereum-mainnet"] } })
    expect(key.restrictions).toEqual({ networks: ["ethereum-mainnet"] })
    const listed = await (await fetch(`${server.api}/api_keys`, { headers: admin() })).json() as {
      data: Array<{ id: string; restrictions: unknown }>
    }
    expect(listed.data.find((entry) => entry.id === key.id)?.restrictions).toEqual({ networks: ["ethereum-mainnet"] })

    const refused = await rpc(key.apiKey, "base-mainnet")
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({
      error: "This API key is restricted: its networks restriction allows ethereum-mainnet, not base-mainnet"
    })
    expect((await rpc(key.apiKey, "ethereum-mainnet")).status).not.toBe(403)

    const lifted = await fetch(`${server.api}/api_keys`, {
      method: "PATCH",
      headers: admin(),
      body: JSON.stringify({ id: key.id, restrictions: null })
    })
    expect(((await lifted.json()) as { data: { restrictions: unknown } }).data.restrictions).toBeNull()
    expect((await rpc(key.apiKey, "base-mainnet")).status).not.toBe(403)
  })

  it("a key restricted to 10.9.9.0/24 (keys mint --restrictions) gets 403 from 127.0.0.1", async () => {
    const minted = await server.cli([
      "keys",
      "mint",
      "--account",
      server.credentials!.accountId,
      "--type",
      "INFERENCE",
      "--restrictions",
      JSON.stringify({ ips: ["10.9.9.0/24"] })
    ])
    expect(minted["restrictions"]).toEqual({ ips: ["10.9.9.0/24"] })
    const refused = await rpc(String(minted["apiKey"]), "ethereum-mainnet")
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({ error: "This API key is restricted: its ips restriction allows 10.9.9.0/24, not 127.0.0.1" })
  })

  it("a restriction that names no real network is refused with the field named", async () => {
    const response = await fetch(`${server.api}/api_keys`, {
      method: "POST",
      headers: admin(),
      body: JSON.stringify({ apiKeyType: "INFERENCE", description: "", restrictions: { networks: ["moon-mainnet"] } })
    })
    expect(response.status).toBe(400)
    expect(JSON.stringify(await response.json())).toContain("moon-mainnet is not a supported network")
  })
})

describe("A rerolled key keeps its id; its old secret works for the grace period the caller chose, then is 401", () => {
  it("POST /api_keys/{id}/reroll with graceSeconds 2: both secrets work, then only the new one; keys reroll with no grace ends the old one at once", async () => {
    const key = await mint({ description: "agent", restrictions: { networks: ["ethereum-mainnet"] } })
    const response = await fetch(`${server.api}/api_keys/${key.id}/reroll`, {
      method: "POST",
      headers: admin(),
      body: JSON.stringify({ graceSeconds: 2 })
    })
    expect(response.status).toBe(200)
    const rerolled = await response.json() as { id: string; apiKey: string; description: string; restrictions: unknown }
    expect([rerolled.id, rerolled.description, rerolled.restrictions]).toEqual([key.id, "agent", { networks: ["ethereum-mainnet"] }])
    expect(rerolled.apiKey).not.toBe(key.apiKey)
    expect([(await rateLimits(key.apiKey)).status, (await rateLimits(rerolled.apiKey)).status]).toEqual([200, 200])
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect([(await rateLimits(key.apiKey)).status, (await rateLimits(rerolled.apiKey)).status]).toEqual([401, 200])

    const again = await server.cli(["keys", "reroll", "--account", server.credentials!.accountId, "--id", key.id])
    expect([(await rateLimits(rerolled.apiKey)).status, (await rateLimits(String(again["apiKey"]))).status]).toEqual([401, 200])
  })
})

describe("Concurrent rerolls of one key are serialised: one issues the secret that works, the others are 409 and issue nothing", () => {
  it("five rerolls with no grace sent at once: each is a 200 or a 409, of the secrets issued exactly one works, and the old secret is 401", async () => {
    const key = await mint({ description: "double-clicked" })
    const answers = await Promise.all(
      Array.from(
        { length: 5 },
        () =>
          fetch(`${server.api}/api_keys/${key.id}/reroll`, { method: "POST", headers: admin(), body: JSON.stringify({ graceSeconds: 0 }) })
      )
    )
    expect(answers.every((answer) => answer.status === 200 || answer.status === 409)).toBe(true)
    const issued: Array<string> = []
    for (const answer of answers) {
      const body = await answer.json() as { apiKey?: string; error?: string }
      if (answer.status === 200) issued.push(body.apiKey!)
      else expect(body).toEqual({
          error: "This API key was rerolled by another request at the same time; its secret from that reroll stands"
        })
    }
    const statuses = await Promise.all([key.apiKey, ...issued].map(async (secret) => (await rateLimits(secret)).status))
    expect(statuses[0]).toBe(401)
    expect(statuses.slice(1).filter((status) => status === 200)).toHaveLength(1)
  })
})

describe("A rate-limit override set through the admin API is kept in the store: a second instance enforces it on the next call, for a key's calls and a wallet's", () => {
  const parse = (
    instance: ShippedServer.ShippedServer,
    headers: Record<string, string> = { authorization: `Bearer ${server.credentials!.inferenceKey}` }
  ) => {
    const form = new FormData()
    form.append("file", new Blob(["Hello from a text file.\n"], { type: "text/plain" }), "hello.txt")
    return fetch(`${instance.api}/augment/text-parser`, { method: "POST", headers, body: form }).then((response) => response.status)
  }

  it("one text request a minute, set on instance A: instance B admits one call and refuses the next with 429; removed with the CLI, B admits again", async () => {
    const set = await fetch(`${server.api}/rate_limits/overrides`, {
      method: "PUT",
      headers: admin(),
      body: JSON.stringify({ accountId: "acct_e2e", limits: { "text:M": { requests: 1 } } })
    })
    expect(set.status).toBe(200)
    const shown = await (await rateLimits(server.credentials!.inferenceKey)).json() as {
      limits: Array<{ kind: string; modelTier?: string; type: string; requests?: { limit: number } }>
    }
    expect(shown.limits.find((limit) => limit.kind === "text" && limit.modelTier === "M" && limit.type === "user")?.requests?.limit).toBe(1)
    expect([await parse(other), await parse(other)]).toEqual([200, 429])
    await server.cli(["limits", "set", "--account", "acct_e2e", "--limits", "none"])
    expect(await parse(other)).toBe(200)
  })

  it("a wallet's calls (SIWX) follow the override of its account set on instance A: instance B admits one and refuses the next with 429; removed, B admits again", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const accountId = `wallet:evm:${wallet.address.toLowerCase()}`
    const granted = await fetch(`${server.api}/billing/credits`, {
      method: "POST",
      headers: admin(),
      body: JSON.stringify({ accountId, amountUsd: "1.00", reference: `limits-${accountId}` })
    })
    expect(granted.status).toBe(200)
    const signedIn = async () => ({ "sign-in-with-x": await SiwxHeader.of(`http://localhost:${other.port}`, wallet) })
    const set = await fetch(`${server.api}/rate_limits/overrides`, {
      method: "PUT",
      headers: admin(),
      body: JSON.stringify({ accountId, limits: { "text:M": { requests: 1 } } })
    })
    expect(set.status).toBe(200)
    expect([await parse(other, await signedIn()), await parse(other, await signedIn())]).toEqual([200, 429])
    await server.cli(["limits", "set", "--account", accountId, "--limits", "none"])
    expect(await parse(other, await signedIn())).toBe(200)
  })

  it("a wallet's account spelled otherwise than its calls name it (a checksummed address) is a 400, and nothing is set", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const response = await fetch(`${server.api}/rate_limits/overrides`, {
      method: "PUT",
      headers: admin(),
      body: JSON.stringify({ accountId: `wallet:evm:${wallet.address}`, limits: { "text:M": { requests: 1 } } })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "A wallet's account id is wallet:evm:<address, lower-cased> or wallet:solana:<address>"
    })
  })

  it("only an operator account's ADMIN key sets overrides; an unknown account is a 404", async () => {
    await server.cli(["accounts", "create", "--id", "acct_customer_limits"])
    const customer = await server.cli(["keys", "mint", "--account", "acct_customer_limits", "--type", "ADMIN"])
    const body = JSON.stringify({ accountId: "acct_customer_limits", limits: { "text:M": { requests: 1000 } } })
    const refused = await fetch(`${server.api}/rate_limits/overrides`, {
      method: "PUT",
      headers: { authorization: `Bearer ${String(customer["apiKey"])}`, "content-type": "application/json" },
      body
    })
    expect(refused.status).toBe(403)
    const unknown = await fetch(`${server.api}/rate_limits/overrides`, {
      method: "PUT",
      headers: admin(),
      body: JSON.stringify({ accountId: "acct_nobody", limits: null })
    })
    expect(unknown.status).toBe(404)
  })
})

describe("The audit log lists each management action: who, when, what changed; an account's own entries, every entry for operators", () => {
  interface Entry {
    readonly actor: string
    readonly action: string
    readonly accountId: string | null
    readonly details: Record<string, unknown>
  }
  const read = async (query: string) => {
    const response = await fetch(`${server.api}/audit_log${query}`, { headers: admin() })
    expect(response.status).toBe(200)
    return await response.json() as { data: Array<Entry>; next: string | null }
  }

  it("an ADMIN key reads its account's minted, restricted, rerolled, revoked keys and granted credits, by the key or the CLI that acted", async () => {
    const adminKeyId =
      ((await (await fetch(`${server.api}/api_keys`, { headers: admin() })).json()) as { data: Array<{ id: string; apiKeyType: string }> })
        .data.find((key) => key.apiKeyType === "ADMIN")!.id
    const key = await mint({ description: "audited" })
    await fetch(`${server.api}/api_keys`, {
      method: "PATCH",
      headers: admin(),
      body: JSON.stringify({ id: key.id, restrictions: { networks: ["ethereum-mainnet"] } })
    })
    await fetch(`${server.api}/api_keys/${key.id}/reroll`, { method: "POST", headers: admin(), body: JSON.stringify({ graceSeconds: 0 }) })
    await server.cli(["keys", "revoke", "--account", "acct_e2e", "--id", key.id])

    const own = (await read("?limit=100")).data
    const about = own.filter((entry) => entry.details["keyId"] === key.id).map((entry) => [entry.action, entry.actor])
    expect(about).toEqual([
      ["key.revoked", "cli"],
      ["key.rerolled", `key:${adminKeyId}`],
      ["key.restricted", `key:${adminKeyId}`],
      ["key.minted", `key:${adminKeyId}`]
    ])
    expect(own.find((entry) => entry.action === "key.restricted")?.details["restrictions"]).toEqual({ networks: ["ethereum-mainnet"] })
    expect(own.find((entry) => entry.action === "credits.granted")).toMatchObject({
      actor: "cli",
      details: { amountUsd: "25", reference: "e2e-seed" }
    })
    expect(own.every((entry) => entry.accountId === "acct_e2e")).toBe(true)
    expect(own.filter((entry) => entry.action === "limits.changed").map((entry) => [entry.actor, entry.details["limits"]])).toEqual([
      ["cli", null],
      [`key:${adminKeyId}`, { "text:M": { requests: 1 } }]
    ])

    const page = await read("?limit=1")
    const next = await read(`?limit=1&before=${page.next}`)
    expect(next.data[0]).toEqual(own[1])
  })

  it("an operator's ADMIN key reads every entry with scope=all, with the signing keys the server started with; the CLI reads the same", async () => {
    const all = (await read("?scope=all&limit=100")).data
    expect(all.find((entry) => entry.action === "signing_keys.in_use")).toMatchObject({ actor: "server", accountId: null })
    const cli = await server.cli(["audit", "list", "--limit", "100"]) as { entries: Array<Entry> }
    expect(cli.entries.map((entry) => entry.action)).toEqual(all.map((entry) => entry.action))
    await server.cli(["accounts", "create", "--id", "acct_customer"])
    const customer = await server.cli(["keys", "mint", "--account", "acct_customer", "--type", "ADMIN"])
    const headers = { authorization: `Bearer ${String(customer["apiKey"])}` }
    const refused = await fetch(`${server.api}/audit_log?scope=all`, { headers })
    expect(refused.status).toBe(403)
    const customerOwn = await (await fetch(`${server.api}/audit_log`, { headers })).json() as { data: Array<Entry> }
    expect(customerOwn.data.map((entry) => [entry.action, entry.accountId])).toEqual([["key.minted", "acct_customer"]])
  })
})
