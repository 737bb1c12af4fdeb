/**
 * The paid call's two Redis scripts (`AdmissionStoreRedis`) alone: the Redis server's CPU per
 * admission and per settlement, and how the script's time splits between the Redis commands it
 * runs and its own Lua (argument tables, the rules, the calls in and out of Redis). The baseline,
 * same run and same server, is a bare script that runs the same commands with constant arguments
 * and none of the rules: what the atomic step would cost if it were free to write. The call shape
 * is the RPC route's: an API key's standing and abuse block, a fixed per-minute request counter, a
 * rolling daily credit counter, a hold, then its capture with the usage entry.
 *
 * The settlement is measured twice: one script call per settlement, and grouped as the server
 * groups them (`AdmissionStoreRedis` with `settlementGroupMs`, `SettlementGroups`: the settlements
 * of an account that meet while one is in flight go in one call). The last line is the paid
 * call's Redis CPU as it runs (admission plus grouped settlement) against its bare commands. A
 * second table gives a settlement's round trip at 1 and 50 calls in flight: what a response no
 * longer waits for since it goes before its settlement is acknowledged (`PaidCall.respondFirst`).
 */
import { Admission, AuthStore, CreditLedger, Money, type RateLimiter } from "@tollgate/core"
import { AbuseGuardRedis, AdmissionStoreRedis, AuthStoreRedis, CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createClient } from "redis"
import { table } from "./Harness.ts"

const CALLS = Number(process.env["ADMISSION_CALLS"] ?? 20_000)
const CONCURRENCY = 50
const ROUNDS = 3
const accountId = "acct_bench"
const keyId = "key_bench"
const price = Money.unsafeNano(12_500)

const server = await RedisServer.start()
const client = createClient({ url: server.url })
await client.connect()
const runtime = ManagedRuntime.make(
  Layer.mergeAll(AdmissionStoreRedis.layerRedis(), CreditLedgerRedis.layerRedis(), AuthStoreRedis.layerRedis)
    .pipe(Layer.provideMerge(RedisConnection.layer({ url: server.url })))
)
// The same store with settlements grouped, as the server runs it (`redis.settlementGroupMs`).
const groupedRuntime = ManagedRuntime.make(
  AdmissionStoreRedis.layerRedis({ settlementGroupMs: 2 }).pipe(Layer.provide(RedisConnection.layer({ url: server.url })))
)
const groupedAdmission = await groupedRuntime.runPromise(Effect.gen(function*() {
  return yield* Admission.AdmissionStore
}))
const { admission, ledger, auth } = await runtime.runPromise(Effect.gen(function*() {
  return {
    admission: yield* Admission.AdmissionStore,
    ledger: yield* CreditLedger.CreditLedger,
    auth: yield* AuthStore.AuthStore
  }
}))
await runtime.runPromise(auth.insertAccount({ id: accountId, createdAt: new Date() }))
await runtime.runPromise(ledger.topUp({ accountId, amount: Money.usd(1_000_000), reference: "fund" }))

const counters = (now: number): ReadonlyArray<RateLimiter.Counter> => [
  { key: `rl:{${accountId}}:${accountId}:rpc:minute:${Math.floor(now / 60_000)}`, field: "r", rolling: false, limit: 1e9, amount: 1, windowMs: 60_000, bucketMs: 60_000 },
  { key: `rl:{${accountId}}:${accountId}:rpc:day:c`, field: "c", rolling: true, limit: 1e12, amount: 20, windowMs: 86_400_000, bucketMs: 600_000 }
]
const admit = (reference: string) => {
  const now = Date.now()
  return runtime.runPromise(admission.admit({
    now,
    accountId,
    keyId,
    abuseBlockKey: AbuseGuardRedis.blockKey(`key:{${accountId}}:${keyId}`),
    counters: counters(now),
    hold: { amount: price, reference, priceVersion: "2026-11-01" }
  })).then((reply) => {
    // A refusal writes nothing and would be measured as a cheap admission.
    if (reply._tag !== "Admitted") throw new Error(`admission refused: ${reply._tag}`)
  })
}
const settleOn = (run: (effect: Effect.Effect<CreditLedger.Settlement, unknown>) => Promise<unknown>, store: typeof admission) => (reference: string) =>
  run(store.settle({
    now: Date.now(),
    capture: {
      accountId,
      reference,
      amount: price,
      usage: { sku: "rpc:ethereum-mainnet", units: 20, pricePerUnit: Money.unsafeNano(625), notes: "1 JSON-RPC call on ethereum-mainnet", requestId: reference, executionMs: 12 }
    },
    adjustments: []
  }))
const settle = settleOn((effect) => runtime.runPromise(effect), admission)
const settleGrouped = settleOn((effect) => groupedRuntime.runPromise(effect), groupedAdmission)

