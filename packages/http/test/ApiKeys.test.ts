import { NodeRedis } from "@effect/platform-node"
import { AbuseGuard } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as KeyCaps from "@tollgate/core/KeyCaps"
import { AbuseGuardRedis, AuthStoreRedis } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { afterAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as ApiKeys from "../src/routes/ApiKeys.ts"

const origin = "http://localhost"
const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const scope = Effect.runSync(Scope.make())
afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

const build = <I, S, E>(tag: Context.Key<I, S>, layer: Layer.Layer<I, E>): Promise<S> =>
  Effect.runPromise(Effect.map(Layer.buildWithScope(layer, scope), (context) => Context.get(context, tag)))

/** Auth with the spend caps of the same store. */
const buildAuth = (layer: Layer.Layer<Auth.Auth | KeyCaps.KeyCaps>) =>
  Effect.runPromise(Effect.map(Layer.buildWithScope(layer, scope), (context) => ({
    ...Context.get(context, Auth.Auth),
    caps: Context.get(context, KeyCaps.KeyCaps)
  })))

type AuthWithCaps = Auth.Auth["Service"] & { readonly caps: KeyCaps.KeyCaps["Service"] }

/** One app instance over the given Auth and abuse guard. */
const instance = (auth: AuthWithCaps, guard: AbuseGuard.AbuseGuard["Service"]) => {
  const { dispose, handler } = Handlers.toWebHandler(
    App.layer(ApiKeys.routes).pipe(
      Layer.provide(Layer.mergeAll(
        Layer.succeed(Auth.Auth, auth),
        Layer.succeed(KeyCaps.KeyCaps, auth.caps),
        Layer.succeed(AbuseGuard.AbuseGuard, guard)
      )),
      Layer.provide(ServiceInfo.layer({ version: "20261122.120000", hostName: "test-host" }))
    )
  )
  afterAll(dispose)
  return (path: string, init: RequestInit & { readonly key?: string } = {}) =>
    handler(
      new Request(`${origin}${path}`, {
        ...init,
        headers: { ...(init.key === undefined ? {} : { authorization: `Bearer ${init.key}` }), ...init.headers as Record<string, string> }
      })
    )
}

const memoryAuth = await buildAuth(Auth.layer({ signingKey, publicOrigin: origin }).pipe(Layer.provideMerge(AuthStore.layerMemory)))
const request = instance(memoryAuth, await build(AbuseGuard.AbuseGuard, AbuseGuard.layerMemory))

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

/** A fresh account with an ADMIN and an INFERENCE key. */
const account = async (auth: Auth.Auth["Service"] = memoryAuth, tier: "default" | "partner" = "default") => {
  const created = await run(auth.createAccount())
  const admin = await run(auth.createKey({ accountId: created.id, type: "ADMIN", tier, description: "admin" }))
  const inference = await run(auth.createKey({ accountId: created.id, type: "INFERENCE", tier, description: "inference" }))
  return { id: created.id, admin: admin.key, inference: inference.key }
}

const post = (key: string | undefined, body: unknown) =>
  request("/api/v1/api_keys", {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
    ...(key === undefined ? {} : { key })
  })

describe("Key management: ADMIN keys create, list and revoke the account's keys", () => {
  it("POST creates a key shown once; GET lists metadata without secrets; DELETE revokes it at once", async () => {
    const { admin } = await account()
    const created = await post(admin, { apiKeyType: "INFERENCE", description: "ci runner" })
    expect(created.status).toBe(201)
    const body = await created.json() as { id: string; apiKey: string; apiKeyType: string; tier: string }
    expect(body).toMatchObject({ apiKeyType: "INFERENCE", tier: "default", description: "ci runner", revokedAt: null })
    expect(body.apiKey.split(".")).toHaveLength(3)

    const listed = await (await request("/api/v1/api_keys", { key: admin })).json() as { data: Array<Record<string, unknown>> }
    expect(listed.data.map((k) => k["id"])).toContain(body.id)
    expect(JSON.stringify(listed)).not.toContain(body.apiKey)
    expect(listed.data.every((k) => !("apiKey" in k))).toBe(true)

    expect((await request(`/api/v1/api_keys?id=${body.id}`, { method: "DELETE", key: admin })).status).toBe(200)
    const refused = await request("/api/v1/api_keys", { key: body.apiKey })
    expect(refused.status).toBe(401)
  })

  it("a new key may carry an expiry; a past one or a bad body is a 400 naming the fields", async () => {
    const { admin } = await account()
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
    const created = await post(admin, { apiKeyType: "ADMIN", description: "temp", expiresAt })
    expect(await created.json()).toMatchObject({ expiresAt })
    const past = await post(admin, { apiKeyType: "ADMIN", description: "temp", expiresAt: "2020-01-01T00:00:00Z" })
    expect(past.status).toBe(400)
    const bad = await post(admin, { apiKeyType: "ROOT", description: 3 })
    expect(bad.status).toBe(400)
    const details = (await bad.json() as { details: Record<string, unknown> }).details
    expect(Object.keys(details)).toEqual(expect.arrayContaining(["apiKeyType", "description"]))
  })

  it("revoking an id the account does not hold is a 404; no id is a 400", async () => {
    const { admin } = await account()
    const other = await account()
    const [key] = await run(memoryAuth.listKeys(other.id))
    expect((await request(`/api/v1/api_keys?id=${key!.id}`, { method: "DELETE", key: admin })).status).toBe(404)
    expect((await request("/api/v1/api_keys", { method: "DELETE", key: admin })).status).toBe(400)
  })

  it("a key never mints a tier above its own", async () => {
    const plain = await account()
    expect((await post(plain.admin, { apiKeyType: "INFERENCE", description: "", tier: "partner" })).status).toBe(403)
    const partner = await account(memoryAuth, "partner")
    const minted = await post(partner.admin, { apiKeyType: "INFERENCE", description: "" })
    expect(await minted.json()).toMatchObject({ tier: "partner" })
  })
})

describe("Spend caps and key details: consumptionLimit and limitPeriod at creation or by PATCH; GET /api_keys/:id within the caller's account", () => {
  const patch = (key: string, body: unknown) =>
    request("/api/v1/api_keys", { method: "PATCH", body: JSON.stringify(body), headers: { "content-type": "application/json" }, key })

  it("a key created with a cap shows it with the period's spend; one without shows a null limit and no usage", async () => {
    const { admin } = await account()
    const created = await post(admin, {
      apiKeyType: "INFERENCE",
      description: "capped",
      consumptionLimit: { usd: 0.05 },
      limitPeriod: "EPOCH"
    })
    expect(created.status).toBe(201)
    const body = await created.json() as { id: string }
    expect(body).toMatchObject({ consumptionLimits: { usd: 0.05 }, limitPeriod: "EPOCH", currentPeriodUsage: { usd: "0" } })
    const shown = await request(`/api/v1/api_keys/${body.id}`, { key: admin })
    expect(shown.status).toBe(200)
    expect(await shown.json()).toMatchObject({
      data: { id: body.id, consumptionLimits: { usd: 0.05 }, limitPeriod: "EPOCH", currentPeriodUsage: { usd: "0" } }
    })
    const plain = await (await post(admin, { apiKeyType: "INFERENCE", description: "plain" })).json() as Record<string, unknown>
    expect(plain["consumptionLimits"]).toEqual({ usd: null })
    expect(plain).not.toHaveProperty("currentPeriodUsage")
    const listed = await (await request("/api/v1/api_keys", { key: admin })).json() as { data: Array<{ id: string; limitPeriod: string }> }
    expect(listed.data.find((key) => key.id === body.id)).toMatchObject({
      consumptionLimits: { usd: 0.05 },
      currentPeriodUsage: { usd: "0" }
    })
  })

  it("PATCH changes the description, the cap and its period, and removes the cap with usd null", async () => {
    const { admin } = await account()
    const { id } = await (await post(admin, { apiKeyType: "INFERENCE", description: "before" })).json() as { id: string }
    const capped = await patch(admin, { id, description: "after", consumptionLimit: { usd: 12.5 } })
    expect(capped.status).toBe(200)
    expect(await capped.json()).toMatchObject({
      success: true,
      data: { id, description: "after", consumptionLimits: { usd: 12.5 }, limitPeriod: "EPOCH" }
    })
    expect(await (await patch(admin, { id, limitPeriod: "MONTH" })).json()).toMatchObject({
      data: { consumptionLimits: { usd: 12.5 }, limitPeriod: "MONTH" }
    })
    const removed = await (await patch(admin, { id, consumptionLimit: { usd: null } })).json() as { data: Record<string, unknown> }
    expect(removed.data["consumptionLimits"]).toEqual({ usd: null })
    expect(removed.data).not.toHaveProperty("currentPeriodUsage")
  })

  it("PATCH sets an expiry that ends the key at that time on its next request, and removing it lets the key work again", async () => {
    const { admin } = await account()
    const { apiKey, id } = await (await post(admin, { apiKeyType: "INFERENCE", description: "expiring" })).json() as {
      apiKey: string
      id: string
    }
    const soon = new Date(Date.now() + 1_000).toISOString()
    expect(await (await patch(admin, { id, expiresAt: soon })).json()).toMatchObject({ data: { id, expiresAt: soon } })
    expect((await request("/api/v1/api_keys", { key: apiKey })).status).not.toBe(401)
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    expect((await request("/api/v1/api_keys", { key: apiKey })).status).toBe(401)
    expect(await (await patch(admin, { id, expiresAt: null })).json()).toMatchObject({ data: { id, expiresAt: null } })
    expect((await request("/api/v1/api_keys", { key: apiKey })).status).not.toBe(401)
    const past = await patch(admin, { id, expiresAt: "2020-01-01", description: "unchanged?" })
    expect(past.status).toBe(400)
    expect(await (await request(`/api/v1/api_keys/${id}`, { key: admin })).json()).toMatchObject({
      data: { description: "expiring", expiresAt: null }
    })
  })

  it("a bad cap or period is a 400 naming the field; a period without a cap is a 400", async () => {
    const { admin } = await account()
    const negative = await post(admin, { apiKeyType: "INFERENCE", description: "", consumptionLimit: { usd: -1 } })
    expect(negative.status).toBe(400)
    expect(Object.keys((await negative.json() as { details: Record<string, unknown> }).details)).toContain("consumptionLimit")
    const period = await post(admin, { apiKeyType: "INFERENCE", description: "", consumptionLimit: { usd: 1 }, limitPeriod: "WEEK" })
    expect(period.status).toBe(400)
    const { id } = await (await post(admin, { apiKeyType: "INFERENCE", description: "" })).json() as { id: string }
    const alone = await patch(admin, { id, limitPeriod: "MONTH" })
    expect(alone.status).toBe(400)
    expect(await alone.json()).toMatchObject({ details: { limitPeriod: { _errors: [expect.any(String)] } } })
  })

  it("another account's key is a 404 to GET and PATCH; an INFERENCE key is a 403", async () => {
    const mine = await account()
    const other = await account()
    const [theirs] = await run(memoryAuth.listKeys(other.id))
    expect((await request(`/api/v1/api_keys/${theirs!.id}`, { key: mine.admin })).status).toBe(404)
    expect((await patch(mine.admin, { id: theirs!.id, consumptionLimit: { usd: 0 } })).status).toBe(404)
    expect((await request(`/api/v1/api_keys/${theirs!.id}`, { key: mine.inference })).status).toBe(403)
    expect((await patch(mine.inference, { id: theirs!.id, description: "x" })).status).toBe(403)
  })
})

describe("401 for missing, malformed, expired or revoked credentials; 403 for a valid key without the right", () => {
  const expectStandardError = async (response: Response, status: number) => {
    expect(response.status).toBe(status)
    const body = await response.json() as Record<string, unknown>
    expect(Object.keys(body)).toEqual(["error"])
    expect(body["error"]).toEqual(expect.any(String))
  }

  it("no credentials, a non-bearer header, garbage, and an expired key are 401 StandardError", async () => {
    const { id } = await account()
    const expired = await run(Jwt.sign(signingKey, {
      accountId: id,
      keyId: "key_old",
      type: "ADMIN",
      tier: "default",
      issuedAt: new Date(Date.now() - 7_200_000),
      expiresAt: new Date(Date.now() - 3_600_000)
    }))
    await expectStandardError(await request("/api/v1/api_keys"), 401)
    await expectStandardError(await request("/api/v1/api_keys", { headers: { authorization: "Basic dXNlcjpwYXNz" } }), 401)
    await expectStandardError(await request("/api/v1/api_keys", { key: "not-a-jwt" }), 401)
    await expectStandardError(await request("/api/v1/api_keys", { key: expired }), 401)
  })

  it("an INFERENCE key on key management is a 403 StandardError", async () => {
    const { inference } = await account()
    await expectStandardError(await request("/api/v1/api_keys", { key: inference }), 403)
    await expectStandardError(await post(inference, { apiKeyType: "ADMIN", description: "escalate" }), 403)
  })

  it("a signed-in wallet is a 403 on key management", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const message = createSiweMessage({
      domain: "localhost",
      address: wallet.address,
      uri: `${origin}/`,
      version: "1",
      chainId: 8453,
      nonce: "abcdef0123456789",
      issuedAt: new Date(),
      expirationTime: new Date(Date.now() + 300_000)
    })
    const header = Buffer.from(JSON.stringify({
      address: wallet.address,
      message,
      signature: await wallet.signMessage({ message }),
      timestamp: Date.now(),
      chainId: "eip155:8453"
    })).toString("base64")
    await expectStandardError(await request("/api/v1/api_keys", { headers: { "sign-in-with-x": header } }), 403)
  })
})

