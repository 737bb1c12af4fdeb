/**
 * `POST /billing/refunds` and `tollgate-cli credits refund` through the shipped server, on memory
 * (dev mode: the demo account is the operator and refunds its own call) and on Redis (production:
 * the CLI-provisioned `acct_e2e` is the operator and refunds a customer account the CLI made). A
 * paid call is a text-parser upload: 0.01 USD, exactly 10,000,000 nano-USD.
 */
import { Models } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../../http/test/support/SiwxHeader.ts"

const redis = await RedisServer.start()
let memory: ShippedServer.ShippedServer
let onRedis: ShippedServer.ShippedServer
let customer: { readonly accountId: string; readonly adminKey: string; readonly inferenceKey: string }

beforeAll(async () => {
  ;[memory, onRedis] = await Promise.all([
    // At info, the level operators run at, so the refund's log line (with its reason) is written.
    ShippedServer.start({ env: { TOLLGATE_LOG_LEVEL: "info" } }),
    ShippedServer.start({
      store: "redis",
      redisUrl: redis.url,
      signingKey: true,
      env: { TOLLGATE_OPERATOR_ACCOUNTS: "acct_e2e", TOLLGATE_LOG_LEVEL: "info" },
      config: {
        models: Models.defaults.filter((model) => model.id === "local-renderer"),
        x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" }, facilitatorUrl: "http://127.0.0.1:9" }
      }
    })
  ])
  await onRedis.cli(["accounts", "create", "--id", "acct_customer", "--description", "a customer"])
  const [admin, inference] = await Promise.all([
    onRedis.cli(["keys", "mint", "--account", "acct_customer", "--type", "ADMIN"]),
    onRedis.cli(["keys", "mint", "--account", "acct_customer", "--type", "INFERENCE"]),
    onRedis.cli(["credits", "grant", "--account", "acct_customer", "--usd", "1.00", "--reference", "customer-seed"])
  ])
  customer = { accountId: "acct_customer", adminKey: String(admin!["apiKey"]), inferenceKey: String(inference!["apiKey"]) }
})

afterAll(async () => {
  await Promise.all([memory?.stop(), onRedis?.stop()])
  await redis.stop()
})

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** A paid call (0.01 USD); its request id names it. */
const parseText = async (server: ShippedServer.ShippedServer, headers: Record<string, string>) => {
  const form = new FormData()
  form.append("file", new Blob(["A call to refund.\n"], { type: "text/plain" }), "refund.txt")
  const response = await fetch(`${server.api}/augment/text-parser`, { method: "POST", headers, body: form })
  expect(response.status).toBe(200)
  await response.arrayBuffer()
  return response.headers.get("x-request-id")!
}

const refund = (server: ShippedServer.ShippedServer, key: string, body: Record<string, unknown>) =>
  fetch(`${server.api}/billing/refunds`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(key) },
    body: JSON.stringify(body)
  })

/** The settled USD balance the key's account may spend, as the API reports it. */
const balanceOf = async (server: ShippedServer.ShippedServer, key: string) => {
  const limits = await fetch(`${server.api}/api_keys/rate_limits`, { headers: bearer(key) })
  return (await limits.json() as { balances: { usd: string } }).balances.usd
}

/** The memory server's operator refunds its own demo account; the Redis one's refunds a customer. */
const targets = () =>
  [
    { store: "memory", server: memory, operatorKey: memory.credentials!.adminKey, customer: memory.credentials! },
    { store: "Redis", server: onRedis, operatorKey: onRedis.credentials!.adminKey, customer }
  ] as const

