import { assert } from "@effect/vitest"
import { SessionRevocations } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import { Clock, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { TestClock } from "effect/testing"
import { afterAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as SessionRevocationsRedis from "../src/SessionRevocationsRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const id = () => Crypto.randomBytes(16).toString("base64url")

Contract.contract(
  "SessionRevocations contract: a signed-out session stays revoked until it would have ended, and no longer",
  [
    { name: "memory", layer: SessionRevocations.layerMemory },
    RedisServer.backend(redis, (url) => SessionRevocationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
    RedisCluster.backend(cluster, (seeds) => SessionRevocationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
  ],
  (it) => {
    it.effect("a session never signed out is not revoked; a revoked one is, the others are not", () =>
      Effect.gen(function*() {
        const store = yield* SessionRevocations.SessionRevocations
        const [out, kept] = [id(), id()]
        assert.isFalse(yield* store.isRevoked(out))
        yield* store.revoke(out, (yield* Clock.currentTimeMillis) + 60_000)
        assert.isTrue(yield* store.isRevoked(out))
        assert.isFalse(yield* store.isRevoked(kept))
      }))

    it.effect("the revocation ends with the session's own end; a session already ended leaves nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionRevocations.SessionRevocations
        const [short, ended] = [id(), id()]
        const now = yield* Clock.currentTimeMillis
        yield* store.revoke(short, now + 150)
        yield* store.revoke(ended, now - 1)
        assert.isTrue(yield* store.isRevoked(short))
        assert.isFalse(yield* store.isRevoked(ended))
        // Past the end on both clocks: the test clock the memory store reads, Redis's own.
        yield* TestClock.adjust("300 millis")
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
        assert.isFalse(yield* store.isRevoked(short))
      }))
  }
)
