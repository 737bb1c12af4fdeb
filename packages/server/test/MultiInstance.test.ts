import { CreditLedger, Jwt, Models, Money } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import { RateWindow, RedisServer, ShippedServer } from "@tollgate/testkit"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Cli from "../src/Cli.ts"

type Instance = ShippedServer.ShippedServer

const redis = await RedisServer.acquire()
let instances: ReadonlyArray<Instance> = []
let adminKey = ""
let inferenceKey = ""
let revocableKey = ""
let revocableKeyId = ""

beforeAll(async () => {
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))
  const config = { store: "redis" as const, redisUrl: redis.url, publicOrigin: "http://localhost:8787", signingKey }
  const seeded = await Effect.runPromise(
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const ledger = yield* CreditLedger.CreditLedger
      const account = yield* auth.createAccount({ id: "acct_shared" })
      const inference = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "load" })
      const other = yield* auth.createAccount({ id: "acct_other" })
      const admin = yield* auth.createKey({ accountId: other.id, type: "ADMIN", description: "test admin" })
      const revocable = yield* auth.createKey({ accountId: other.id, type: "INFERENCE", description: "to revoke" })
      yield* ledger.grant({ accountId: account.id, amount: Money.usd(100), reference: "seed" })
      return { admin: admin.key, inference: inference.key, revocable: revocable.key, revocableId: revocable.record.id }
    }).pipe(Effect.provide(Cli.layer(config)))
  )
  adminKey = seeded.admin
  inferenceKey = seeded.inference
  revocableKey = seeded.revocable
  revocableKeyId = seeded.revocableId
  // Production lists its models; the local renderer and the dev video model keep the test free of upstreams.
  const models = Models.defaults.filter((model) => model.id === "local-renderer" || model.id === "dev-video")
  const options = {
    store: "redis" as const,
    redisUrl: redis.url,
    signingKey,
    provision: false,
    config: { models, rateLimits: { accounts: { acct_shared: { image: { requests: 100 } } } } }
  }
  instances = await Promise.all([ShippedServer.start(options), ShippedServer.start(options)])
}, 150_000)

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()))
  await redis.stop()
})

describe("Several instances on one Redis share every limit, balance and revocation", () => {
  it("500 concurrent requests across two server processes against a limit of 100: exactly 100 admitted", async () => {
    const generate = (instance: Instance) =>
      fetch(`${instance.api}/image/generate`, {
        method: "POST",
        headers: { authorization: `Bearer ${inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
      }).then(async (response) => {
        await response.arrayBuffer()
        return response.status
      })
    // 500 renders on a loaded machine take seconds: all in one minute's window.
    await RateWindow.fresh(45_000)
    const statuses = await Promise.all(Array.from({ length: 500 }, (_, i) => generate(instances[i % 2]!)))
    expect(statuses.filter((status) => status === 200)).toHaveLength(100)
    expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([])
  }, 120_000)

  it("a key revoked through one instance is refused by the other on its next request", async () => {
    const [first, second] = instances as [Instance, Instance]
    const limits = () => fetch(`${second.api}/api_keys/rate_limits`, { headers: { authorization: `Bearer ${revocableKey}` } })
    expect((await limits()).status).toBe(200)
    const revoked = await fetch(`${first.api}/api_keys?id=${revocableKeyId}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${adminKey}` }
    })
    expect(revoked.status).toBeLessThan(300)
    const after = await limits()
    expect(after.status).toBe(401)
    expect(await after.json()).toEqual({ error: expect.any(String) })
  })
})

describe("A video job lives on Redis: queued on one instance, polled on another, its hold settled once", () => {
  it("the job queued through one instance is served by both; its price is taken once", async () => {
    const [first, second] = instances as [Instance, Instance]
    const post = (instance: Instance, path: string, body: unknown) =>
      fetch(`${instance.api}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    const queued = await post(first, "/video/queue", { model: "dev-video", prompt: "a lighthouse", duration: 2 })
    expect(queued.status).toBe(200)
    const before = Number(queued.headers.get("x-service-balance-usd"))
    const { queue_id } = await queued.json() as { queue_id: string }
    for (const instance of [second, first, second]) {
      const video = await post(instance, "/video/retrieve", { queue_id })
      expect(video.status).toBe(200)
      expect(video.headers.get("content-type")).toBe("video/x-yuv4mpeg")
      expect(Buffer.from(await video.arrayBuffer()).subarray(0, 9).toString()).toBe("YUV4MPEG2")
      expect(Number(video.headers.get("x-service-balance-usd"))).toBeCloseTo(before - 0.1, 9)
    }
  }, 60_000)
})

/** Signs in to the portal of `instance` with the ADMIN key: the sign-in cookie and its CSRF token. */
const portalSignIn = async (instance: Instance) => {
  const signIn = await fetch(`${instance.origin}/api/v1/portal/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiKey: adminKey })
  })
  expect(signIn.status).toBe(200)
  const { csrfToken } = await signIn.json() as { csrfToken: string }
  return { cookie: signIn.headers.get("set-cookie")!.split(";")[0]!, csrfToken }
}

describe.skipIf(redis === undefined)(
  "A portal sign-in made on one instance is accepted by the other (its seal is derived from the shared signing key)",
  () => {
    it("signed in with the ADMIN key on one, the account and keys read on both; a key made on the second is listed on the first", async () => {
      const [first, second] = instances as [Instance, Instance]
      const { cookie, csrfToken } = await portalSignIn(first)
      for (const instance of [first, second]) {
        const account = await fetch(`${instance.origin}/api/v1/portal/account`, { headers: { cookie } })
        expect(account.status).toBe(200)
        expect(await account.json()).toMatchObject({ accountId: "acct_other" })
      }
      const made = await fetch(`${second.origin}/api/v1/portal/keys`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie, "x-csrf-token": csrfToken },
        body: JSON.stringify({ description: "made on the second" })
      })
      expect(made.status).toBe(201)
      const listed = await (await fetch(`${first.origin}/api/v1/portal/keys`, { headers: { cookie } })).json() as {
        data: Array<{ description: string }>
      }
      expect(listed.data.map((key) => key.description)).toContain("made on the second")
    })
  }
)

describe.skipIf(redis === undefined)("A sign-out on one instance ends the sign-in on the other (the revocation is in Redis)", () => {
  it("signed out on the second, a copy of the cookie is a 401 on the first", async () => {
    const [first, second] = instances as [Instance, Instance]
    const { cookie, csrfToken } = await portalSignIn(first)
    expect((await fetch(`${first.origin}/api/v1/portal/account`, { headers: { cookie } })).status).toBe(200)
    const out = await fetch(`${second.origin}/api/v1/portal/session`, { method: "DELETE", headers: { cookie, "x-csrf-token": csrfToken } })
    expect(out.status).toBe(200)
    const copy = await fetch(`${first.origin}/api/v1/portal/account`, { headers: { cookie } })
    expect(copy.status).toBe(401)
    expect(await copy.json()).toEqual({ error: "Sign in to the portal first (the session may have ended)" })
  })
})
