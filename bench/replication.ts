/**
 * `pnpm bench replication`: what waiting for a replica costs a ledger write. A Redis master with one
 * replica; the same credit (`CreditLedger.grant`, one Lua script, the shape of every ledger write)
 * with and without `replicaAcknowledgment` (`WAIT 1` after the script, on the master's connection),
 * one at a time (the latency a caller sees) and 50 at a time (what `WAIT` holding the shared
 * connection does to everything queued behind it). This is the measurement behind waiting after
 * credits only (`TOLLGATE_REDIS_WAIT_REPLICAS`), never after each paid call's settlement.
 */
import { CreditLedger, Money } from "@tollgate/core"
import { CreditLedgerRedis, RedisConnection } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { table } from "./Harness.ts"

const WRITES = 4_000
const CONCURRENT = 50

const { primary: master, replica } = await RedisServer.startReplicated()

const ledgerWith = async (acknowledgment: RedisConnection.ReplicaAcknowledgment | undefined) => {
  const runtime = ManagedRuntime.make(
    CreditLedgerRedis.layerRedis({ replicaAcknowledgment: acknowledgment }).pipe(Layer.provide(RedisConnection.layer({ url: master.url })))
  )
  return { runtime, ledger: await runtime.runPromise(Effect.service(CreditLedger.CreditLedger)) }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!

/** `count` grants, `concurrency` at a time: writes per second and the latency of each. */
const run = async (ledger: CreditLedger.CreditLedger["Service"], tag: string, count: number, concurrency: number) => {
  const latencies: Array<number> = []
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const i = next++
      const begun = performance.now()
      await Effect.runPromise(
        ledger.grant({ accountId: `bench-${tag}-${i % 64}`, amount: Money.unsafeNano(1_000), reference: `${tag}-${i}` })
      )
      latencies.push(performance.now() - begun)
    }
  }))
  const seconds = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return { perSecond: count / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) }
}

const variants = [
  { name: "no wait (default)", acknowledgment: undefined },
  { name: "WAIT 1 replica", acknowledgment: { replicas: 1, timeoutMs: 1_000 } }
] as const
const rows: Array<Record<string, string | number>> = []
const results = new Map<string, Awaited<ReturnType<typeof run>>>()
for (const concurrency of [1, CONCURRENT]) {
  for (const variant of variants) {
    const { ledger, runtime } = await ledgerWith(variant.acknowledgment)
    const tag = `${variant.acknowledgment === undefined ? "plain" : "wait"}-${concurrency}`
    await run(ledger, `${tag}-warm`, 500, concurrency)
    const result = await run(ledger, tag, concurrency === 1 ? WRITES / 4 : WRITES, concurrency)
    results.set(`${variant.name}@${concurrency}`, result)
    await runtime.dispose()
  }
  const plain = results.get(`${variants[0].name}@${concurrency}`)!
  for (const variant of variants) {
    const result = results.get(`${variant.name}@${concurrency}`)!
    rows.push({
      "in flight": concurrency,
      variant: variant.name,
      "writes/s": Math.round(result.perSecond),
      "vs no wait": `${(result.perSecond / plain.perSecond).toFixed(2)}x`,
      "p50 ms": result.p50.toFixed(3),
      "p99 ms": result.p99.toFixed(3)
    })
  }
}
console.log("Ledger writes (CreditLedger.grant) on a master with one replica, same machine")
table(rows)
await master.stop()
await replica.stop()
process.exit(0)
