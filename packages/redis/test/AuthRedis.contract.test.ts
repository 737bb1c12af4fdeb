import { assert } from "@effect/vitest"
import { AbuseGuard, Auth, AuthStore, Principal } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import * as AbuseGuardContract from "@tollgate/testkit/contracts/AbuseGuard"
import * as AuthContract from "@tollgate/testkit/contracts/Auth"
import { Effect, Layer, ManagedRuntime, Result } from "effect"
import { TestClock } from "effect/testing"
import { createClient } from "redis"
import { afterAll, describe, expect, it } from "vitest"
import * as AbuseGuardRedis from "../src/AbuseGuardRedis.ts"
import * as AuthStoreRedis from "../src/AuthStoreRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const { authLayer, origin, signingKey } = AuthContract
const redisLayer = (target: RedisConnection.Target) => RedisConnection.layer(target).pipe(Layer.orDie)

/** The Redis client schedules on the clock, so contract tests run on the live one. */
const live = <A, E, R>(body: Effect.Effect<A, E, R>) => TestClock.withLive(body)

const tagOf = <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.result(effect), (result) => Result.isFailure(result) ? result.failure._tag : "success")

AuthContract.run([
  RedisServer.backend(redis, (url) => authLayer(AuthStoreRedis.layerRedis.pipe(Layer.provide(redisLayer({ url }))))),
  RedisCluster.backend(cluster, (seeds) => authLayer(AuthStoreRedis.layerRedis.pipe(Layer.provide(redisLayer({ cluster: seeds })))))
])

const guardLayer = AbuseGuardRedis.layerRedis

AbuseGuardContract.run([
  RedisServer.backend(redis, (url) => guardLayer.pipe(Layer.provide(redisLayer({ url })))),
  RedisCluster.backend(cluster, (seeds) => guardLayer.pipe(Layer.provide(redisLayer({ cluster: seeds }))))
])

// Auth beside the abuse guard, both on one Redis: a key's standing and its block are read together.
const guardedAuthLayer = (target: RedisConnection.Target) =>
  Auth.layer({ signingKey, publicOrigin: origin }).pipe(
    Layer.provideMerge(Layer.mergeAll(AuthStoreRedis.layerRedis, AbuseGuardRedis.layerRedis).pipe(Layer.provide(redisLayer(target))))
  )

Contract.contract(
  "Auth beside the Redis abuse guard: a key's check reads its standing and its caller's block in one round trip; a revoked key is Unauthenticated, a blocked caller's key RateLimited",
  [
    RedisServer.backend(redis, (url) => guardedAuthLayer({ url })),
    RedisCluster.backend(cluster, (seeds) => guardedAuthLayer({ cluster: seeds }))
  ],
  (it) => {
    it.effect("the store reads both: a standing key of a blocked caller, a revoked key, a key of no account", () =>
      live(Effect.gen(function*() {
        const store = yield* AuthStore.AuthStore
        const guard = yield* AbuseGuard.AbuseGuard
        const auth = yield* Auth.Auth
        const account = yield* auth.createAccount()
        const { record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "ci" })
        const caller = AbuseGuard.principalCaller(
          new Principal.ApiKeyPrincipal({ accountId: account.id, keyId: record.id, keyType: "INFERENCE", tier: "default" })
        )
        const blockKey = guard.blockKey!(caller)
        assert.deepStrictEqual(yield* store.keyStanding!(account.id, record.id, blockKey), {
          accountExists: true,
          revoked: false,
          blockedMs: 0
        })
        for (let i = 0; i < 21; i++) yield* guard.recordFailure(caller)
        const blocked = yield* store.keyStanding!(account.id, record.id, blockKey)
        assert.isTrue(
          blocked.accountExists && !blocked.revoked && blocked.blockedMs > 25_000 && blocked.blockedMs <= 30_000,
          JSON.stringify(blocked)
        )
        yield* auth.revokeKey(account.id, record.id)
        assert.strictEqual((yield* store.keyStanding!(account.id, record.id, blockKey)).revoked, true)
        assert.deepStrictEqual(yield* store.keyStanding!("acct_none", "key_none", guard.blockKey!("key:{acct_none}:key_none")), {
          accountExists: false,
          revoked: false,
          blockedMs: 0
        })
      })))

    it.effect("a key is authenticated until its caller is blocked (RateLimited with the block's Retry-After), and a revoked key is Unauthenticated first", () =>
      live(Effect.gen(function*() {
        const guard = yield* AbuseGuard.AbuseGuard
        const auth = yield* Auth.Auth
        const account = yield* auth.createAccount()
        const { key, record } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "ci" })
        const authorization = `Bearer ${key}`
        assert.strictEqual(yield* tagOf(auth.authenticate({ authorization })), "success")
        const caller = AbuseGuard.principalCaller(
          new Principal.ApiKeyPrincipal({ accountId: account.id, keyId: record.id, keyType: "INFERENCE", tier: "default" })
        )
        for (let i = 0; i < 21; i++) yield* guard.recordFailure(caller)
        const refusal = yield* Effect.flip(auth.authenticate({ authorization }))
        assert.strictEqual(refusal._tag, "RateLimited")
        assert.strictEqual(refusal._tag === "RateLimited" ? refusal.retryAfterSeconds : 0, 30)
        yield* auth.revokeKey(account.id, record.id)
        assert.strictEqual(yield* tagOf(auth.authenticate({ authorization })), "Unauthenticated")
      })))
  }
)

describe("A key's restrictions and stored rate-limit overrides cost no store round trip: its check sends what an unrestricted key's does", () => {
  it("authenticating a restricted key with an override and a plain one sends the same commands (one MGET, one PTTL)", async () => {
    const stats = createClient({ url: redis.url })
    await stats.connect()
    const commands = async () => {
      const text = String(await stats.sendCommand(["INFO", "commandstats"]))
      return new Map([...text.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((match) => [match[1]!, Number(match[2])]))
    }
    const sent = async (run: () => Promise<unknown>) => {
      const before = await commands()
      await run()
      const after = await commands()
      return [...after].flatMap(([name, calls]) =>
        name === "info" || calls === (before.get(name) ?? 0) ? [] : [`${name}:${calls - (before.get(name) ?? 0)}`]
      ).sort()
    }
    const runtime = ManagedRuntime.make(guardedAuthLayer({ url: redis.url }))
    try {
      const auth = await runtime.runPromise(Effect.service(Auth.Auth))
      const account = await runtime.runPromise(auth.createAccount())
      const plain = await runtime.runPromise(auth.createKey({ accountId: account.id, type: "INFERENCE", description: "" }))
      const restricted = await runtime.runPromise(auth.createKey({
        accountId: account.id,
        type: "INFERENCE",
        description: "",
        restrictions: { networks: ["ethereum-mainnet"], ips: ["10.9.9.0/24"], models: ["house-*"] }
      }))
      await runtime.runPromise(auth.setLimits(account.id, restricted.record.id, { rpc: { requests: 5 } }))
      const check = (key: string) => () => runtime.runPromise(auth.authenticate({ authorization: `Bearer ${key}` }))
      // The first use of each verifies its signature; the counts are of the next.
      await check(plain.key)()
      await check(restricted.key)()
      const unrestrictedSent = await sent(check(plain.key))
      expect(unrestrictedSent).toEqual(["mget:1", "pttl:1"])
      expect(await sent(check(restricted.key))).toEqual(unrestrictedSent)
    } finally {
      await runtime.dispose()
      await stats.quit()
    }
  })
})