describe.each(["memory", "Redis"] as const)(
  "On %s, an operator's refund of a charged call restores the balance to the nano-USD, once",
  (store) => {
    const target = () => targets().find((candidate) => candidate.store === store)!

    it("the whole charge comes back; a retry answers the same refund and moves nothing; usage-history still lists the charge", async () => {
      const { customer, operatorKey, server } = target()
      const before = await balanceOf(server, customer.inferenceKey)
      const requestId = await parseText(server, bearer(customer.inferenceKey))
      expect(Number(before) - Number(await balanceOf(server, customer.inferenceKey))).toBeCloseTo(0.01, 9)

      const first = await refund(server, operatorKey, { accountId: customer.accountId, requestId, reason: "the upstream answered garbage" })
      expect(first.status).toBe(200)
      const refunded = await first.json()
      expect(refunded).toEqual({
        accountId: customer.accountId,
        requestId,
        amountUsd: "0.01",
        chargedUsd: "0.01",
        reference: `refund:${requestId}`,
        entryId: expect.stringMatching(/^\d+-\d+$/),
        balanceUsd: before
      })
      expect(await balanceOf(server, customer.inferenceKey)).toBe(before)
      // The journal keeps the reference; the reason is in the server's log, with who refunded.
      const logged = () => server.output().split("\n").find((line) => line.includes("\"refund\"") && line.includes(requestId)) ?? ""
      await expect.poll(logged, { timeout: 10_000 }).toContain("\"reason\":\"the upstream answered garbage\"")
      expect(JSON.parse(logged())).toMatchObject({ message: "refund", annotations: { accountId: customer.accountId, amountUsd: "0.01" } })

      const retry = await refund(server, operatorKey, { accountId: customer.accountId, requestId, reason: "the upstream answered garbage" })
      expect(retry.status).toBe(200)
      expect(await retry.json()).toEqual(refunded)
      expect(await balanceOf(server, customer.inferenceKey)).toBe(before)

      // A refund is a credit, not usage: the charge stays in the usage report as it was.
      const history = await fetch(`${server.api}/billing/usage-history?limit=20`, { headers: bearer(customer.adminKey) })
      const { data } = await history.json() as {
        data: Array<{ amount: number; currency: string; inferenceDetails: { requestId: string } }>
      }
      expect(data.filter((entry) => entry.inferenceDetails.requestId === requestId).map(({ amount, currency }) => ({ amount, currency })))
        .toEqual([{ amount: 0.01, currency: "USD" }])
    })

    it("10 refunds of one call sent at once move its charge once, and all answer the same entry", async () => {
      const { customer, operatorKey, server } = target()
      const before = await balanceOf(server, customer.inferenceKey)
      const requestId = await parseText(server, bearer(customer.inferenceKey))
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          refund(server, operatorKey, { accountId: customer.accountId, requestId, reason: "sent ten times" })
            .then(async (response) => ({ status: response.status, body: await response.json() as { entryId: string } })))
      )
      expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(200))
      expect(new Set(answers.map((answer) => answer.body.entryId)).size).toBe(1)
      expect(await balanceOf(server, customer.inferenceKey)).toBe(before)
    })

    it("a refund above the charge is a 400 naming the charge; a part is refunded, and a second refund of the call is a 400 naming what was refunded", async () => {
      const { customer, operatorKey, server } = target()
      const before = await balanceOf(server, customer.inferenceKey)
      const requestId = await parseText(server, bearer(customer.inferenceKey))
      const call = { accountId: customer.accountId, requestId, reason: "partial outage" }

      const above = await refund(server, operatorKey, { ...call, amountUsd: "0.010000001" })
      expect(above.status).toBe(400)
      expect(await above.json()).toEqual({
        error: "The refund must be at most 0.01 USD, what the call was charged",
        details: { _errors: [], amountUsd: { _errors: ["must be at most 0.01 USD, what the call was charged"] } }
      })

      const part = await refund(server, operatorKey, { ...call, amountUsd: "0.004" })
      expect(part.status).toBe(200)
      expect(await part.json()).toMatchObject({ amountUsd: "0.004", chargedUsd: "0.01" })
      expect(Number(before) - Number(await balanceOf(server, customer.inferenceKey))).toBeCloseTo(0.006, 9)

      const again = await refund(server, operatorKey, call)
      expect(again.status).toBe(400)
      expect(await again.json()).toEqual({
        error: `Request ${requestId} was already refunded 0.004 USD of its 0.01 USD charge: a call is refunded once`
      })
      expect(Number(before) - Number(await balanceOf(server, customer.inferenceKey))).toBeCloseTo(0.006, 9)
    })

    it("an unknown call is a 404 and a body without a reason a 400 naming it; neither moves money", async () => {
      const { customer, operatorKey, server } = target()
      const before = await balanceOf(server, customer.inferenceKey)
      const unknown = await refund(server, operatorKey, { accountId: customer.accountId, requestId: "no-such-call", reason: "typo" })
      expect(unknown.status).toBe(404)
      expect(await unknown.json()).toEqual({
        error: `Account ${customer.accountId} has no charge with request id no-such-call (usage entries are kept for the retention)`
      })
      const noReason = await refund(server, operatorKey, { accountId: customer.accountId, requestId: "no-such-call" })
      expect(noReason.status).toBe(400)
      expect(await noReason.json()).toMatchObject({ details: { reason: { _errors: [expect.any(String)] } } })
      expect(await balanceOf(server, customer.inferenceKey)).toBe(before)
    })

    it("a wallet's refund shows in /x402/transactions as a REFUND after its CHARGE, with the balance after each", async () => {
      const { operatorKey, server } = target()
      const wallet = privateKeyToAccount(generatePrivateKey())
      const accountId = `wallet:evm:${wallet.address.toLowerCase()}`
      const granted = await fetch(`${server.api}/billing/credits`, {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(operatorKey) },
        body: JSON.stringify({ accountId, amountUsd: "1.00", reference: `wallet-seed-${wallet.address}` })
      })
      expect(granted.status).toBe(200)
      const signIn = await SiwxHeader.of(`http://localhost:${server.port}`, wallet)
      const requestId = await parseText(server, { "sign-in-with-x": signIn })
      const refunded = await refund(server, operatorKey, { accountId, requestId, reason: "wallet test" })
      expect(refunded.status).toBe(200)
      expect(await refunded.json()).toMatchObject({ accountId, amountUsd: "0.01", balanceUsd: "1" })

      const listed = await fetch(`${server.api}/x402/transactions/${wallet.address}`, { headers: bearer(operatorKey) })
      expect(listed.status).toBe(200)
      const { data } = await listed.json() as { data: { currentBalance: number; transactions: Array<Record<string, unknown>> } }
      expect(data.currentBalance).toBe(1)
      expect(
        data.transactions.map(({ amount, balanceAfter, reference, requestId, type }) => ({
          type,
          amount,
          balanceAfter,
          requestId,
          reference
        }))
      ).toEqual([
        { type: "REFUND", amount: 0.01, balanceAfter: 1, requestId: null, reference: `refund:${requestId}` },
        { type: "CHARGE", amount: -0.01, balanceAfter: 0.99, requestId, reference: expect.any(String) },
        { type: "GRANT", amount: 1, balanceAfter: 1, requestId: null, reference: `grant:wallet-seed-${wallet.address}` }
      ])
    })
  }
)

