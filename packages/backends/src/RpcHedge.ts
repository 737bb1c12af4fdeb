/**
 * A hedged read: the call goes to one upstream, and if no good answer came after a delay, the same
 * read goes to a second one; the first good answer wins and the other exchange is interrupted. A
 * bad outcome of one side waits for the other; when both are bad the first side's is returned. A
 * first side that ends badly before the delay ends the race at once (no hedge is sent): the
 * caller's retry rule then decides what happens next, as without hedging.
 *
 * **Details**
 *
 * An `Effect.race` of the first side against the second delayed by `Effect.sleep`: a good outcome
 * succeeds, a bad one fails so that the race waits for the other side; a bad first outcome before
 * the hedge was sent succeeds instead, which ends the race and interrupts the sleep.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"

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
  Effect.suspend(() => {
    let hedged = false
    // Set when the first side ended badly: the race's answer if the second side does no better.
    let firstBad: A | undefined
    const primary = Effect.flatMap(first, (outcome): Effect.Effect<Hedged<A>, void> => {
      if (good(outcome) || !hedged) return Effect.succeed({ outcome, hedged, hedgeWon: false })
      firstBad = outcome
      return Effect.fail(undefined)
    })
    const hedge = Effect.flatMap(Effect.sleep(delayMs), () => {
      hedged = true
      return Effect.flatMap(
        second,
        (outcome): Effect.Effect<Hedged<A>, void> =>
          good(outcome) ? Effect.succeed({ outcome, hedged: true, hedgeWon: true }) : Effect.fail(undefined)
      )
    })
    // Both sides bad: the first side's outcome, which it has by then (it ended, badly, or the race would not have failed).
    return Effect.catch(Effect.race(primary, hedge), () => Effect.succeed({ outcome: firstBad as A, hedged: true, hedgeWon: false }))
  })
