import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import * as SseSplitter from "../src/SseSplitter.ts"

const encoder = new TextEncoder()

/** The data of the events of `reads`, each a network read, as batches. */
const split = (reads: ReadonlyArray<string | Uint8Array>) =>
  Effect.runPromise(
    Stream.fromIterable(reads.map((read) => typeof read === "string" ? encoder.encode(read) : read)).pipe(
      Stream.rechunk(1),
      SseSplitter.data,
      Stream.runCollect
    )
  )

describe("SseSplitter: an event's data is every `data:` line of it, whatever the reads cut", () => {
  it("reads one event per blank line, across reads and inside one", async () => {
    expect(await split([`data: {"a":1}\n\ndata: {"b`, `":2}\n`, `\ndata: {"c":3}\n\n`])).toEqual([`{"a":1}`, `{"b":2}`, `{"c":3}`])
  })

  it("joins a multi-line event's data with LF and skips comments and other fields", async () => {
    expect(await split([`: keep-alive\n\nevent: message\nid: 7\ndata: one\ndata:two\nretry: 10\n\n`])).toEqual(["one\ntwo"])
  })

  it("reads CRLF and CR line ends as LF, a CRLF cut between two reads included", async () => {
    expect(await split([`data: a\r\n\r`, `\ndata: b\r\rdata: c\r\n`, `\r\n`])).toEqual(["a", "b", "c"])
  })

  it("decodes a character cut between two reads", async () => {
    const bytes = encoder.encode(`data: "é€"\n\n`)
    expect(await split([bytes.subarray(0, 9), bytes.subarray(9)])).toEqual([`"é€"`])
  })
})

describe("SseSplitter: the stream ends at `[DONE]`, and an event the body cuts off is dropped", () => {
  it("reads nothing after [DONE]", async () => {
    expect(await split([`data: x\n\ndata: [DONE]\n\ndata: y\n\n`, `data: z\n\n`])).toEqual(["x"])
  })

  it("drops an event without its blank line at the end of the body", async () => {
    expect(await split([`data: x\n\ndata: {"cut":`])).toEqual(["x"])
  })
})
