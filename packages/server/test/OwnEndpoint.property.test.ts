import { RedisCluster, RedisServer } from "@tollgate/testkit"
import { Effect } from "effect"
import * as fc from "fast-check"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll, describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"
import * as Tollgate from "../src/Tollgate.ts"

/** 1,000 nano-USD a unit. */
const UNIT_NANO = 1_000

interface Body {
  readonly max: number
  readonly use: number
  readonly fail?: boolean
}

const body = {
  "~standard": {
    validate: (value: unknown) => {
      const { fail, max, use } = (value ?? {}) as Record<string, unknown>
      return typeof max === "number" && typeof use === "number"
        ? { value: { max, use, fail: fail === true } satisfies Body }
        : { issues: [{ message: "Required", path: ["max"] }] }
    }
  }
}

const price = { usdPerUnit: "0.000001", maxUnits: (request: Body) => request.max }

/** Limits far above what a run sends, so that no call is refused for its rate. */
const kind = { name: "property", rates: { default: { requests: 100_000 } } }

const endpoints = [
  Tollgate.endpoint({
    path: "/v1/units",
    sku: "units",
    kind,
    price,
    body,
    handle: async (call) => {
      if (call.body.fail) throw new Error("the handler failed")
      return { json: { used: call.body.use }, usage: { units: call.body.use } }
    }
  }),
  Tollgate.endpoint({
    path: "/v1/stream",
    sku: "stream",
    kind,
    price,
    body,
    handle: async (call) => ({
      stream: (async function*() {
        for (let i = 0; i < call.body.use; i++) {
          await sleep(1)
          if (call.body.fail && i === 1) throw new Error("the stream broke")
          yield { data: "x", usage: { units: 1 } }
        }
      })()
    })
  })
]

/** One call of a run: what it asks and how the client behaves. */
type Command =
  | { readonly _tag: "Json"; readonly max: number; readonly use: number; readonly fail: boolean }
  | { readonly _tag: "Stream"; readonly max: number; readonly use: number; readonly fail: boolean; readonly cutAfter: number | undefined }
  | { readonly _tag: "Invalid" }
  | { readonly _tag: "Anonymous" }

const sized = fc.integer({ min: 1, max: 40 }).chain((max) =>
  fc.record({ max: fc.constant(max), use: fc.integer({ min: 0, max }), fail: fc.boolean() })
)

const command: fc.Arbitrary<Command> = fc.oneof(
  sized.map((call) => ({ _tag: "Json" as const, ...call })),
  fc.tuple(sized, fc.option(fc.integer({ min: 1, max: 10 }), { nil: undefined })).map(([call, cutAfter]) => ({
    _tag: "Stream" as const,
    ...call,
    cutAfter
  })),
  fc.constant({ _tag: "Invalid" as const }),
  fc.constant({ _tag: "Anonymous" as const })
)

const nano = (usd: string): number => {
  const [whole, fraction = ""] = usd.split(".")
  return Number(whole) * 1_000_000_000 + Number(fraction.padEnd(9, "0"))
}

interface Store {
  readonly name: string
  readonly env: Record<string, string>
}

const redis = await RedisServer.acquire()
const cluster = await RedisCluster.start()
afterAll(async () => {
  await redis.stop()
  await cluster.stop()
})

const stores: ReadonlyArray<Store> = [
  { name: "memory", env: { TOLLGATE_STORE: "memory" } },
  { name: "Redis", env: { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_URL: redis.url } },
  { name: "Redis Cluster", env: { TOLLGATE_STORE: "redis", TOLLGATE_REDIS_CLUSTER: cluster.seeds } }
]

