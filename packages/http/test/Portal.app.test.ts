import { AuditLog, CreditLedger, Jwt, KeyCaps, Money, Principal, type SessionRevocations, UsageAnalytics } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import { Effect, Layer } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as Portal from "../src/portal/Portal.ts"

const DAY = 86_400_000
const now = Date.parse("2026-11-27T15:00:00Z")

const entry = (at: string, sku: string, usd: number): CreditLedger.UsageEntry => ({
  id: `${Date.parse(at)}-0`,
  timestamp: Date.parse(at),
  sku,
  units: 1,
  pricePerUnit: Money.unsafeNano(usd * Money.NANO_PER_USD),
  amount: Money.unsafeNano(usd * Money.NANO_PER_USD),
  currency: "USD",
  requestId: "r",
  executionMs: 1
})

describe("The usage chart sums spend by UTC day and sku over the 30 days ending today, every day present", () => {
  const spend = Portal.spendByDay([
    entry("2026-11-27T14:59:59Z", "rpc:base-mainnet", 0.5),
    entry("2026-11-27T00:00:00Z", "rpc:base-mainnet", 0.25),
    entry("2026-11-27T01:00:00Z", "chat:qwen3-4b", 2),
    entry("2026-10-29T23:59:59Z", "chat:qwen3-4b", 1),
    entry("2026-10-28T23:59:59Z", "chat:qwen3-4b", 100)
  ], now)

  it("30 days, oldest first, from 29 days ago to today", () => {
    expect(spend.days).toHaveLength(30)
    expect(spend.days[0]!.date).toBe(new Date(now - 29 * DAY).toISOString().slice(0, 10))
    expect(spend.days.at(-1)!.date).toBe("2026-11-27")
  })

  it("today's spend by sku, the first day's, and an entry before the window left out", () => {
    expect(spend.days.at(-1)).toEqual({
      date: "2026-11-27",
      amountUsd: "2.75",
      skus: [{ sku: "rpc:base-mainnet", amountUsd: "0.75" }, { sku: "chat:qwen3-4b", amountUsd: "2" }]
    })
    expect(spend.days[0]).toEqual({ date: "2026-10-29", amountUsd: "1", skus: [{ sku: "chat:qwen3-4b", amountUsd: "1" }] })
    expect(spend.days.slice(1, -1).every((day) => day.amountUsd === "0" && day.skus.length === 0)).toBe(true)
  })

  it("the skus by their total over the window, largest first", () => {
    expect(spend.skus).toEqual([{ sku: "chat:qwen3-4b", amountUsd: "3" }, { sku: "rpc:base-mainnet", amountUsd: "0.75" }])
  })
})

describe("The usage chart is the usage analytics' tally: a day's spend there is that day's total in the analytics report", () => {
  it("the same entries give the same day totals in both", () => {
    const entries = [
      entry("2026-11-27T14:59:59Z", "rpc:base-mainnet", 0.5),
      entry("2026-11-26T01:00:00Z", "chat:qwen3-4b", 2),
      { ...entry("2026-11-26T02:00:00Z", "chat:qwen3-4b", 1), currency: "DIEM" as const }
    ]
    const chart = Portal.spendByDay(entries, now).days.filter((day) => day.skus.length > 0)
    const report = UsageAnalytics.report("30d", entries, new Map()).byDate
    expect(chart.map((day) => [day.date, Number(day.amountUsd)])).toEqual(
      report.map((day) => [day.date, day.USD + day.DIEM]).reverse()
    )
  })
})

