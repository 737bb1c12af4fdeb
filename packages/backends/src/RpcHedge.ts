/**
 * A hedged read: the call goes to one upstream, and if no good answer came after a delay, the same
 * read goes to a second one; the first good answer wins and the other exchange is abandoned. A
 * bad outcome of one side waits for the other; when both are bad the first side's is returned. A
 * first side that fails before the delay ends the race at once (no hedge is sent): the caller's
 * retry rule then decides what happens next, as without hedging.
 *
 * Written with a callback and two forked fibers rather than `Effect.race`: the hedge must not start
 * when the first side has already failed, and the winner must be known for the metrics.
 *
 * @since 0.1.0
 */
import { Effect, type Fiber } from "effect"

/**
 * How a hedged exchange ended: its outcome, whether the hedge was sent, and whether it won.
 *
 * @category models
 */
export interface Hedged<A> {
  readonly outcome: A
  readonly hedged: boolean
  readonly hedgeWon: boolean
}

/**
 * Runs `first`, and `second` after `delayMs` unless `first` ended; `good` says which outcomes win.
 *
 * @category constructors
 */
export const race = <A>(first: Effect.Effect<A>, second: Effect.Effect<A>, delayMs: number, good: (outcome: A) => boolean) =>
  Effect.withFiber((fiber) => {
    // Both sides run with the caller's services (its metric registry, its logger).
    const fork = Effect.runForkWith(fiber.context)
    return Effect.callback<Hedged<A>>((resume) => {
      let settled = false
      let firstBad: { readonly outcome: A } | undefined
      let secondBad: { readonly outcome: A } | undefined
      let hedge: Fiber.Fiber<A> | undefined
      const finish = (outcome: A, hedgeWon: boolean) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resume(Effect.succeed({ outcome, hedged: hedge !== undefined, hedgeWon }))
        if (hedgeWon) primary.interruptUnsafe()
        else hedge?.interruptUnsafe()
      }
      const timer = setTimeout(() => {
        if (settled) return
        hedge = fork(second)
        hedge.addObserver((exit) => {
          if (exit._tag !== "Success") return
          if (good(exit.value)) return finish(exit.value, true)
          secondBad = { outcome: exit.value }
          if (firstBad !== undefined) finish(firstBad.outcome, false)
        })
      }, delayMs)
      const primary = fork(first)
      primary.addObserver((exit) => {
        if (exit._tag !== "Success") return
        if (good(exit.value) || hedge === undefined) return finish(exit.value, false)
        firstBad = { outcome: exit.value }
        if (secondBad !== undefined) finish(exit.value, false)
      })
      return Effect.sync(() => {
        settled = true
        clearTimeout(timer)
        primary.interruptUnsafe()
        hedge?.interruptUnsafe()
      })
    })
  })