describe("Abuse guard: a key's more than 20 failures within 30 s block that key, not its account's other keys", () => {
  it("an INFERENCE key with 21 failures is refused with 429 while the account's ADMIN key still works", async () => {
    const { admin, inference } = await account()
    for (let i = 0; i < 21; i++) expect((await request("/api/v1/api_keys", { key: inference })).status).toBe(403)
    const refused = await request("/api/v1/api_keys", { key: inference })
    expect(refused.status).toBe(429)
    expect(await refused.json()).toEqual({ error: "Too many failed attempts (over 20). Please wait 30s." })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect((await request("/api/v1/api_keys", { key: admin })).status).toBe(200)
  })
})

describe("Abuse guard: an address block applies only to requests without valid credentials", () => {
  it("after 21 garbage keys a valid key is served, while another garbage key and a request without credentials get 429", async () => {
    const guard = await build(AbuseGuard.AbuseGuard, AbuseGuard.layerMemory)
    const isolated = instance(memoryAuth, guard)
    const { admin } = await account()
    for (let i = 0; i < 21; i++) expect((await isolated("/api/v1/api_keys", { key: "bad" })).status).toBe(401)
    expect((await isolated("/api/v1/api_keys", { key: admin })).status).toBe(200)
    const garbage = await isolated("/api/v1/api_keys", { key: "bad" })
    expect(garbage.status).toBe(429)
    expect(await garbage.json()).toEqual({ error: AbuseGuard.message })
    expect((await isolated("/api/v1/api_keys")).status).toBe(429)
  })
})

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

