import { CreditLedger, Money } from "@tollgate/core"
import { RedisCluster, RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createClient } from "redis"
import { afterAll, describe, expect, it } from "vitest"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

// A master and its replica started here (never an external REDIS_URL: the test makes one server
// the replica of the other and stalls it), and a Redis Cluster.
const pair = await RedisServer.startReplicated()
const cluster = await RedisCluster.start()
afterAll(async () => {
  for (const server of [pair.primary, pair.replica]) await server.stop()
  await cluster.stop()
})

const STALL_MS = 400

let counter = 0
const fresh = () => `replicas-${process.pid}-${Date.now()}-${counter++}`

const ledgerOn = (target: RedisConnection.Target, replicaAcknowledgment?: RedisConnection.ReplicaAcknowledgment) =>
  ManagedRuntime.make(CreditLedgerRedis.layerRedis({ replicaAcknowledgment }).pipe(Layer.provide(RedisConnection.layer(target))))

/** Grants $1 to a fresh account; resolves with the account and how long the grant took. */
const timedGrant = async (ledger: ManagedRuntime.ManagedRuntime<CreditLedger.CreditLedger, unknown>) => {
  const accountId = fresh()
  const started = performance.now()
  await ledger.runPromise(Effect.flatMap(CreditLedger.CreditLedger, (service) =>
    service.grant({ accountId, amount: Money.unsafeNano(1_000_000_000), reference: `grant-${accountId}` })))
  return { accountId, ms: performance.now() - started }
}

/** The USD balance field of the account's balances hash, as a node holds it (a replica after READONLY). */
const usdOn = async (url: string, accountId: string, readonly = false) => {
  const client = createClient({ url })
  await client.connect()
  try {
    if (readonly) await client.sendCommand(["READONLY"])
    return await client.sendCommand(["HGET", `tg:cl:{${accountId}}:a`, "usd"])
  } finally {
    await client.close()
  }
}

describe("With replicaAcknowledgment, a credit is answered once a replica has it (WAIT), or when the wait times out", () => {
  const { primary, replica: follower } = pair as { readonly primary: RedisServer.RedisServer; readonly replica: RedisServer.RedisServer }


  it("a grant waits for a stalled replica and is on it when answered; without the option it is answered at once", async () => {
    const waiting = ledgerOn({ url: primary.url }, { replicas: 1, timeoutMs: 5_000 })
    const plain = ledgerOn({ url: primary.url })
    try {
      await timedGrant(waiting) // connects before the measured grants
      await timedGrant(plain)

      const stalled = follower.stall(STALL_MS)
      const waited = await timedGrant(waiting)
      await stalled
      expect(waited.ms).toBeGreaterThanOrEqual(STALL_MS * 0.6)
      expect(await usdOn(follower.url, waited.accountId)).toBe("1000000000")

      const stalledAgain = follower.stall(STALL_MS)
      const answered = await timedGrant(plain)
      expect(answered.ms).toBeLessThan(STALL_MS * 0.6)
      expect(await usdOn(primary.url, answered.accountId)).toBe("1000000000")
      await stalledAgain
    } finally {
      await waiting.dispose()
      await plain.dispose()
    }
  })

  it("a replica that stays stalled past the timeout: the grant stands on the master and is answered after the timeout", async () => {
    const waiting = ledgerOn({ url: primary.url }, { replicas: 1, timeoutMs: 150 })
    try {
      await timedGrant(waiting)
      const stalled = follower.stall(STALL_MS * 2)
      const granted = await timedGrant(waiting)
      expect(granted.ms).toBeGreaterThanOrEqual(140)
      expect(granted.ms).toBeLessThan(STALL_MS * 2)
      expect(await usdOn(primary.url, granted.accountId)).toBe("1000000000")
      await stalled
    } finally {
      await waiting.dispose()
    }
  })
})

describe("On a Redis Cluster the wait goes to the master of the account's slot", () => {
  it("a grant waits while the replica of its account's master is stalled, and that replica has it when answered", async () => {
    const nodes = cluster as RedisCluster.RedisCluster
    const waiting = ledgerOn({ cluster: nodes.seeds.split(",") }, { replicas: 1, timeoutMs: 5_000 })
    try {
      await timedGrant(waiting)
      const accountId = fresh()
      const owner = await nodes.masterOf(`tg:cl:{${accountId}}:a`)
      const follower = await nodes.replicaOf(owner.port)
      const stalled = nodes.stall(follower.port, STALL_MS)
      const started = performance.now()
      await waiting.runPromise(Effect.flatMap(CreditLedger.CreditLedger, (service) =>
        service.grant({ accountId, amount: Money.unsafeNano(1_000_000_000), reference: `grant-${accountId}` })))
      const ms = performance.now() - started
      await stalled
      expect(ms).toBeGreaterThanOrEqual(STALL_MS * 0.6)
      expect(await usdOn(follower.url, accountId, true)).toBe("1000000000")
    } finally {
      await waiting.dispose()
    }
  })
})
