import { CreditLedger, Money } from "@tollgate/core"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

const fixture = Path.join(Path.dirname(new URL(import.meta.url).pathname), "fixtures", "holds.ts")

// The count is the child's last line, after what its stores log at start.
const holdsIn = (url: string, accountId: string, count: number, prefix: string) =>
  new Promise<number>((resolve, reject) => {
    ChildProcess.execFile(process.execPath, [fixture, url, accountId, String(count), prefix], (error, stdout, stderr) =>
      error === null ? resolve(Number(stdout.trim().split("\n").at(-1))) : reject(new Error(`${error.message}\n${stderr}`)))
  })

describe("CreditLedger on one Redis, two server processes: no balance is spent twice", () => {
  it("1,000 holds from two processes against a balance that affords 250 -> exactly 250 succeed, the balance ends at 0", async () => {
    const url = redis.url
    const ledger = CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url })))
    const run = <A, E>(effect: Effect.Effect<A, E, CreditLedger.CreditLedger>) => Effect.runPromise(Effect.provide(effect, ledger))
    const accountId = `two-processes-${Date.now()}`
    await run(
      Effect.flatMap(
        CreditLedger.CreditLedger,
        (service) => service.topUp({ accountId, amount: Money.unsafeNano(250 * 625), reference: "fund" })
      )
    )
    const [a, b] = await Promise.all([holdsIn(url, accountId, 500, "a"), holdsIn(url, accountId, 500, "b")])
    expect(a + b).toBe(250)
    const balance = await run(Effect.flatMap(CreditLedger.CreditLedger, (service) => service.balance(accountId)))
    expect([balance.availableUsd, balance.heldUsd]).toEqual([0, 250 * 625])
  }, 60_000)
})
