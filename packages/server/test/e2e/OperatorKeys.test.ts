/**
 * Keys an operator can run a business on, through the shipped server in production mode on Redis
 * and the shipped CLI: signing-key rotation without an outage.
 */
import { Jwt } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"

const redis = await RedisServer.start()
const config = { models: [{ id: "house-model", type: "text", upstreams: [{ baseUrl: "http://127.0.0.1:9/v1" }] }], prices: { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } } }

// A loaded machine starts a production server slowly; this file starts several.
const timeoutMs = 180_000

afterAll(() => redis.stop())

const kidOf = (pem: string) => Effect.runPromise(Effect.map(Jwt.importSigningKey(pem), (key) => key.kid))

const listKeys = (server: ShippedServer.ShippedServer, key: string) =>
  fetch(`${server.api}/api_keys`, { headers: { authorization: `Bearer ${key}` } })

describe("Signing-key rotation: a key minted under the old signing key works while it is a previous key, and is 401 once it is dropped", () => {
  it("mint under key 1, restart on key 2 with key 1 kept: the key works; restart without key 1: 401; the CLI lists the keys of key 1", async () => {
    const key1 = ShippedServer.generateSigningKey()
    const key2 = ShippedServer.generateSigningKey()
    const first = await ShippedServer.start({ store: "redis", redisUrl: redis.url, timeoutMs, signingKey: key1, accountId: "acct_rotation", config })
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

    const dropped = await ShippedServer.start({ store: "redis", redisUrl: redis.url, timeoutMs, signingKey: key2, provision: false, config })
    try {
      const refused = await listKeys(dropped, adminKey)
      expect(refused.status).toBe(401)
      expect(await refused.json()).toEqual({ error: "Invalid or expired API key" })
    } finally {
      await dropped.stop()
    }
  }, 600_000)
})
