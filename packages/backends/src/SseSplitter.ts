/**
 * The `data` of Server-Sent Events, split from a response's bytes: what a chat relay reads of an
 * OpenAI-compatible stream (one JSON text per event, up to `data: [DONE]`). The events of one
 * network read come out as one batch; the stream ends at `[DONE]`, and an event cut off by the end
 * of the body is dropped, as the SSE standard says.
 *
 * **Details**
 *
 * Hand-written rather than `Sse.decode` from `effect/encoding`, which builds an event object per
 * event through a channel of its own after a `Stream.decodeText` stage: in a profile of 16 unpaced
 * 2,000-chunk streams relayed through tollgate, that parser was 15% of the relay's CPU, and on the
 * same bytes this one takes a quarter of its time per chunk (`pnpm bench sse`, docs/benchmarks.md,
 * "chat").
 *
 * It decodes each network read once, cuts it at blank lines and keeps the `data:` lines of each
 * event, in one stage that also ends the stream at `[DONE]`. Comments, `event:`, `id:` and `retry:`
 * lines are skipped, and CRLF and CR line ends are read as LF. After `[DONE]` the few bytes left
 * (the end of a chunked body) are read and dropped rather than the body cut off: cutting it aborts
 * the request, and undici builds an abort error with its stack for that, on every call (a profile
 * of 500 short streamed chats, docs/benchmarks.md, "chat").
 *
 * @since 0.1.0
 */
import { Array as Arr, Cause, Duration, Effect, Stream } from "effect"

const DONE = "[DONE]"

// An upstream that keeps its body open past `[DONE]` is cut off after this long: its answer is whole.
const DRAIN = Duration.millis(100)

/** The data of one event's lines (`block`, without its blank line), or `undefined` when it has none. */
const dataOf = (block: string): string | undefined => {
  // An upstream writes one `data: ` line per event: nothing to split.
  if (block.startsWith("data: ") && !block.includes("\n")) return block.slice(6)
  let data: string | undefined
  for (const line of block.split("\n")) {
    if (!line.startsWith("data:")) continue
    const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5)
    data = data === undefined ? value : `${data}\n${value}`
  }
  return data
}

/**
 * A splitter for one stream: fed each read's text in order, it answers the data of the events the
 * read completed, and whether `[DONE]` was among them (nothing after it is read).
 *
 * @category constructors
 */
export const make = () => {
  let carry = ""
  let done = false
  return {
    get done() {
      return done
    },
    push: (text: string): Array<string> => {
      const out: Array<string> = []
      if (done) return out
      let buffer = carry + text
      // A CR that ends the read may be the first half of a CRLF: it waits for the next read.
      let held = ""
      if (buffer.includes("\r")) {
        if (buffer.endsWith("\r")) {
          held = "\r"
          buffer = buffer.slice(0, -1)
        }
        buffer = buffer.replace(/\r\n?/g, "\n")
      }
      let start = 0
      for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n", start)) {
        const data = dataOf(buffer.slice(start, end))
        start = end + 2
        if (data === undefined) continue
        if (data === DONE || data.trim() === DONE) {
          done = true
          carry = ""
          return out
        }
        out.push(data)
      }
      carry = buffer.slice(start) + held
      return out
    }
  }
}

/** Reads `pull` to its end (or for `DRAIN` at most), dropping what it reads and any failure. */
const drain = <A, E>(pull: Effect.Effect<A, E | Cause.Done>): Effect.Effect<void> =>
  pull.pipe(Effect.forever, Effect.ignore, Effect.timeoutOption(DRAIN), Effect.asVoid)

/**
 * The data of a stream's events, a batch per read that completes any, ending at `[DONE]` (or where
 * the bytes end).
 *
 * @category combinators
 */
export const data = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>): Stream.Stream<string, E, R> =>
  Stream.transformPull(bytes, (pull) =>
    Effect.sync(() => {
      const decoder = new TextDecoder()
      const splitter = make()
      return Effect.suspend(function loop(): Effect.Effect<Arr.NonEmptyReadonlyArray<string>, E | Cause.Done> {
        if (splitter.done) return Effect.andThen(drain(pull), Cause.done())
        return Effect.flatMap(pull, (reads) => {
          let text = ""
          for (const read of reads) text += decoder.decode(read, { stream: true })
          const events = splitter.push(text)
          return Arr.isArrayNonEmpty(events) ? Effect.succeed(events) : loop()
        })
      })
    }))
