import { assert, layer } from "@effect/vitest"
import { RedisCluster } from "@tollgate/testkit"
import { Effect, Layer } from "effect"
import * as Redis from "effect/persistence/Redis"
import { afterAll, describe, expect, it } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"

const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const onCluster = RedisConnection.layer({ cluster: cluster.seeds.split(",") }).pipe(Layer.orDie)

const setBoth = Redis.script((first: string, second: string) => [first, second, "1"], {
  lua: "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return 1",
  numberOfKeys: 2
})

describe("Redis Cluster: every script's keys hash to one slot, or the script is refused before it is sent", () => {
  it("keys under one hash tag share a slot; keys under two do not", () => {
    expect(RedisConnection.scriptSlot(["sha", "2", "a:{acct_1}:x", "b:{acct_1}:y"])).toBeTypeOf("number")
    expect(() => RedisConnection.scriptSlot(["sha", "2", "a:{acct_1}:x", "b:{acct_2}:y"])).toThrow(RedisConnection.CrossSlotScript)
  })

  layer(onCluster, { timeout: 60_000 })("on a three-master cluster", (it) => {
    it.effect("a script over one account's keys runs on the master of that slot", () =>
      Effect.gen(function*() {
        const redis = yield* Redis.Redis
        yield* redis.eval(setBoth)("t:{acct_1}:x", "t:{acct_1}:y")
        assert.strictEqual(yield* redis.send<string>("GET", "t:{acct_1}:y"), "1")
      }))

    it.effect("a script over two accounts' keys is refused and writes nothing", () =>
      Effect.gen(function*() {
        const redis = yield* Redis.Redis
        const error = yield* Effect.flip(redis.eval(setBoth)("t:{acct_2}:x", "t:{acct_3}:y"))
        assert.instanceOf(error.cause, RedisConnection.CrossSlotScript)
        assert.strictEqual(yield* redis.send<string | null>("GET", "t:{acct_2}:x"), null)
      }))

    it.effect("a node that has never seen a script gets it by EVAL after NOSCRIPT", () =>
      Effect.gen(function*() {
        const { sendCommand } = yield* RedisConnection.RedisConnection
        const lua = "return redis.call('INCR', KEYS[1])"
        const sha = yield* Effect.promise(() => sendCommand(["SCRIPT", "LOAD", lua], undefined) as Promise<string>)
        yield* Effect.promise(() => sendCommand(["SCRIPT", "FLUSH"], "n:{acct_4}"))
        const flushed = yield* Effect.flip(Effect.tryPromise(() => sendCommand(["EVALSHA", sha, "1", "n:{acct_4}"], "n:{acct_4}")))
        assert.include(String(flushed.cause), "NOSCRIPT")
        const redis = yield* Redis.Redis
        const increment = Redis.script((key: string) => [key], { lua, numberOfKeys: 1 })
        yield* Effect.promise(() => sendCommand(["SCRIPT", "FLUSH"], "n:{acct_4}"))
        assert.strictEqual(yield* redis.eval(increment)("n:{acct_4}") as Effect.Effect<unknown, Redis.RedisError>, 1)
      }))
  })
})