describe("The account lists its 20 latest credits, newest first", () => {
  it("of 25 grants today, the last 20 in reverse order with their amounts", async () => {
    const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
    const services = Layer.mergeAll(
      Auth.layer({ signingKey, publicOrigin: "http://localhost" }).pipe(Layer.provideMerge(AuthStore.layerMemory)),
      CreditLedger.layerMemory,
      KeyCaps.layerMemory,
      ServiceInfo.layer({ publicOrigin: "http://localhost" })
    )
    const seeded = await Effect.runPromise(
      Effect.gen(function*() {
        const auth = yield* Auth.Auth
        const ledger = yield* CreditLedger.CreditLedger
        const account = yield* auth.createAccount({ id: "acct_busy" })
        for (let grant = 1; grant <= 25; grant++) {
          yield* ledger.grant({ accountId: account.id, amount: Money.usd(grant), reference: `grant-${grant}` })
        }
        const admin = yield* auth.createKey({ accountId: account.id, type: "ADMIN", description: "admin" })
        return {
          admin: admin.key,
          services: yield* Effect.context<
            | Auth.Auth
            | AuthStore.AuthStore
            | CreditLedger.CreditLedger
            | KeyCaps.KeyCaps
            | SessionRevocations.SessionRevocations
            | ServiceInfo.ServiceInfo
          >()
        }
      }).pipe(Effect.provide(services))
    )
    const app = Handlers.toWebHandler(App.layer(Portal.routes).pipe(Layer.provide(Layer.succeedContext(seeded.services))))
    try {
      const signIn = await app.handler(
        new Request("http://localhost/api/v1/portal/session", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ apiKey: seeded.admin })
        })
      )
      const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!
      const account = await app.handler(new Request("http://localhost/api/v1/portal/account", { headers: { cookie } }))
      const { balanceUsd, transactions } = await account.json() as {
        transactions: Array<{ kind: string; amountUsd: string }>
        balanceUsd: string
      }
      expect(balanceUsd).toBe("325")
      expect(transactions.map((entry) => entry.amountUsd)).toEqual(Array.from({ length: 20 }, (_, index) => String(25 - index)))
      expect(new Set(transactions.map((entry) => entry.kind))).toEqual(new Set(["grant"]))
    } finally {
      await app.dispose()
    }
  })
})

describe("A key's restrictions changed through the portal are in the audit log under who signed in: a wallet by its account id", () => {
  it("a wallet with credit signs in, makes a key, restricts it and lifts the restriction: two key.restricted entries by wallet:evm:<address>", async () => {
    const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
    const wallet = privateKeyToAccount(generatePrivateKey())
    const accountId = Principal.walletAccountId("evm", wallet.address)
    const services = Layer.mergeAll(
      Auth.layer({ signingKey, publicOrigin: "http://localhost" }).pipe(Layer.provideMerge(AuthStore.layerMemory)),
      CreditLedger.layerMemory,
      ServiceInfo.layer({ publicOrigin: "http://localhost" })
    )
    const seeded = await Effect.runPromise(
      Effect.gen(function*() {
        yield* (yield* CreditLedger.CreditLedger).grant({ accountId, amount: Money.usd(1), reference: "seed" })
        return yield* Effect.context<
          | Auth.Auth
          | AuthStore.AuthStore
          | AuditLog.AuditLog
          | CreditLedger.CreditLedger
          | KeyCaps.KeyCaps
          | SessionRevocations.SessionRevocations
          | ServiceInfo.ServiceInfo
        >()
      }).pipe(Effect.provide(services))
    )
    const app = Handlers.toWebHandler(App.layer(Portal.routes).pipe(Layer.provide(Layer.succeedContext(seeded))))
    try {
      const request = (path: string, init: RequestInit = {}) => app.handler(new Request(`http://localhost/api/v1/portal${path}`, init))
      const challenge = await (await request(`/challenge?family=evm&address=${wallet.address}`)).json() as {
        message: string
        chainId: string
      }
      const signature = await wallet.signMessage({ message: challenge.message })
      const signIn = await request("/session", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ wallet: { address: wallet.address, message: challenge.message, signature, chainId: challenge.chainId } })
      })
      expect(signIn.status).toBe(200)
      const { csrfToken } = await signIn.json() as { csrfToken: string }
      const change = {
        "content-type": "application/json",
        cookie: signIn.headers.get("set-cookie")!.split(";")[0]!,
        "x-csrf-token": csrfToken
      }
      const made = await request("/keys", { method: "POST", headers: change, body: JSON.stringify({ description: "agent" }) })
      const { id } = await made.json() as { id: string }
      const restricted = await request("/keys", {
        method: "PATCH",
        headers: change,
        body: JSON.stringify({ id, restrictions: { operations: ["rpc:*"] } })
      })
      expect(await restricted.json()).toMatchObject({ id, restrictions: { operations: ["rpc:*"] } })
      const lifted = await request("/keys", { method: "PATCH", headers: change, body: JSON.stringify({ id, restrictions: null }) })
      expect(await lifted.json()).toMatchObject({ id, restrictions: null })
      const log = await Effect.runPromise(
        AuditLog.AuditLog.use((audit) => audit.list({ accountId, limit: 10 })).pipe(Effect.provide(Layer.succeedContext(seeded)))
      )
      expect(log.entries.map(({ action, actor, details }) => ({ action, actor, details }))).toEqual([
        { action: "key.restricted", actor: accountId, details: { keyId: id, restrictions: null } },
        { action: "key.restricted", actor: accountId, details: { keyId: id, restrictions: { operations: ["rpc:*"] } } }
      ])
    } finally {
      await app.dispose()
    }
  })
})
