import { Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as Generations from "../src/Generations.ts"
import * as Money from "../src/Money.ts"

const generation = (id: string, createdAt: number): Generations.Generation => ({
  id,
  accountId: "acct",
  model: "m",
  upstream: "local",
  promptTokens: 1,
  completionTokens: 1,
  cachedTokens: 0,
  cost: Money.zero,
  latencyMs: 1,
  cutShort: false,
  createdAt
})

describe("Generations in memory: at most MEMORY_RECORDS are kept, the oldest leaving first", () => {
  it("one record past the cap drops the first", async () => {
    const { first, last } = await Effect.runPromise(Effect.gen(function*() {
      const generations = yield* Generations.makeMemory
      const now = Date.now()
      for (let i = 0; i <= Generations.MEMORY_RECORDS; i++) yield* generations.record(generation(`gen-${i}`, now))
      return {
        first: yield* generations.get("acct", "gen-0"),
        last: yield* generations.get("acct", `gen-${Generations.MEMORY_RECORDS}`)
      }
    }))
    expect(Option.isNone(first)).toBe(true)
    expect(Option.isSome(last)).toBe(true)
  })
})
