/**
 * The paid call's two Redis scripts (`AdmissionStoreRedis`) alone: the Redis server's CPU per
 * admission and per settlement, and how the script's time splits between the Redis commands it
 * runs and its own Lua (argument tables, the rules, the calls in and out of Redis). The scripts run
 * both ways tollgate runs them, as Redis Functions (`FCALL`, the default) and as `EVALSHA` (the
 * fallback, `RedisConnection.layer({ functions: false })`), so Functions' share is measured apart.
 * The baseline, same run and same server, is a bare script that runs the same commands with
 * constant arguments and none of the rules: what the atomic step would cost if it were free to
 * write. The call shape is the RPC route's: an API key's spend cap (none set; the key's standing
 * and abuse block were read before the body, outside the script), a fixed per-minute request
 * counter, a rolling daily credit counter, a hold, then its capture with the usage entry.
 *
 * Both steps are measured a third way: grouped as the server groups them (`AdmissionStoreRedis`
 * with `admissionGroupMs` and `settlementGroupMs`, `AccountGroups`: the admissions, or the
 * settlements, of an account that meet while one is in flight go in one call). The last line is the
 * paid call's Redis CPU as it runs (grouped admission plus grouped settlement, as Functions) against
 * its bare commands'. A second table gives each step's round trip at 1 and 50 calls in flight, one
 * script call each and grouped: what grouping adds to an admission, which its call waits for, and
 * what a response no longer waits for since it goes before its settlement is acknowledged
 * (`PaidCall.respondFirst`).
 */