describe("Only an operator's ADMIN key refunds: a customer's is a 403 naming TOLLGATE_OPERATOR_ACCOUNTS", () => {
  it("the customer's own ADMIN key cannot refund its own call, and nothing moves", async () => {
    const before = await balanceOf(onRedis, customer.inferenceKey)
    const requestId = await parseText(onRedis, bearer(customer.inferenceKey))
    const refused = await refund(onRedis, customer.adminKey, { accountId: customer.accountId, requestId, reason: "I want my money" })
    expect(refused.status).toBe(403)
    expect(await refused.json()).toEqual({
      error: "Only operator accounts may refund calls: the server lists them in TOLLGATE_OPERATOR_ACCOUNTS"
    })
    expect(Number(before) - Number(await balanceOf(onRedis, customer.inferenceKey))).toBeCloseTo(0.01, 9)
  })
})

describe("The operator's CLI refunds a call on Redis once per call", () => {
  it("credits refund returns the charge; a retry prints the same refund; above the charge is refused naming it", async () => {
    const before = await balanceOf(onRedis, customer.inferenceKey)
    const requestId = await parseText(onRedis, bearer(customer.inferenceKey))
    const run = (extra: ReadonlyArray<string> = []) =>
      onRedis.cli(["credits", "refund", "--account", customer.accountId, "--request-id", requestId, "--reason", "cli refund", ...extra])
    const refused = await run(["--usd", "0.02"]).then(() => "refunded", (error: Error) => error.message.trim())
    expect(refused).toMatch(/: tollgate-cli: The refund must be at most 0.01 USD, what the call was charged$/)
    const first = await run()
    expect(first).toEqual({
      accountId: customer.accountId,
      requestId,
      amountUsd: "0.01",
      chargedUsd: "0.01",
      reason: "cli refund",
      entryId: expect.stringMatching(/^\d+-\d+$/),
      balanceUsd: before
    })
    expect(await run()).toEqual(first)
    expect(await balanceOf(onRedis, customer.inferenceKey)).toBe(before)
  })
})
