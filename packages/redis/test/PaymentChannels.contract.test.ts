import { assert } from "@effect/vitest"
import { PaymentChannels } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import { Effect, Exit, Layer, Option } from "effect"
import { afterAll } from "vitest"
import * as PaymentChannelsRedis from "../src/PaymentChannelsRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const Store = PaymentChannels.PaymentChannels

const config: PaymentChannels.ChannelConfig = {
  payer: "0x1111111111111111111111111111111111111111",
  payerAuthorizer: "0x0000000000000000000000000000000000000000",
  receiver: "0x2222222222222222222222222222222222222222",
  receiverAuthorizer: "0x3333333333333333333333333333333333333333",
  token: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  withdrawDelay: 86_400,
  salt: "0x0000000000000000000000000000000000000000000000000000000000000000"
}

let counter = 0
const fresh = () => `0x${(Date.now() * 1000 + counter++).toString(16).padStart(64, "0")}`

/** A channel of 1 USDC escrow, nothing claimed, opened at `now`. */
const opened = (now = 1_000) =>
  Effect.gen(function*() {
    const store = yield* Store
    const channelId = fresh()
    yield* store.open(channelId, config, { balance: 1_000_000n, totalClaimed: 0n, withdrawRequestedAt: 0 }, now)
    return channelId
  })

const reservation = (channelId: string, maxClaimable: bigint, now = 2_000): PaymentChannels.Reservation => ({
  channelId,
  maxClaimable,
  signature: `0xsig${maxClaimable}`,
  price: 125n,
  exposureCap: 500_000n,
  now,
  leaseMs: 30_000
})

const refusedWith = <A>(exit: Exit.Exit<A, PaymentChannels.VoucherRefused | unknown>) =>
  Exit.isFailure(exit) && exit.cause.reasons[0]?._tag === "Fail"
    ? ((exit.cause.reasons[0] as { error: PaymentChannels.VoucherRefused }).error.reason)
    : undefined