import { Admission, AuthStore, CreditLedger, Money, type RateLimiter } from "@tollgate/core"
import { AdmissionStoreRedis, AuthStoreRedis, CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import * as Config from "@tollgate/server/Config"
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
const runtimeOf = (functions: boolean, groups: Pick<AdmissionStoreRedis.Options, "admissionGroupMs" | "settlementGroupMs"> = {}) =>
  ManagedRuntime.make(
    Layer.mergeAll(AdmissionStoreRedis.layerRedis(groups), CreditLedgerRedis.layerRedis(), AuthStoreRedis.layerRedis)
      .pipe(Layer.provideMerge(RedisConnection.layer({ url: server.url, functions })))
  )
// `grouped`: admissions and settlements grouped as the server runs them by default
// (`redis.admissionGroupMs`, `redis.settlementGroupMs`).
const runtimes = {
  functions: runtimeOf(true),
  evalsha: runtimeOf(false),
  grouped: runtimeOf(true, { admissionGroupMs: Config.DEFAULT_ADMISSION_GROUP_MS, settlementGroupMs: Config.DEFAULT_SETTLEMENT_GROUP_MS })
}
const stores = (runtime: ReturnType<typeof runtimeOf>) =>
  runtime.runPromise(Effect.gen(function*() {
    return {
      admission: yield* Admission.AdmissionStore,
      ledger: yield* CreditLedger.CreditLedger,
      auth: yield* AuthStore.AuthStore
    }
  }))
const viaFunctions = await stores(runtimes.functions)
const viaEvalsha = await stores(runtimes.evalsha)
const viaGroups = await stores(runtimes.grouped)
await runtimes.functions.runPromise(viaFunctions.auth.insertAccount({ id: accountId, createdAt: new Date() }))
await runtimes.functions.runPromise(viaFunctions.ledger.topUp({ accountId, amount: Money.usd(1_000_000), reference: "fund" }))

const counters = (now: number): ReadonlyArray<RateLimiter.Counter> => [
  {
    key: `rl:{${accountId}}:${accountId}:rpc:minute:${Math.floor(now / 60_000)}`,
    field: "r",
    rolling: false,
    limit: 1e9,
    amount: 1,
    windowMs: 60_000,
    bucketMs: 60_000
  },
  {
    key: `rl:{${accountId}}:${accountId}:rpc:day:c`,
    field: "c",
    rolling: true,
    limit: 1e12,
    amount: 20,
    windowMs: 86_400_000,
    bucketMs: 600_000
  }
]
type Way = keyof typeof runtimes
const storeOf = (way: Way) => ({ functions: viaFunctions, evalsha: viaEvalsha, grouped: viaGroups })[way].admission
const admit = (way: Way) => (reference: string) => {
  const now = Date.now()
  return runtimes[way].runPromise(
    storeOf(way).admit({
      now,
      accountId,
      spendKeyId: keyId,
      counters: counters(now),
      hold: { amount: price, reference, priceVersion: "2026-11-01" }
    })
  ).then((reply) => {
    // A refusal writes nothing and would be measured as a cheap admission.
    if (reply._tag !== "Admitted") throw new Error(`admission refused: ${reply._tag}`)
  })
}
const settle = (way: Way) => (reference: string) =>
  runtimes[way].runPromise(
    storeOf(way).settle({
      now: Date.now(),
      capture: {
        accountId,
        reference,
        amount: price,
        usage: {
          sku: "rpc:ethereum-mainnet",
          units: 20,
          pricePerUnit: Money.unsafeNano(625),
          notes: "1 JSON-RPC call on ethereum-mainnet",
          requestId: reference,
          executionMs: 12
        }
      },
      adjustments: [],
      spendKeyId: keyId
    })
  )

// The same commands as an admission and a settlement, in the same slot, with nothing decided.
const tag = `{${accountId}-bare}`
const bareAdmit = `
local now = ARGV[1]
redis.call('HMGET', KEYS[1], 'usd', 'held', 'stake', 'open', 'lastMs', 'seq', 'sweepAt', 'au:1', 'ah:1', 'sweptId')
redis.call('HGET', KEYS[5], ARGV[2])
redis.call('HEXISTS', KEYS[6], ARGV[2])
redis.call('HMGET', KEYS[12], 'usd', 'period', 'p', 'spent', 'x')
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
const bareKeys = ["a", "auth", "revoked", "block", "h", "r", "minute", "day", "x", "j", "u", "cap"].map((name) => `${tag}:${name}`)
const bareSha = {
  admit: String(await client.sendCommand(["SCRIPT", "LOAD", bareAdmit])),
  settle: String(await client.sendCommand(["SCRIPT", "LOAD", bareSettle]))
}
const usageJson = JSON.stringify({
  sku: "rpc:ethereum-mainnet",
  units: 20,
  pricePerUnit: 625,
  notes: "1 JSON-RPC call on ethereum-mainnet",
  requestId: "x",
  executionMs: 12
})
const bare = (script: "admit" | "settle") => (reference: string) =>
  client.sendCommand(["EVALSHA", bareSha[script], String(bareKeys.length), ...bareKeys, String(Date.now()), reference, usageJson])

const pool = async (references: ReadonlyArray<string>, task: (reference: string) => Promise<unknown>, concurrency = CONCURRENCY) => {
  let next = 0
  const worker = async () => {
    while (next < references.length) await task(references[next++]!)
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
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

const scriptCommands = ["evalsha", "eval", "fcall"]
const info = async () => {
  const text = String(await client.sendCommand(["INFO", "everything"]))
  const number = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0)
  let commandsUs = 0
  let commands = 0
  let scriptUs = 0
  let scriptCalls = 0
  for (const match of text.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
    if (scriptCommands.includes(match[1]!)) {
      scriptCalls += Number(match[2])
      scriptUs += Number(match[3])
    } else if (!["info", "config|resetstat", "script|load", "function|load"].includes(match[1]!)) {
      commands += Number(match[2])
      commandsUs += Number(match[3])
    }
  }
  return { cpuUs: (number(/used_cpu_user:([\d.]+)/) + number(/used_cpu_sys:([\d.]+)/)) * 1e6, scriptUs, scriptCalls, commandsUs, commands }
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
// Alternated round by round, so a slow spell of the machine lands on every row.
for (let round = 0; round < ROUNDS; round++) {
  const references = (way: string) => Array.from({ length: CALLS }, (_, i) => `bench-${way}-${round}-${i}`)
  const fn = references("fn")
  const sha = references("sha")
  record("tollgate admission", await measure(fn, admit("functions")))
  record("tollgate admission, EVALSHA", await measure(sha, admit("evalsha")))
  record("bare admission commands", await measure(fn, bare("admit")))
  record("tollgate settlement", await measure(fn, settle("functions")))
  record("tollgate settlement, EVALSHA", await measure(sha, settle("evalsha")))
  record("bare settlement commands", await measure(fn, bare("settle")))
  const grouped = references("grouped")
  record("tollgate admission, grouped", await measure(grouped, admit("grouped")))
  record("tollgate settlement, grouped", await measure(grouped, settle("grouped")))
}

// Each step's round trip, alone and among 50 in flight, one script call each and grouped.
const LATENCY_CALLS = 2_000
const roundTrips: Array<Record<string, string>> = []
for (const [name, way] of [["one script call each", "functions"], ["grouped", "grouped"]] as const) {
  const admissions: Record<string, string> = { step: `admission, ${name}` }
  const settlements: Record<string, string> = { step: `settlement, ${name}` }
  for (const concurrency of [1, CONCURRENCY]) {
    const references = Array.from({ length: LATENCY_CALLS }, (_, i) => `latency-${way}-${concurrency}-${i}`)
    admissions[`p50 ms, ${concurrency} in flight`] = (await medianMs(references, admit(way), concurrency)).toFixed(3)
    settlements[`p50 ms, ${concurrency} in flight`] = (await medianMs(references, settle(way), concurrency)).toFixed(3)
  }
  roundTrips.push(admissions, settlements)
}
const row = (name: string): Sample => {
  const list = samples.get(name)!
  return {
    cpuUs: median(list.map((sample) => sample.cpuUs)),
    scriptUs: median(list.map((sample) => sample.scriptUs)),
    commandsUs: median(list.map((sample) => sample.commandsUs)),
    commands: median(list.map((sample) => sample.commands)),
    scriptCalls: median(list.map((sample) => sample.scriptCalls))
  }
}
const bareOf = (name: string) => name.includes("admission") ? "bare admission commands" : "bare settlement commands"
table([...samples.keys()].map((name) => {
  const each = row(name)
  return {
    script: name,
    "Redis CPU us/call": each.cpuUs.toFixed(1),
    "script us/call": each.scriptUs.toFixed(1),
    "of which commands": each.commandsUs.toFixed(1),
    "of which Lua": (each.scriptUs - each.commandsUs).toFixed(1),
    "commands/call": each.commands.toFixed(1),
    "script calls/call": each.scriptCalls.toFixed(3),
    "CPU vs bare": `${(each.cpuUs / row(bareOf(name)).cpuUs).toFixed(2)}x`
  }
}))
console.log(`\n${CALLS} calls per row and round, ${CONCURRENCY} at once from one client, median of ${ROUNDS} rounds.`)
console.log(
  `\nEach step's round trip (a call waits for its admission; its response no longer waits for its settlement), ${LATENCY_CALLS} steps per cell:`
)
table(roundTrips)
const paid = (admission: string, settlement: string) => {
  const a = row(admission)
  const b = row(settlement)
  return { cpuUs: a.cpuUs + b.cpuUs, commands: a.commands + b.commands }
}
const bareCall = paid("bare admission commands", "bare settlement commands")
const evalshaCall = paid("tollgate admission, EVALSHA", "tollgate settlement, EVALSHA")
const ungroupedCall = paid("tollgate admission", "tollgate settlement")
const settlementsGroupedCall = paid("tollgate admission", "tollgate settlement, grouped")
const paidCall = paid("tollgate admission, grouped", "tollgate settlement, grouped")
console.log(
  `\nRedis commands per paid call: ${paidCall.commands.toFixed(1)} grouped, ${
    ungroupedCall.commands.toFixed(1)
  } one script call per step (bare ${bareCall.commands.toFixed(1)})`
)
console.log(
  `With EVALSHA instead of Functions, one script call per step: ${evalshaCall.cpuUs.toFixed(1)} us, ${
    (evalshaCall.cpuUs / bareCall.cpuUs).toFixed(2)
  }x its bare commands`
)
console.log(
  `With Functions, one script call per step: ${ungroupedCall.cpuUs.toFixed(1)} us, ${
    (ungroupedCall.cpuUs / bareCall.cpuUs).toFixed(2)
  }x its bare commands`
)
console.log(
  `With Functions, settlements grouped, one call per admission: ${settlementsGroupedCall.cpuUs.toFixed(1)} us, ${
    (settlementsGroupedCall.cpuUs / bareCall.cpuUs).toFixed(2)
  }x its bare commands`
)
console.log(`Redis CPU per paid call: ${paidCall.cpuUs.toFixed(1)} us, ${(paidCall.cpuUs / bareCall.cpuUs).toFixed(2)}x its bare commands`)

await client.quit()
await runtimes.functions.dispose()
await runtimes.evalsha.dispose()
await runtimes.grouped.dispose()
await server.stop()