// The same commands as an admission and a settlement, in the same slot, with nothing decided.
const tag = `{${accountId}-bare}`
const bareAdmit = `
local now = ARGV[1]
redis.call('HMGET', KEYS[1], 'usd', 'held', 'stake', 'open', 'lastMs', 'seq', 'sweepAt', 'au:1', 'ah:1', 'sweptId')
redis.call('MGET', KEYS[2], KEYS[3])
redis.call('PTTL', KEYS[4])
redis.call('HGET', KEYS[5], ARGV[2])
redis.call('HEXISTS', KEYS[6], ARGV[2])
redis.call('HINCRBY', KEYS[7], 'r', '1')
redis.call('HGETALL', KEYS[8])
redis.call('HINCRBY', KEYS[8], '2994', '20')
redis.call('HSET', KEYS[5], ARGV[2], '{"s":"open","a":"12500","fa":"0","fu":"12500","d":"20419","x":"' .. now .. '","v":"2026-11-01"}')
redis.call('ZADD', KEYS[9], now, ARGV[2])
redis.call('XADD', KEYS[10], 'MINID', '~', '0', '*', 'k', 'hold', 'r', ARGV[2], 'c', 'USD', 'd', '0', 'h', '12500')
redis.call('HSET', KEYS[1], 'held', now, 'open', '1', 'lastMs', now, 'seq', '1', 'sweptId', now)
return 1`
const bareSettle = `
local now = ARGV[1]
redis.call('HMGET', KEYS[1], 'usd', 'held', 'stake', 'open', 'lastMs', 'seq', 'sweepAt', 'au:1', 'ah:1', 'sweptId')
redis.call('HGET', KEYS[5], ARGV[2])
redis.call('HSET', KEYS[5], ARGV[2], '{"s":"captured","a":"12500","fa":"0","fu":"12500","d":"20419","x":"' .. now .. '","v":"2026-11-01","cfa":"0","cfu":"12500","f":"1"}')
redis.call('ZADD', KEYS[9], now, ARGV[2])
redis.call('XADD', KEYS[10], 'MINID', '~', '0', '*', 'k', 'capture', 'r', ARGV[2], 'c', 'USD', 'd', '-12500', 'h', '-12500')
redis.call('XADD', KEYS[11], 'MINID', '~', '0', '*', 'c', 'USD', 'a', '12500', 't', now, 'v', ARGV[3])
redis.call('HSET', KEYS[1], 'held', now, 'usd', now, 'open', '0', 'lastMs', now, 'seq', '2', 'sweptId', now)
return 1`
const bareKeys = ["a", "auth", "revoked", "block", "h", "r", "minute", "day", "x", "j", "u"].map((name) => `${tag}:${name}`)
const bareSha = {
  admit: String(await client.sendCommand(["SCRIPT", "LOAD", bareAdmit])),
  settle: String(await client.sendCommand(["SCRIPT", "LOAD", bareSettle]))
}
const usageJson = JSON.stringify({ sku: "rpc:ethereum-mainnet", units: 20, pricePerUnit: 625, notes: "1 JSON-RPC call on ethereum-mainnet", requestId: "x", executionMs: 12 })
const bare = (script: "admit" | "settle") => (reference: string) =>
  client.sendCommand(["EVALSHA", bareSha[script], String(bareKeys.length), ...bareKeys, String(Date.now()), reference, usageJson])

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const pool = async (references: ReadonlyArray<string>, task: (reference: string) => Promise<unknown>, concurrency = CONCURRENCY) => {
  let next = 0
  const worker = async () => {
    while (next < references.length) await task(references[next++]!)
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
}

/** The median time from sending a task to its answer, in ms, `concurrency` at once. */
const medianMs = async (references: ReadonlyArray<string>, task: (reference: string) => Promise<unknown>, concurrency: number) => {
  const times: Array<number> = []
  await pool(references, async (reference) => {
    const started = performance.now()
    await task(reference)
    times.push(performance.now() - started)
  }, concurrency)
  return median(times)
}

const info = async () => {
  const text = String(await client.sendCommand(["INFO", "everything"]))
  const number = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0)
  let commandsUs = 0
  let commands = 0
  for (const match of text.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
    if (!["evalsha", "eval", "info", "config|resetstat", "script|load"].includes(match[1]!)) {
      commands += Number(match[2])
      commandsUs += Number(match[3])
    }
  }
  return {
    cpuUs: (number(/used_cpu_user:([\d.]+)/) + number(/used_cpu_sys:([\d.]+)/)) * 1e6,
    scriptUs: number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/),
    scriptCalls: number(/cmdstat_evalsha:calls=(\d+)/),
    commandsUs,
    commands
  }
}

