/**
 * A restricted key's cost: CPU time per key check (`Auth.authenticate` over Redis beside the abuse
 * guard, the paid path's up-front check: one MGET and one PTTL) of a key with restrictions and a
 * stored rate-limit override against a plain key, alternated in rounds within one process, and
 * the CPU of judging the restrictions themselves (`KeyRestrictions.checkRequest` and `checkCall`,
 * the address against a CIDR range, the network, the operation, the model). The Redis commands
 * per check are counted for both (`INFO commandstats`): the restrictions add none.
 */
import { Auth, Jwt, KeyRestrictions } from "@tollgate/core"
import { AbuseGuardRedis, AuthStoreRedis, RedisConnection } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createClient } from "redis"
import { table } from "./Harness.ts"

const N = Number(process.env["RESTRICTIONS_N"] ?? 5_000)
const ROUNDS = Number(process.env["RESTRICTIONS_ROUNDS"] ?? 4)
const CONCURRENCY = 32

const server = await RedisServer.start()
const stats = createClient({ url: server.url })
await stats.connect()
const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const runtime = ManagedRuntime.make(
  Auth.layer({ signingKey, publicOrigin: "http://localhost:8787" }).pipe(
    Layer.provide(
      Layer.mergeAll(AuthStoreRedis.layerRedis, AbuseGuardRedis.layerRedis).pipe(
        Layer.provide(Layer.orDie(RedisConnection.layer({ url: server.url })))
      )
    )
  )
)
const auth = await runtime.runPromise(Effect.service(Auth.Auth))
const account = await runtime.runPromise(auth.createAccount())
const restrictions = {
  networks: ["ethereum-mainnet"],
  ips: ["10.9.9.0/24", "127.0.0.0/8"],
  models: ["house-*"],
  operations: ["chat:*", "rpc:*"]
}
const plain = await runtime.runPromise(auth.createKey({ accountId: account.id, type: "INFERENCE", description: "plain" }))
const restricted = await runtime.runPromise(
  auth.createKey({ accountId: account.id, type: "INFERENCE", description: "restricted", restrictions })
)
await runtime.runPromise(auth.setLimits(account.id, restricted.record.id, { rpc: { requests: 1000 } }))

const commands = async () => {
  const text = String(await stats.sendCommand(["INFO", "commandstats"]))
  return [...text.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].reduce((sum, [, name, calls]) => name === "info" ? sum : sum + Number(calls), 0)
}

/** CPU microseconds and Redis commands per check of `key`, N checks with CONCURRENCY in flight. */
const measure = async (key: string) => {
  const headers = { authorization: `Bearer ${key}` }
  const before = await commands()
  const cpu = process.cpuUsage()
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < N) await runtime.runPromise(auth.authenticate(headers))
  }))
  const used = process.cpuUsage(cpu)
  return { cpuUs: (used.user + used.system) / N, commands: ((await commands()) - before) / N }
}

const results = { plain: [] as Array<{ cpuUs: number; commands: number }>, restricted: [] as Array<{ cpuUs: number; commands: number }> }
await measure(plain.key)
await measure(restricted.key)
for (let round = 0; round < ROUNDS; round++) {
  for (const name of round % 2 === 0 ? (["plain", "restricted"] as const) : (["restricted", "plain"] as const)) {
    results[name].push(await measure(name === "plain" ? plain.key : restricted.key))
  }
}

const judged = (() => {
  const M = 1_000_000
  const cpu = process.cpuUsage()
  for (let i = 0; i < M; i++) {
    KeyRestrictions.checkRequest(restrictions, { address: "127.0.0.1", network: "ethereum-mainnet" })
    KeyRestrictions.checkCall(restrictions, "chat:house-model", { models: ["house-model"] })
  }
  const used = process.cpuUsage(cpu)
  return (used.user + used.system) / M
})()

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const plainCpu = median(results.plain.map((r) => r.cpuUs))
const restrictedCpu = median(results.restricted.map((r) => r.cpuUs))
table([
  {
    key: "plain",
    "CPU µs per check (median of rounds)": plainCpu.toFixed(1),
    "Redis commands per check": median(results.plain.map((r) => r.commands)).toFixed(2)
  },
  {
    key: "restricted, with a stored override",
    "CPU µs per check (median of rounds)": restrictedCpu.toFixed(1),
    "Redis commands per check": median(results.restricted.map((r) => r.commands)).toFixed(2)
  }
])
console.log(
  `restricted / plain CPU: ${(restrictedCpu / plainCpu).toFixed(3)}; judging the restrictions alone: ${judged.toFixed(3)} µs per call`
)

await runtime.dispose()
await stats.quit()
await server.stop()
