import { RpcCache } from "@tollgate/core"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer } from "effect"
import * as Redis from "effect/persistence/Redis"
import * as Crypto from "node:crypto"
import { afterAll, describe, expect, it } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as RpcCacheRedis from "../src/RpcCacheRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const connection = RedisConnection.layer({ url: redis.url }).pipe(Layer.orDie)

/** A cache of its own (a fresh prefix) with `config`, and the number of answers Redis holds under it. */
const withCache = <A>(
  config: RpcCache.Config,
  body: (cache: RpcCache.RpcCache["Service"], stored: Effect.Effect<number>) => Effect.Effect<A>
) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const prefix = `tollgate:test:{rpc-cache-${Crypto.randomUUID()}}`
      const cache = yield* RpcCacheRedis.make(RpcCache.settings(config), prefix)
      const client = yield* Redis.Redis
      const stored = Effect.map(client.send<ReadonlyArray<string>>("KEYS", `${prefix}:*`), (keys) => keys.length).pipe(Effect.orDie)
      return yield* body(cache, stored)
    }).pipe(Effect.provide(connection))
  )

const poll = <A>(effect: Effect.Effect<A>, until: (a: A) => boolean): Effect.Effect<A> =>
  Effect.flatMap(effect, (a) => until(a) ? Effect.succeed(a) : Effect.flatMap(Effect.sleep("20 millis"), () => poll(effect, until)))

describe("RpcCache Redis layer: bounded in entries and bytes, the entry closest to its expiry out first", () => {
  it("past maxEntries the entry written longest ago goes, from Redis too", () =>
    withCache({ maxEntries: 2 }, (cache, stored) =>
      Effect.gen(function*() {
        yield* cache.set("a", "1", 60_000)
        yield* cache.set("b", "2", 60_000)
        yield* cache.set("c", "3", 60_000)
        expect([yield* cache.get("a"), yield* cache.get("b"), yield* cache.get("c")]).toEqual([undefined, "2", "3"])
        expect(yield* stored).toBe(2)
      })))

  it("an answer that follows the head goes before a final one written earlier", () =>
    withCache({ maxEntries: 2 }, (cache) =>
      Effect.gen(function*() {
        yield* cache.set("final", "1", 60_000)
        yield* cache.set("head", "2", 5_000)
        yield* cache.set("next", "3", 60_000)
        expect([yield* cache.get("final"), yield* cache.get("head"), yield* cache.get("next")]).toEqual(["1", undefined, "3"])
      })))

  it("past maxBytes the oldest entries go; an entry above maxEntryBytes is not written", () =>
    withCache({ maxBytes: 250, maxEntryBytes: 200 }, (cache, stored) =>
      Effect.gen(function*() {
        // Each entry is its key (about 100 bytes) and its value.
        yield* cache.set("a", "x".repeat(50), 60_000)
        yield* cache.set("b", "y".repeat(50), 60_000)
        expect(yield* cache.get("a")).toBeUndefined()
        expect(yield* cache.get("b")).toBe("y".repeat(50))
        yield* cache.set("big", "z".repeat(150), 60_000)
        expect(yield* cache.get("big")).toBeUndefined()
        expect(yield* stored).toBe(1)
      })))

  it("writing an entry again counts it once", () =>
    withCache({ maxEntries: 2 }, (cache) =>
      Effect.gen(function*() {
        yield* cache.set("a", "1", 60_000)
        yield* cache.set("a", "2", 60_000)
        yield* cache.set("b", "3", 60_000)
        expect([yield* cache.get("a"), yield* cache.get("b")]).toEqual(["2", "3"])
      })))

  it("an entry Redis expired no longer counts against the bound", () =>
    withCache({ maxEntries: 2 }, (cache, stored) =>
      Effect.gen(function*() {
        yield* cache.set("short", "1", 50)
        yield* poll(cache.get("short"), (value) => value === undefined)
        yield* cache.set("a", "2", 60_000)
        yield* cache.set("b", "3", 60_000)
        expect([yield* cache.get("a"), yield* cache.get("b")]).toEqual(["2", "3"])
        expect(yield* stored).toBe(2)
      })))
})
