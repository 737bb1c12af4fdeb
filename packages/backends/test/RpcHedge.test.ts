import { assert, describe, it } from "@effect/vitest"
import * as RpcHedge from "@tollgate/backends/RpcHedge"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"

/** One side of a race: `outcome` after `ms`, counting its starts and its interruptions. */
const side = (ms: number, outcome: string) => {
  const seen = { started: 0, interrupted: 0 }
  const effect = Effect.suspend(() => {
    seen.started += 1
    return Effect.as(Effect.sleep(ms), outcome)
  }).pipe(Effect.onInterrupt(() => Effect.sync(() => void (seen.interrupted += 1))))
  return { effect, seen }
}

const good = (outcome: string) => outcome.startsWith("good")

/** The race after `ms` of the test clock. */
const raced = (first: Effect.Effect<string>, second: Effect.Effect<string>, ms: number) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(RpcHedge.race(first, second, 100, good))
    yield* TestClock.adjust(ms)
    return yield* Fiber.join(fiber)
  })

describe("RpcHedge: the second upstream gets the read only after the delay, the first good answer wins, a bad one waits for the other", () => {
  it.effect("a first side answering before the delay wins alone: no hedge sent", () =>
    Effect.gen(function*() {
      const first = side(50, "good first")
      const second = side(10, "good second")
      const result = yield* raced(first.effect, second.effect, 1000)
      assert.deepStrictEqual(result, { outcome: "good first", hedged: false, hedgeWon: false })
      assert.strictEqual(second.seen.started, 0)
    }))

  it.effect("a first side failing before the delay ends the race at once: no hedge sent", () =>
    Effect.gen(function*() {
      const second = side(10, "good second")
      const result = yield* raced(side(50, "bad first").effect, second.effect, 1000)
      assert.deepStrictEqual(result, { outcome: "bad first", hedged: false, hedgeWon: false })
      assert.strictEqual(second.seen.started, 0)
    }))

  it.effect("a faster hedge wins and the first side is interrupted", () =>
    Effect.gen(function*() {
      const first = side(500, "good first")
      const result = yield* raced(first.effect, side(50, "good second").effect, 1000)
      assert.deepStrictEqual(result, { outcome: "good second", hedged: true, hedgeWon: true })
      assert.strictEqual(first.seen.interrupted, 1)
    }))

  it.effect("a bad first side after the hedge was sent waits for the hedge's good answer", () =>
    Effect.gen(function*() {
      const result = yield* raced(side(120, "bad first").effect, side(100, "good second").effect, 1000)
      assert.deepStrictEqual(result, { outcome: "good second", hedged: true, hedgeWon: true })
    }))

  it.effect("a bad hedge waits for the first side's good answer", () =>
    Effect.gen(function*() {
      const result = yield* raced(side(300, "good first").effect, side(10, "bad second").effect, 1000)
      assert.deepStrictEqual(result, { outcome: "good first", hedged: true, hedgeWon: false })
    }))

  it.effect("both sides bad: the first side's outcome, whichever ended last", () =>
    Effect.gen(function*() {
      const early = yield* raced(side(150, "bad first").effect, side(100, "bad second").effect, 1000)
      assert.deepStrictEqual(early, { outcome: "bad first", hedged: true, hedgeWon: false })
      const late = yield* raced(side(300, "bad first").effect, side(10, "bad second").effect, 1000)
      assert.deepStrictEqual(late, { outcome: "bad first", hedged: true, hedgeWon: false })
    }))
})
