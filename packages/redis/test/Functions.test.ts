import { Admission, AuthStore, CreditLedger, Money, RateLimiter } from "@tollgate/core"
import { RedisCluster, RedisServer } from "@tollgate/testkit"
import { Effect, Layer, Logger, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as AdmissionStoreRedis from "../src/AdmissionStoreRedis.ts"
import * as AuthStoreRedis from "../src/AuthStoreRedis.ts"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

// Servers of their own: these tests count commands, change ACLs and flush libraries.
const redis = await RedisServer.start()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const nano = Money.unsafeNano
let counter = 0
const fresh = () => `acct-fn-${process.pid}-${Date.now()}-${counter++}`

/** The names of the libraries loaded on a node that match the glob `pattern`. */
const libraries = async (url: string, pattern: string): Promise<Array<string>> => {
  const list = await RedisServer.command(url, "FUNCTION", "LIST", "LIBRARYNAME", pattern) as unknown as ReadonlyArray<
    ReadonlyArray<unknown>
  >
  return list.map((library) => String(library[library.indexOf("library_name") + 1])).sort()
}

/** The stores of a paid call over `target`, with the lines they log. */
const instance = (target: RedisConnection.Target, options: AdmissionStoreRedis.Options = {}) => {
  const lines: Array<string> = []
  const capture = Logger.layer([Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel} ${[message].flat().join(" ")}`)
  })])
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(
      AdmissionStoreRedis.layerRedis(options),
      AuthStoreRedis.layerRedis,
      CreditLedgerRedis.layerRedis(),
      RateLimiterRedis.layerRedis()
    )
      .pipe(Layer.provide(RedisConnection.layer(target)), Layer.provide(capture), Layer.orDie)
  )
  return { runtime, lines }
}

/** One paid call of 625 nano-USD on a fresh account funded with 10,000: its admission, settlement and balance after. */
const paidCall = (runtime: ReturnType<typeof instance>["runtime"]) =>
  runtime.runPromise(Effect.gen(function*() {
    const auth = yield* AuthStore.AuthStore
    const ledger = yield* CreditLedger.CreditLedger
    const limiter = yield* RateLimiter.RateLimiter
    const store = yield* Admission.AdmissionStore
    const accountId = fresh()
    yield* auth.insertAccount({ id: accountId, createdAt: new Date(0) })
    yield* auth.putKey({ id: "key_1", accountId, type: "INFERENCE", tier: "default", description: "functions", createdAt: new Date(0) })
    yield* ledger.grant({ accountId, amount: nano(10_000), reference: "funds" })
    const now = Date.now()
    const limit: RateLimiter.Limit = { type: "user", key: `${accountId}:fn`, hashTag: accountId, requests: { limit: 10, windowMs: 60_000 } }
    const admitted = yield* store.admit({
      now,
      accountId,
      counters: limiter.plan([limit], now).counters,
      hold: { reference: "call-1", amount: nano(625), priceVersion: "v1" }
    })
    const settled = yield* store.settle({
      now,
      capture: {
        accountId,
        reference: "call-1",
        amount: nano(625),
        usage: { sku: "text-parser", units: 1, pricePerUnit: nano(625), requestId: "call-1", executionMs: 1 }
      },
      adjustments: []
    })
    const [status] = yield* limiter.inspect([limit])
    return { admitted: admitted._tag, settled, balance: yield* ledger.balance(accountId), used: status?.requests?.used }
  }))

const servedInFull = (call: Awaited<ReturnType<typeof paidCall>>) => {
  expect(call.admitted).toBe("Admitted")
  expect(call.settled.fromUsd).toBe(625)
  expect(call.balance.usd).toBe(9_375)
  expect(call.balance.heldUsd).toBe(0)
  expect(call.used).toBe(1)
}

describe("Where Redis offers Functions, the paid path's scripts load once as a library named for their version and run by FCALL", () => {
  it("the admission, the settlement and the limiter's reading go as FCALL; the log line says Functions once", async () => {
    const { lines, runtime } = instance({ url: redis.url })
    try {
      const before = await RedisServer.scriptCalls(redis.url)
      servedInFull(await paidCall(runtime))
      const after = await RedisServer.scriptCalls(redis.url)
      // Admission, settlement and the limiter's inspection, and the ledger's own grant and balance:
      // the ledger runs its script through the same runner as the admission.
      expect(after.fcall - before.fcall).toBe(5)
      const [library] = await libraries(redis.url, "tollgate_admission_*")
      expect(library).toMatch(/^tollgate_admission_[0-9a-f]{12}$/)
      // Logged once, by the first store to start, naming its libraries.
      const chosen = lines.filter((line) => line.includes("Redis scripts run as"))
      expect(chosen).toHaveLength(1)
      expect(chosen[0]).toMatch(/^Info Redis scripts run as Functions \(FCALL\): tollgate_[a-z]+_[0-9a-f]{12}/)
    } finally {
      await runtime.dispose()
    }
  })

  it("two releases side by side (a rolling deploy) each load and call their own library", async () => {
    const current = instance({ url: redis.url })
    const other = instance({ url: redis.url }, { retentionMs: 86_400_000 })
    try {
      servedInFull(await paidCall(current.runtime))
      servedInFull(await paidCall(other.runtime))
      expect(await libraries(redis.url, "tollgate_admission_*")).toHaveLength(2)
    } finally {
      await current.runtime.dispose()
      await other.runtime.dispose()
    }
  })

  it("a Redis that lost the library (FUNCTION FLUSH, a new primary) gets it again on the next call, which is served", async () => {
    const { runtime } = instance({ url: redis.url })
    try {
      servedInFull(await paidCall(runtime))
      await RedisServer.command(redis.url, "FUNCTION", "FLUSH")
      servedInFull(await paidCall(runtime))
      expect(await libraries(redis.url, "tollgate_admission_*")).toHaveLength(1)
    } finally {
      await runtime.dispose()
    }
  })

  it("on a Redis Cluster the library is on every primary, and a paid call is served by FCALL", async () => {
    const { lines, runtime } = instance({ cluster: cluster.seeds.split(",") })
    try {
      servedInFull(await paidCall(runtime))
      const masters = await cluster.masters()
      const loaded = await Promise.all(masters.map((master) => libraries(master.url, "tollgate_admission_*")))
      expect(loaded.every((names) => names.length === 1 && names[0] === loaded[0]![0])).toBe(true)
      expect(lines.filter((line) => line.includes("Redis scripts run as"))).toHaveLength(1)
      expect(lines.find((line) => line.includes("Redis scripts run as"))).toContain("Functions (FCALL)")
    } finally {
      await runtime.dispose()
    }
  })
})

describe("Where Redis refuses Functions, or they are switched off, the scripts run as EVALSHA and a paid call is served the same", () => {
  it("an ACL user without the FUNCTION commands: EVALSHA, and the log line says so and why", async () => {
    const server = await RedisServer.start()
    try {
      await RedisServer.command(server.url, "ACL", "SETUSER", "tollgate", "on", ">secret", "~*", "&*", "+@all", "-function")
      const url = `redis://tollgate:secret@127.0.0.1:${server.port}`
      const { lines, runtime } = instance({ url })
      try {
        servedInFull(await paidCall(runtime))
        const calls = await RedisServer.scriptCalls(server.url)
        expect(calls.fcall).toBe(0)
        expect(calls.evalsha).toBeGreaterThan(0)
        expect(await libraries(server.url, "tollgate_*")).toEqual([])
        const chosen = lines.filter((line) => line.includes("Redis scripts run as"))
        expect(chosen).toHaveLength(1)
        expect(chosen[0]).toMatch(/^Warn Redis scripts run as EVALSHA, not Functions: NOPERM/)
      } finally {
        await runtime.dispose()
      }
    } finally {
      await server.stop()
    }
  })

  it("functions: false (the switch): EVALSHA, no library loaded, and the log line says Functions are switched off", async () => {
    const server = await RedisServer.start()
    try {
      const { lines, runtime } = instance({ url: server.url, functions: false })
      try {
        servedInFull(await paidCall(runtime))
        expect((await RedisServer.scriptCalls(server.url)).fcall).toBe(0)
        expect(await libraries(server.url, "tollgate_*")).toEqual([])
        expect(lines.filter((line) => line.includes("Redis scripts run as"))).toEqual([
          "Warn Redis scripts run as EVALSHA, not Functions: Functions are switched off"
        ])
      } finally {
        await runtime.dispose()
      }
    } finally {
      await server.stop()
    }
  })
})
