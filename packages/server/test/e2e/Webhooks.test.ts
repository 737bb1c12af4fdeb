import { Models } from "@tollgate/core"
import { FreePort, RedisServer, ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import { Webhook } from "standardwebhooks"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const SECRET = `whsec_${Buffer.from("tollgate end-to-end webhook key!").toString("base64")}`

interface Received {
  readonly id: string
  readonly type: string
  readonly data: Record<string, unknown>
}

/** A real HTTP receiver that accepts only what the library verifies against the secret. */
const receiver = (port: number) =>
  new Promise<{ readonly received: Array<Received>; readonly rejected: () => number; readonly close: () => Promise<void> }>((resolve) => {
    const received: Array<Received> = []
    let rejected = 0
    const server = Http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk: Buffer) => (body += chunk.toString()))
      request.on("end", () => {
        try {
          const event = new Webhook(SECRET).verify(body, request.headers as Record<string, string>) as {
            type: string
            data: Record<string, unknown>
          }
          received.push({ id: String(request.headers["webhook-id"]), type: event.type, data: event.data })
          response.writeHead(204).end()
        } catch {
          rejected++
          response.writeHead(400).end()
        }
      })
    })
    server.listen(port, "127.0.0.1", () =>
      resolve({
        received,
        rejected: () => rejected,
        close: () => new Promise((done) => server.close(() => done()))
      }))
  })

const until = async (check: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const redis = await RedisServer.start()
const ports = { memory: await FreePort.freePort(), redis: await FreePort.freePort() }
const webhooks = (port: number) => ({
  endpoints: [{ url: `http://127.0.0.1:${port}/hooks`, secret: SECRET }],
  balanceBelowUsd: "24.98",
  capShare: 0.6,
  retryBaseMs: 500
})
let memory: ShippedServer.ShippedServer
let onRedis: ShippedServer.ShippedServer

beforeAll(async () => {
  ;[memory, onRedis] = await Promise.all([
    ShippedServer.start({ config: { webhooks: webhooks(ports.memory) } }),
    ShippedServer.start({
      store: "redis",
      redisUrl: redis.url,
      signingKey: true,
      env: { TOLLGATE_OPERATOR_ACCOUNTS: "acct_e2e" },
      config: { models: Models.defaults.filter((model) => model.id === "local-renderer"), webhooks: webhooks(ports.redis) }
    })
  ])
}, 120_000)

afterAll(async () => {
  await memory?.stop()
  await onRedis?.stop()
  await redis.stop()
})

describe.each([["dev mode on memory", () => memory, ports.memory], ["production on Redis", () => onRedis, ports.redis]])(
  "Webhooks (%s): signed Standard Webhooks events, once per crossing, delivered at least once",
  (_, server, port) => {
    const parse = (key: string) => {
      const form = new FormData()
      form.append("file", new Blob(["Hello.\n"], { type: "text/plain" }), "hello.txt")
      return fetch(`${server().api}/augment/text-parser`, { method: "POST", headers: bearer(key), body: form })
    }
    const post = (path: string, body: unknown) =>
      fetch(`${server().api}${path}`, {
        method: "POST",
        headers: { ...bearer(server().credentials!.adminKey), "content-type": "application/json" },
        body: JSON.stringify(body)
      })

    it("the balance falling below 24.98 USD fires balance.below_threshold once, with a signature the receiver verifies", async () => {
      const hooks = await receiver(port)
      try {
        const { accountId, inferenceKey } = server().credentials!
        // 25 USD of credit: the third 0.01 USD call crosses 24.98; the two after it stay under.
        for (let i = 0; i < 5; i++) expect((await parse(inferenceKey)).status).toBe(200)
        await until(() => hooks.received.length > 0, 10_000)
        await new Promise((resolve) => setTimeout(resolve, 1_500))
        expect(hooks.received).toEqual([{
          id: expect.stringMatching(/^msg_/),
          type: "balance.below_threshold",
          data: { accountId, availableUsd: "24.97", thresholdUsd: "24.98" }
        }])
        expect(hooks.rejected()).toBe(0)
      } finally {
        await hooks.close()
      }
    })

    it(
      "a receiver down for 10 s gets every event once it is back; the log shows the retries, and a delivery can be sent again",
      async () => {
        const { accountId, adminKey } = server().credentials!
        // A credit lifts the balance over the threshold (24.99): the next fall is a new crossing.
        expect((await post("/billing/credits", { accountId, amountUsd: "0.04", reference: `lift-${port}` })).status).toBe(200)
        const created = await post("/api_keys", {
          apiKeyType: "INFERENCE",
          description: "hooked",
          consumptionLimit: { usd: 0.05 },
          limitPeriod: "EPOCH"
        })
        const { apiKey, id } = await created.json() as { apiKey: string; id: string }
        const statuses: Array<number> = []
        for (let i = 0; i < 6; i++) statuses.push((await parse(apiKey)).status)
        expect(statuses).toEqual([200, 200, 200, 200, 200, 402])

        await new Promise((resolve) => setTimeout(resolve, 10_000))
        const hooks = await receiver(port)
        try {
          await until(() => hooks.received.length >= 3, 30_000)
          await new Promise((resolve) => setTimeout(resolve, 1_500))
          const byType = Object.fromEntries(hooks.received.map((event) => [event.type, event.data]))
          expect(hooks.received).toHaveLength(3)
          // The answer goes before its settlement: the next call may settle before the share's
          // crossing is observed, so the event reports the spend it saw, from the share to the cap.
          const shareSpent = byType["key.cap_share_reached"]?.spentUsd
          expect(["0.03", "0.04", "0.05"]).toContain(shareSpent)
          expect(byType).toEqual({
            "balance.below_threshold": { accountId, availableUsd: "24.97", thresholdUsd: "24.98" },
            "key.cap_share_reached": { accountId, keyId: id, limitPeriod: "EPOCH", capUsd: "0.05", spentUsd: shareSpent, share: 0.6 },
            "key.cap_reached": { accountId, keyId: id, limitPeriod: "EPOCH", capUsd: "0.05", spentUsd: "0.05" }
          })

          const log = await fetch(`${server().api}/webhooks/deliveries?limit=10`, { headers: bearer(adminKey) })
          expect(log.status).toBe(200)
          const { data } = await log.json() as {
            data: Array<{ id: string; type: string; status: string; attempts: number; lastError: string | null }>
          }
          const retried = data.filter((delivery) => hooks.received.some((event) => event.id === delivery.id))
          expect(retried).toHaveLength(3)
          for (const delivery of retried) {
            expect(delivery.status).toBe("delivered")
            expect(delivery.attempts).toBeGreaterThan(1)
          }

          const capReached = hooks.received.find((event) => event.type === "key.cap_reached")!
          const again = await fetch(`${server().api}/webhooks/deliveries/${capReached.id}/redeliver`, {
            method: "POST",
            headers: bearer(adminKey)
          })
          expect(again.status).toBe(202)
          await until(() => hooks.received.length >= 4, 10_000)
          expect(hooks.received.at(-1)).toEqual(capReached)
          expect(
            (await fetch(`${server().api}/webhooks/deliveries/msg_missing/redeliver`, { method: "POST", headers: bearer(adminKey) })).status
          ).toBe(404)
          expect((await fetch(`${server().api}/webhooks/deliveries`, { headers: bearer(server().credentials!.inferenceKey) })).status).toBe(
            403
          )
        } finally {
          await hooks.close()
        }
      },
      60_000
    )
  }
)
