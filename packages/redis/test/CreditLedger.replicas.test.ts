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

/** Long enough that a call which does not wait for the stalled replica ends within it on a loaded machine. */
const STALL_MS = 2_000

/** Awaits both; says whether `first` settled before `second` did. */
const firstOf = async <A>(first: Promise<A>, second: Promise<unknown>): Promise<readonly [A, boolean]> => {
  let secondEnded = false
  const ended = second.then(() => {
    secondEnded = true
  })
  const value = await first
  const wasFirst = !secondEnded
  await ended
  return [value, wasFirst]
}

let counter = 0
const fresh = () => `replicas-${process.pid}-${Date.now()}-${counter++}`

const ledgerOn = (target: RedisConnection.Target, replicaAcknowledgment?: RedisConnection.ReplicaAcknowledgment) =>
  ManagedRuntime.make(CreditLedgerRedis.layerRedis({ replicaAcknowledgment }).pipe(Layer.provide(RedisConnection.layer(target))))

/** Grants $1 to a fresh account; resolves with the account and how long the grant took. */
const timedGrant = async (ledger: ManagedRuntime.ManagedRuntime<CreditLedger.CreditLedger, unknown>) => {
  const accountId = fresh()
  const started = performance.now()
  await ledger.runPromise(
    Effect.flatMap(
      CreditLedger.CreditLedger,
      (service) => service.grant({ accountId, amount: Money.unsafeNano(1_000_000_000), reference: `grant-${accountId}` })
    )
  )
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
  const { primary, replica: follower } = pair

  it("a grant waits for a stalled replica and is on it when answered; without the option it is answered at once", async () => {
    const waiting = ledgerOn({ url: primary.url }, { replicas: 1, timeoutMs: 5_000 })
    const plain = ledgerOn({ url: primary.url })
    try {
      await timedGrant(waiting) // connects before the measured grants
      await timedGrant(plain)

      // What is claimed is an order, not a duration: the waiting grant is answered only once the
      // replica runs again, the plain one while it is still stalled.
      const stalled = follower.stall(STALL_MS)
      const [waited, waitedFirst] = await firstOf(timedGrant(waiting), stalled)
      expect(waitedFirst).toBe(false)
      expect(await usdOn(follower.url, waited.accountId)).toBe("1000000000")

      const [answered, answeredFirst] = await firstOf(timedGrant(plain), follower.stall(STALL_MS))
      expect(answeredFirst).toBe(true)
      expect(await usdOn(primary.url, answered.accountId)).toBe("1000000000")
    } finally {
      await waiting.dispose()
      await plain.dispose()
    }
  })

  it("a replica that stays stalled past the timeout: the grant stands on the master and is answered after the timeout", async () => {
    const waiting = ledgerOn({ url: primary.url }, { replicas: 1, timeoutMs: 150 })
    try {
      await timedGrant(waiting)
      const [granted, grantedFirst] = await firstOf(timedGrant(waiting), follower.stall(STALL_MS * 2))
      // Not before the timeout, and while the replica is still stalled.
      expect(granted.ms).toBeGreaterThanOrEqual(140)
      expect(grantedFirst).toBe(true)
      expect(await usdOn(primary.url, granted.accountId)).toBe("1000000000")
    } finally {
      await waiting.dispose()
    }
  })
})

describe("On a Redis Cluster the wait goes to the master of the account's slot", () => {
  it("a grant waits while the replica of its account's master is stalled, and that replica has it when answered", async () => {
    const nodes = cluster
    const waiting = ledgerOn({ cluster: nodes.seeds.split(",") }, { replicas: 1, timeoutMs: 5_000 })
    try {
      await timedGrant(waiting)
      const accountId = fresh()
      const owner = await nodes.masterOf(`tg:cl:{${accountId}}:a`)
      const follower = await nodes.replicaOf(owner.port)
      // Shorter than the cluster's node timeout, so the stalled replica is not failed over meanwhile.
      const stalled = nodes.stall(follower.port, 400)
      const granted = waiting.runPromise(
        Effect.flatMap(
          CreditLedger.CreditLedger,
          (service) => service.grant({ accountId, amount: Money.unsafeNano(1_000_000_000), reference: `grant-${accountId}` })
        )
      )
      const [, grantedFirst] = await firstOf(granted, stalled)
      expect(grantedFirst).toBe(false)
      expect(await usdOn(follower.url, accountId, true)).toBe("1000000000")
    } finally {
      await waiting.dispose()
    }
  })
})