Contract.contract(
  "PaymentChannels contract: a voucher is reserved atomically against the channel's cumulative charge, stored before the call is served",
  [
    { name: "memory", layer: PaymentChannels.layerMemory },
    RedisServer.backend(redis, (url) => PaymentChannelsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
    RedisCluster.backend(cluster, (seeds) => PaymentChannelsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
  ],
  (it) => {
    it.effect("a new channel starts charged at what is claimed on chain, and keeps its config", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = fresh()
        const channel = yield* store.open(channelId, config, { balance: 900n, totalClaimed: 300n, withdrawRequestedAt: 0 }, 5)
        assert.deepStrictEqual(channel, {
          channelId,
          config,
          balance: 900n,
          totalClaimed: 300n,
          withdrawRequestedAt: 0,
          charged: 300n,
          chargedNano: 300_000n,
          signedMax: 300n,
          signature: "",
          lastRequestAt: 5
        })
        assert.deepStrictEqual(yield* store.get(channelId), Option.some(channel))
      }))

    it.effect("a voucher for charged + price is reserved and stored at once; its commit adds the charge", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        const reserved = yield* store.reserve(reservation(channelId, 125n))
        assert.strictEqual(reserved.signedMax, 125n)
        assert.strictEqual(reserved.signature, "0xsig125")
        assert.strictEqual(reserved.charged, 0n)
        // Stored before the call is served: a process lost now leaves a claimable voucher.
        assert.strictEqual(Option.getOrThrow(yield* store.get(channelId)).signedMax, 125n)
        const committed = yield* store.commit(channelId, 100_000n)
        assert.strictEqual(committed.charged, 100n)
        assert.strictEqual((yield* store.reserve(reservation(channelId, 225n, 3_000))).signedMax, 225n)
      }))

    it.effect("calls costing a fraction of a base unit: the cumulative charge is their nano-USD total rounded up, each call 12 or 13 units", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        const charges: Array<bigint> = []
        let charged = 0n
        for (let call = 0; call < 1_000; call++) {
          yield* store.reserve({ ...reservation(channelId, charged + 13n, 2_000 + call), price: 13n })
          const after = (yield* store.commit(channelId, 12_500n)).charged
          charges.push(after - charged)
          charged = after
        }
        assert.strictEqual(charged, 12_500n)
        assert.deepStrictEqual([...new Set(charges)].sort(), [12n, 13n])
        assert.strictEqual(Option.getOrThrow(yield* store.get(channelId)).chargedNano, 12_500_000n)
      }))

    it.effect("replayed and lower vouchers, and a higher one than the call, are refused as a cumulative mismatch", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        yield* store.reserve(reservation(channelId, 125n))
        yield* store.commit(channelId, 125_000n)
        for (const max of [125n, 100n, 300n]) {
          assert.strictEqual(
            refusedWith(yield* Effect.exit(store.reserve(reservation(channelId, max, 3_000)))),
            "invalid_batch_settlement_evm_cumulative_amount_mismatch"
          )
        }
        assert.strictEqual(Option.getOrThrow(yield* store.get(channelId)).charged, 125n)
      }))

    it.effect("two calls racing on one channel: the second is refused as busy until the first commits or releases", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        const [first, second] = yield* Effect.all([
          Effect.exit(store.reserve(reservation(channelId, 125n))),
          Effect.exit(store.reserve(reservation(channelId, 125n)))
        ], { concurrency: 2 })
        const outcomes = [first, second].map((exit) => Exit.isSuccess(exit) ? "reserved" : refusedWith(exit))
        assert.deepStrictEqual(outcomes.sort(), ["invalid_batch_settlement_evm_channel_busy", "reserved"])
        yield* store.release(channelId)
        // Released: nothing was charged, and the same voucher is accepted again.
        assert.strictEqual((yield* store.reserve(reservation(channelId, 125n, 2_500))).charged, 0n)
      }))

    it.effect("a reservation older than its lease no longer holds the channel", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        yield* store.reserve(reservation(channelId, 125n, 2_000))
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve(reservation(channelId, 125n, 31_999)))),
          "invalid_batch_settlement_evm_channel_busy"
        )
        assert.strictEqual((yield* store.reserve(reservation(channelId, 125n, 32_000))).signedMax, 125n)
      }))

    it.effect("a voucher over the deposit, over the exposure cap, on a missing channel or during a withdrawal is refused", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve({ ...reservation(channelId, 1_000_125n), price: 1_000_125n }))),
          "invalid_batch_settlement_evm_cumulative_exceeds_balance"
        )
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve({ ...reservation(channelId, 600_000n), price: 600_000n }))),
          "batch_settlement_exposure_cap"
        )
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve(reservation(fresh(), 125n)))),
          "invalid_batch_settlement_evm_missing_channel"
        )
        yield* store.mirror(channelId, { balance: 1_000_000n, totalClaimed: 0n, withdrawRequestedAt: 1_700_000_000 })
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve(reservation(channelId, 125n)))),
          "batch_settlement_withdrawal_pending"
        )
      }))

    it.effect("one owner holds the claim round at a time, until its lock expires", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const owner = `a-${fresh()}`
        assert.isTrue(yield* store.lockRound(owner, 1_000, 200))
        assert.isTrue(yield* store.lockRound(owner, 1_050, 200))
        assert.isFalse(yield* store.lockRound(`b-${owner}`, 1_100, 200))
        // Redis expires the lock by its own clock, the memory store by `now`: both have passed.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
        assert.isTrue(yield* store.lockRound(`b-${owner}`, 1_400, 200))
      }))

    it.effect("what is claimed on chain counts against the exposure cap no more; listed and removed", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const channelId = yield* opened()
        for (let i = 1n; i <= 4n; i++) {
          yield* store.reserve({ ...reservation(channelId, i * 125_000n), price: 125_000n })
          yield* store.commit(channelId, 125_000_000n)
        }
        assert.strictEqual(
          refusedWith(yield* Effect.exit(store.reserve({ ...reservation(channelId, 625_000n), price: 125_000n }))),
          "batch_settlement_exposure_cap"
        )
        yield* store.mirror(channelId, { balance: 1_000_000n, totalClaimed: 500_000n, withdrawRequestedAt: 0 })
        assert.strictEqual((yield* store.reserve({ ...reservation(channelId, 625_000n), price: 125_000n })).totalClaimed, 500_000n)
        assert.isTrue((yield* store.list).some((channel) => channel.channelId === channelId && channel.charged === 500_000n))
        yield* store.remove(channelId)
        assert.isTrue(Option.isNone(yield* store.get(channelId)))
        assert.isFalse((yield* store.list).some((channel) => channel.channelId === channelId))
      }))
  }
)