describe("Revocation is effective at once on every instance sharing Redis", () => {
  it("a key revoked through instance A is refused by instance B on its next request", async () => {
    const url = redis.url
    const redisInstance = async () => {
      const connection = Layer.orDie(NodeRedis.layer({ url }))
      const auth = await buildAuth(
        Auth.layer({ signingKey, publicOrigin: origin }).pipe(
          Layer.provideMerge(AuthStoreRedis.layerRedis),
          Layer.provide(connection)
        )
      )
      const guard = await build(AbuseGuard.AbuseGuard, AbuseGuardRedis.layerRedis.pipe(Layer.provide(connection)))
      return { auth, request: instance(auth, guard) }
    }
    const a = await redisInstance()
    const b = await redisInstance()
    const { admin } = await account(a.auth)
    const created = await a.request("/api/v1/api_keys", {
      method: "POST",
      key: admin,
      body: JSON.stringify({ apiKeyType: "ADMIN", description: "shared" }),
      headers: { "content-type": "application/json" }
    })
    const { apiKey, id } = await created.json() as { apiKey: string; id: string }
    expect((await b.request("/api/v1/api_keys", { key: apiKey })).status).toBe(200)
    expect((await a.request(`/api/v1/api_keys?id=${id}`, { method: "DELETE", key: admin })).status).toBe(200)
    expect((await b.request("/api/v1/api_keys", { key: apiKey })).status).toBe(401)
  })
})
