/**
 * The credit ledger: hold + capture pairs per second (memory and Redis) against the least a
 * ledger could do (memory: a Map updated in place; Redis: the same two round trips through the
 * same client, each a Lua script of bare HINCRBYs without the checks, the journal or the usage
 * entry), and usage-history page latency at 1k and 1M entries against a bare XREVRANGE / array
 * slice of the same page. Target: page latency flat from 1k to 1M.
 */
import { NodeRedis } from "@effect/platform-node"
import { CreditLedger, Money } from "@tollgate/core"
import { CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { Redis } from "effect/persistence"
import { createClient } from "redis"
import { table } from "./Harness.ts"

const PAIRS = Number(process.env["LEDGER_PAIRS"] ?? 20_000)
const LARGE = Number(process.env["LEDGER_LARGE"] ?? 1_000_000)
const CONCURRENCY = 64
const ACCOUNTS = 16
const price = Money.unsafeNano(10_000_000)

const server = await RedisServer.start()
const client = createClient({ url: server.url })
await client.connect()

const memoryRuntime = ManagedRuntime.make(CreditLedger.layerMemory)
const redisRuntime = ManagedRuntime.make(CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url: server.url }))))
const rawRuntime = ManagedRuntime.make(NodeRedis.layer({ url: server.url }))
const raw = await rawRuntime.runPromise(Effect.service(Redis.Redis))
const holdBare = raw.eval(Redis.script((key: string, amount: number) => [key, amount], {
  numberOfKeys: 1,
  lua: "return redis.call('HINCRBY', KEYS[1], 'held', ARGV[1])"
}))
const captureBare = raw.eval(Redis.script((key: string, amount: number) => [key, amount], {
  numberOfKeys: 1,
  lua: "redis.call('HINCRBY', KEYS[1], 'held', -ARGV[1]); return redis.call('HINCRBY', KEYS[1], 'usd', -ARGV[1])"
}))
const ledgers = {
  memory: await memoryRuntime.runPromise(Effect.service(CreditLedger.CreditLedger)),
  redis: await redisRuntime.runPromise(Effect.service(CreditLedger.CreditLedger))
}