describe.each(stores)(
  "Own endpoints on $name: the balance is the start minus the captured charges, and a refused call consumes nothing",
  ({ env }) => {
    it("for any sequence of calls with usage up to the quote, failures and disconnects", async () => {
      const config = await Effect.runPromise(Config.load({ ...env, TOLLGATE_LOG_LEVEL: "none" }))
      const tollgate = await Tollgate.make({ config, endpoints, announce: false })
      const key = tollgate.devCredentials!.inferenceKey
      const adminKey = tollgate.devCredentials!.adminKey
      const api = (path: string, apiKey = key) =>
        tollgate.fetch(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${apiKey}` } }))

      /** The balance once no hold is open: a cut stream settles after its response ended. */
      const balance = async (): Promise<number> => {
        for (;;) {
          const { balances } = await (await api("/api/v1/api_keys/rate_limits")).json() as { balances: { usd: string; heldUsd: string } }
          if (nano(balances.heldUsd) === 0) return nano(balances.usd)
          await sleep(5)
        }
      }
      const charged = async (): Promise<Map<string, { readonly sku: string; readonly unit: number; readonly amount: number }>> => {
        const { data } = await (await api("/api/v1/billing/usage-history?limit=500", adminKey)).json() as {
          data: ReadonlyArray<{ sku: string; unit: number; amount: number; inferenceDetails: { requestId: string } }>
        }
        return new Map(data.map((entry) => [entry.inferenceDetails.requestId, entry]))
      }

      /** What a call answered, what arrived, and the most it may be charged for (units). */
      const call = async (
        command: Command
      ): Promise<{ readonly requestId: string; readonly status: number; readonly received: number; readonly most: number }> => {
        const headers: Record<string, string> = { "content-type": "application/json" }
        if (command._tag !== "Anonymous") headers["authorization"] = `Bearer ${key}`
        const path = command._tag === "Stream" ? "/v1/stream" : "/v1/units"
        const payload = command._tag === "Json" || command._tag === "Stream"
          ? { max: command.max, use: command.use, fail: command.fail }
          : command._tag === "Invalid"
          ? { use: 1 }
          : { max: 1, use: 1 }
        const response = await tollgate.fetch(
          new Request(`http://localhost${path}`, { method: "POST", headers, body: JSON.stringify(payload) })
        )
        const requestId = response.headers.get("x-request-id")!
        if (command._tag !== "Stream" || response.status !== 200) {
          await response.arrayBuffer()
          // A JSON call is charged exactly the usage it reported.
          const used = command._tag === "Json" ? command.use : 0
          return { requestId, status: response.status, received: used, most: used }
        }
        const reader = response.body!.getReader()
        let received = 0
        try {
          for (;;) {
            if (command.cutAfter !== undefined && received >= command.cutAfter) {
              await reader.cancel()
              break
            }
            const { done, value } = await reader.read()
            if (done) break
            received += value.length
          }
        } catch {
          // The stream broke off server-side: what arrived is what was sent.
        }
        // The server may have sent a little more than the client read before it went away; a stream
        // that broke sent its first chunk only.
        return { requestId, status: 200, received, most: command.fail ? Math.min(command.use, 1) : command.use }
      }

      try {
        await fc.assert(
          fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 8 }), async (commands) => {
            const start = await balance()
            const outcomes = []
            for (const command of commands) outcomes.push(await call(command))
            const after = await balance()
            const entries = await charged()
            let captured = 0
            for (const outcome of outcomes) {
              const entry = entries.get(outcome.requestId)
              if (outcome.status !== 200) {
                // A refused or failed call left no usage and took nothing.
                expect(entry).toBeUndefined()
                continue
              }
              const amount = entry === undefined ? 0 : Math.round(entry.amount * 1_000_000_000)
              // What was sent, never less than what arrived; so never more than the quote.
              expect(amount).toBeLessThanOrEqual(outcome.most * UNIT_NANO)
              expect(amount).toBeGreaterThanOrEqual(outcome.received * UNIT_NANO)
              captured += amount
            }
            expect(start - after).toBe(captured)
          }),
          { numRuns: 12 }
        )
      } finally {
        await tollgate.dispose()
      }
    }, 120_000)
  }
)
