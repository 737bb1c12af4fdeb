/**
 * Reading an upstream's chat stream, in one process, on the same bytes: the data of each event
 * split out by Effect's `Sse.decode` (after `Stream.decodeText`, as the relay did until 2026-11-29)
 * and by `SseSplitter.data` (what the relay runs). The bytes are 16 streams of 2,000 chunks as the
 * bench upstream writes them, cut into 16 KiB reads; time per chunk, best of the rounds.
 *
 * Options: --rounds n (default 7).
 */
import * as SseSplitter from "@tollgate/backends/SseSplitter"
import { Effect, Stream } from "effect"
import { Sse } from "effect/encoding"
import { table } from "./Harness.ts"

const rounds = process.argv[2] === "--rounds" ? Number(process.argv[3]) : 7
const STREAMS = 16
const CHUNKS = 2_000
const READ = 16 * 1024

const chunk = (i: number) =>
  `data: ${
    JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion.chunk",
      created: 1,
      model: "bench-long",
      choices: [{ index: 0, delta: { content: " tok" }, finish_reason: null }],
      usage: null,
      n: i
    })
  }\n\n`
const bytes = new TextEncoder().encode(`${Array.from({ length: CHUNKS }, (_, i) => chunk(i)).join("")}data: [DONE]\n\n`)
const reads = Array.from({ length: Math.ceil(bytes.length / READ) }, (_, i) => bytes.subarray(i * READ, (i + 1) * READ))

const parsers = {
  "Sse.decode": (source: Stream.Stream<Uint8Array>) =>
    source.pipe(
      Stream.decodeText,
      Stream.pipeThroughChannel(Sse.decode()),
      Stream.map((event) => event.data),
      Stream.takeWhile((data) => data.trim() !== "[DONE]")
    ),
  "SseSplitter.data": SseSplitter.data
}

const run = (parse: (source: Stream.Stream<Uint8Array>) => Stream.Stream<string, unknown>) =>
  Effect.runPromise(Effect.forEach(
    Array.from({ length: STREAMS }),
    () => Stream.runCount(parse(Stream.fromIterable(reads).pipe(Stream.rechunk(1)))),
    { concurrency: STREAMS }
  ))

const best = new Map<string, number>()
for (let round = 0; round < rounds; round++) {
  for (const [name, parse] of Object.entries(parsers)) {
    const started = performance.now()
    const counts = await run(parse)
    const elapsed = performance.now() - started
    if (counts.some((count) => count !== CHUNKS)) throw new Error(`${name} read ${counts.join(",")} chunks`)
    if (round > 0) best.set(name, Math.min(best.get(name) ?? Infinity, elapsed))
  }
}
const baseline = best.get("Sse.decode")!
table([...best].map(([name, ms]) => ({
  parser: name,
  "us per chunk": ((ms * 1000) / (STREAMS * CHUNKS)).toFixed(2),
  "vs Sse.decode": `${(ms / baseline).toFixed(2)}x`
})))
