import { assert } from "@effect/vitest"
import { PendingSettlements } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import * as PendingSettlementsContract from "@tollgate/testkit/contracts/PendingSettlements"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { createClient } from "redis"
import { afterAll, describe, expect, it } from "vitest"
import * as PendingSettlementsRedis from "../src/PendingSettlementsRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const Store = PendingSettlements.PendingSettlements
const { signature, txHash } = PendingSettlementsContract
const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

PendingSettlementsContract.run([
  RedisServer.backend(redis, (url) => PendingSettlementsRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(
    cluster,
    (seeds) => PendingSettlementsRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ cluster: seeds })))
  )
])

/** A second instance: its own connection to the same Redis, as another process has. */
class OtherInstance extends Context.Service<OtherInstance, PendingSettlements.PendingSettlements["Service"]>()("test/OtherInstance") {}

const twoInstances = (target: RedisConnection.Target) =>
  Layer.mergeAll(
    PendingSettlementsRedis.layerRedis().pipe(Layer.provideMerge(RedisConnection.layer(target))),
    Layer.effect(OtherInstance, PendingSettlementsRedis.make()).pipe(Layer.provide(RedisConnection.layer(target)))
  )

Contract.contract(
  "PendingSettlements on Redis: every instance on the same Redis sees one entry, kept for the SDK's TTL",
  [
    RedisServer.backend(redis, (url) => twoInstances({ url })),
    RedisCluster.backend(cluster, (seeds) => twoInstances({ cluster: seeds }))
  ],
  (it) => {
    it.effect("set by one instance, read and deleted by another, gone for both", () =>
      Effect.gen(function*() {
        const [first, second] = [yield* Store, yield* OtherInstance]
        const key = signature()
        const hash = txHash()
        yield* promise(() => first.set(key, hash))
        assert.strictEqual(yield* promise(() => second.get(key)), hash)
        yield* promise(() => second.delete(key))
        assert.strictEqual(yield* promise(() => first.get(key)), undefined)
      }))

    it.effect("an entry expires PENDING_SETTLEMENT_TTL_MS (5 minutes) after its last set", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const { sendCommand } = yield* RedisConnection.RedisConnection
        const key = signature()
        yield* promise(() => store.set(key, txHash()))
        const name = PendingSettlementsRedis.entryKey(PendingSettlementsRedis.defaultPrefix, key)
        const ttl = Number(yield* promise(() => sendCommand(["PTTL", name], name)))
        assert.isTrue(ttl > PendingSettlements.TTL_MS - 10_000 && ttl <= PendingSettlements.TTL_MS, `PTTL ${ttl}`)
        assert.strictEqual(PendingSettlements.TTL_MS, 5 * 60_000)
      }))
  }
)

/** Long enough to read the entry back on a loaded machine; its going is polled for. */
const SHORT_TTL_MS = 1_000

Contract.contract(
  "PendingSettlements on Redis: an entry past its TTL is gone",
  [
    RedisServer.backend(
      redis,
      (url) =>
        Layer.effect(Store, PendingSettlementsRedis.make({ ttlMs: SHORT_TTL_MS })).pipe(Layer.provide(RedisConnection.layer({ url })))
    ),
    RedisCluster.backend(
      cluster,
      (seeds) =>
        Layer.effect(Store, PendingSettlementsRedis.make({ ttlMs: SHORT_TTL_MS })).pipe(
          Layer.provide(RedisConnection.layer({ cluster: seeds }))
        )
    )
  ],
  (it) => {
    it.effect("kept within ttlMs, undefined after", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const key = signature()
        yield* promise(() => store.set(key, txHash()))
        assert.isDefined(yield* promise(() => store.get(key)))
        const deadline = Date.now() + 10 * SHORT_TTL_MS
        while ((yield* promise(() => store.get(key))) !== undefined && Date.now() < deadline) {
          yield* promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
        }
        assert.strictEqual(yield* promise(() => store.get(key)), undefined)
      }))
  }
)

// A master and its replica started here (the test makes one server the replica of the other and
// stalls it), as in CreditLedger.replicas.test.ts.
const pair = await RedisServer.startReplicated()
afterAll(async () => {
  for (const server of [pair.primary, pair.replica]) await server.stop()
})

const STALL_MS = 400

describe("With replicaAcknowledgment, a pending settlement is set once a replica has it (WAIT), as a credit is", () => {
  const { primary, replica: follower } = pair as { readonly primary: RedisServer.RedisServer; readonly replica: RedisServer.RedisServer }

  it("a set waits for a stalled replica and the replica has the entry when it resolves", async () => {
    const store = ManagedRuntime.make(
      PendingSettlementsRedis.layerRedis({ replicaAcknowledgment: { replicas: 1, timeoutMs: 5_000 } }).pipe(
        Layer.provide(RedisConnection.layer({ url: primary.url }))
      )
    )
    try {
      const pending = await store.runPromise(Effect.gen(function*() {
        return yield* Store
      }))
      await pending.set(signature(), txHash()) // connects before the measured set
      const key = signature()
      const hash = txHash()
      const stalled = follower.stall(STALL_MS)
      const started = performance.now()
      await pending.set(key, hash)
      const ms = performance.now() - started
      await stalled
      expect(ms).toBeGreaterThanOrEqual(STALL_MS * 0.6)
      const replica = createClient({ url: follower.url })
      await replica.connect()
      try {
        const name = PendingSettlementsRedis.entryKey(PendingSettlementsRedis.defaultPrefix, key)
        expect(await replica.sendCommand(["GET", name])).toBe(hash)
      } finally {
        await replica.close()
      }
    } finally {
      await store.dispose()
    }
  })
})