const pool = async (count: number, task: (i: number) => Promise<unknown>) => {
  let next = 0
  const worker = async () => {
    while (next < count) await task(next++)
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

const timed = async (count: number, task: (i: number) => Promise<unknown>) => {
  const started = performance.now()
  await pool(count, task)
  return count / ((performance.now() - started) / 1000)
}

const usage = (reference: string): CreditLedger.UsageDetails => ({
  sku: "text-parser",
  units: 1,
  pricePerUnit: price,
  requestId: reference,
  executionMs: 1
})

const holdCapture = (ledger: CreditLedger.CreditLedger["Service"], run: string, tag: string) => (i: number) => {
  const accountId = `bench-${run}-${i % ACCOUNTS}`
  const reference = `${tag}-${i}`
  return Effect.runPromise(Effect.andThen(
    ledger.hold({ accountId, amount: price, reference, priceVersion: "v" }),
    ledger.capture({ accountId, reference, amount: price, usage: usage(reference) })
  ))
}

const fund = async (ledger: CreditLedger.CreditLedger["Service"], run: string) => {
  for (let a = 0; a < ACCOUNTS; a++) {
    await Effect.runPromise(ledger.topUp({ accountId: `bench-${run}-${a}`, amount: Money.usd(1_000_000), reference: "fund" }))
  }
}

const throughput: Array<Record<string, string | number>> = []
{
  const balances = new Map<string, { usd: number; held: number }>()
  const baseline = await timed(PAIRS * 5, async (i) => {
    const key = `a${i % ACCOUNTS}`
    const account = balances.get(key) ?? { usd: 1e15, held: 0 }
    balances.set(key, account)
    account.held += price
    await Promise.resolve()
    account.held -= price
    account.usd -= price
  })
  await fund(ledgers.memory, "m")
  await pool(2_000, holdCapture(ledgers.memory, "m", "warm"))
  const tollgate = await timed(PAIRS * 5, holdCapture(ledgers.memory, "m", "run"))
  throughput.push({
    store: "memory",
    "Map baseline pairs/s": Math.round(baseline),
    "tollgate pairs/s": Math.round(tollgate),
    ratio: (tollgate / baseline).toFixed(3)
  })
}
{
  const baseline = await timed(PAIRS, (i) => {
    const key = `base:{a${i % ACCOUNTS}}`
    return Effect.runPromise(Effect.andThen(holdBare(key, price), captureBare(key, price)))
  })
  await fund(ledgers.redis, "r")
  await pool(2_000, holdCapture(ledgers.redis, "r", "warm"))
  const tollgate = await timed(PAIRS, holdCapture(ledgers.redis, "r", "run"))
  throughput.push({
    store: "redis",
    "Map baseline pairs/s": "-",
    "HINCRBY baseline pairs/s": Math.round(baseline),
    "tollgate pairs/s": Math.round(tollgate),
    ratio: (tollgate / baseline).toFixed(2)
  })
}
console.log("hold + capture pairs per second (64 in flight, 16 accounts)\n")
table(throughput.map((row) => ({
  store: row["store"]!,
  "baseline pairs/s": row["HINCRBY baseline pairs/s"] ?? row["Map baseline pairs/s"]!,
  "tollgate pairs/s": row["tollgate pairs/s"]!,
  "tollgate / baseline": row["ratio"]!
})))

/** Appends `count` usage entries to one account: through the ledger for memory, XADD for Redis. */
const seed = async (store: "memory" | "redis", accountId: string, count: number) => {
  if (store === "memory") {
    const ledger = ledgers.memory
    await Effect.runPromise(ledger.topUp({ accountId, amount: Money.usd(1_000_000), reference: "fund" }))
    for (let i = 0; i < count; i++) {
      const reference = `s${i}`
      await Effect.runPromise(Effect.andThen(
        ledger.hold({ accountId, amount: price, reference, priceVersion: "v" }),
        ledger.capture({ accountId, reference, amount: price, usage: usage(reference) })
      ))
    }
    return
  }
  const key = `tg:cl:{${accountId}}:u`
  const start = Date.now() - count
  for (let i = 0; i < count; i += 10_000) {
    const batch = client.multi()
    for (let j = i; j < Math.min(count, i + 10_000); j++) {
      batch.xAdd(key, `${start + j}-1`, { c: "USD", a: String(price), t: String(start + j), v: JSON.stringify(usage(`s${j}`)) })
    }
    await batch.exec()
  }
}

const median = (samples: Array<number>) => samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)]!

const measure = async (iterations: number, task: () => Promise<unknown>) => {
  for (let i = 0; i < 20; i++) await task()
  const samples: Array<number> = []
  for (let i = 0; i < iterations; i++) {
    const started = performance.now()
    await task()
    samples.push(performance.now() - started)
  }
  return median(samples)
}

const pages: Array<Record<string, string | number>> = []
for (const size of [1_000, LARGE]) {
  for (const store of ["memory", "redis"] as const) {
    const accountId = `history-${store}-${size}`
    await seed(store, accountId, size)
    const ledger = ledgers[store]
    const mid = store === "redis"
      ? `${Date.now() - Math.floor(size / 2)}-1`
      : (await Effect.runPromise(ledger.usageOffset(accountId, { order: "asc", limit: 1, offset: size / 2 }))).entries[0]!.id
    const plain = store === "memory" ? Array.from({ length: size }, (_, i) => ({ id: `${i}` })) : []
    const baseline = store === "memory"
      ? await measure(200, async () => plain.slice(size / 2, size / 2 + 201))
      : await measure(200, () => client.xRevRange(`tg:cl:{${accountId}}:u`, `(${mid}`, "-", { COUNT: 201 }))
    const first = await measure(200, () => Effect.runPromise(ledger.usage(accountId, { order: "desc", limit: 200 })))
    const deep = await measure(200, () => Effect.runPromise(ledger.usage(accountId, { order: "desc", limit: 200, after: mid })))
    pages.push({
      store,
      entries: size.toLocaleString("en-US"),
      "baseline ms": baseline.toFixed(3),
      "first page ms": first.toFixed(3),
      "middle page ms": deep.toFixed(3),
      "middle / baseline": (deep / baseline).toFixed(1)
    })
  }
}
console.log("\nusage-history page of 200 (median latency)\n")
table(pages)

await client.quit()
await rawRuntime.dispose()
await memoryRuntime.dispose()
await redisRuntime.dispose()
await server.stop()