interface Sample {
  readonly cpuUs: number
  readonly scriptUs: number
  readonly commandsUs: number
  readonly commands: number
  readonly scriptCalls: number
}

/** Redis's CPU, script time and command time per call over one batch of calls. */
const measure = async (references: ReadonlyArray<string>, task: (reference: string) => Promise<unknown>): Promise<Sample> => {
  await client.sendCommand(["CONFIG", "RESETSTAT"])
  const before = await info()
  await pool(references, task)
  const after = await info()
  const per = (value: number) => value / references.length
  return {
    cpuUs: per(after.cpuUs - before.cpuUs),
    scriptUs: per(after.scriptUs),
    commandsUs: per(after.commandsUs),
    commands: per(after.commands),
    scriptCalls: per(after.scriptCalls)
  }
}

const samples = new Map<string, Array<Sample>>()
const record = (name: string, sample: Sample) => samples.set(name, [...(samples.get(name) ?? []), sample])
// Alternated round by round, so a slow spell of the machine lands on both.
for (let round = 0; round < ROUNDS; round++) {
  const references = Array.from({ length: CALLS }, (_, i) => `bench-${round}-${i}`)
  record("tollgate admission", await measure(references, admit))
  record("bare admission commands", await measure(references, bare("admit")))
  record("tollgate settlement", await measure(references, settle))
  record("bare settlement commands", await measure(references, bare("settle")))
  const more = references.map((reference) => `${reference}-grouped`)
  await pool(more, admit)
  record("tollgate settlement, grouped", await measure(more, settleGrouped))
}

// A settlement's round trip, alone and among 50 in flight, one script call each and grouped.
const LATENCY_CALLS = 2_000
const roundTrips: Array<Record<string, string>> = []
for (const [name, task] of [["one call per settlement", settle], ["grouped", settleGrouped]] as const) {
  const row: Record<string, string> = { settlement: name }
  for (const concurrency of [1, CONCURRENCY]) {
    const references = Array.from({ length: LATENCY_CALLS }, (_, i) => `latency-${name}-${concurrency}-${i}`)
    await pool(references, admit)
    row[`p50 ms, ${concurrency} in flight`] = (await medianMs(references, task, concurrency)).toFixed(3)
  }
  roundTrips.push(row)
}

const row = (name: string) => {
  const list = samples.get(name)!
  return {
    cpuUs: median(list.map((sample) => sample.cpuUs)),
    scriptUs: median(list.map((sample) => sample.scriptUs)),
    commandsUs: median(list.map((sample) => sample.commandsUs)),
    commands: median(list.map((sample) => sample.commands)),
    scriptCalls: median(list.map((sample) => sample.scriptCalls))
  }
}
const names = ["tollgate admission", "bare admission commands", "tollgate settlement", "bare settlement commands", "tollgate settlement, grouped"]
const rows = Object.fromEntries(names.map((name) => [name, row(name)]))
const bareOf = (name: string) => name.includes("admission") ? rows["bare admission commands"]! : rows["bare settlement commands"]!
table(names.map((name) => {
  const each = rows[name]!
  return {
    script: name,
    "Redis CPU us/call": each.cpuUs.toFixed(1),
    "script us/call": each.scriptUs.toFixed(1),
    "of which commands": each.commandsUs.toFixed(1),
    "of which Lua": (each.scriptUs - each.commandsUs).toFixed(1),
    "commands/call": each.commands.toFixed(2),
    "script calls/call": each.scriptCalls.toFixed(3),
    "CPU vs bare": `${(each.cpuUs / bareOf(name).cpuUs).toFixed(2)}x`
  }
}))
console.log(`\n${CALLS} calls per row and round, ${CONCURRENCY} at once from one client, median of ${ROUNDS} rounds.`)
console.log("\nA settlement's round trip (what a response no longer waits for), " + `${LATENCY_CALLS} settlements per cell:`)
table(roundTrips)
const bareCall = rows["bare admission commands"]!.cpuUs + rows["bare settlement commands"]!.cpuUs
const perCall = (settlement: string) => rows["tollgate admission"]!.cpuUs + rows[settlement]!.cpuUs
console.log(`\nOne script call per settlement: ${perCall("tollgate settlement").toFixed(1)} us, ${(perCall("tollgate settlement") / bareCall).toFixed(2)}x its bare commands`)
console.log(`Redis CPU per paid call: ${perCall("tollgate settlement, grouped").toFixed(0)} us, ${(perCall("tollgate settlement, grouped") / bareCall).toFixed(2)}x its bare commands`)

await client.quit()
await runtime.dispose()
await groupedRuntime.dispose()
await server.stop()
