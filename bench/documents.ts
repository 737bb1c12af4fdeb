/**
 * Document extraction: tollgate's DocumentExtractor (warm worker processes, one per core, one
 * extraction at a time, text plus token count) against officeparser 8 (in this process, warm) on
 * the same files in the same run. Median of several runs after a warm-up; MB/s is input bytes over
 * the median time; peak RSS is the highest worker high-water mark during the extraction (reset
 * before each job). A large PDF is split by pages across the idle workers, so the PDFs are also
 * timed on a one-worker pool, alternating with the split runs, to show what the split buys. Also
 * the o200k_base token counter on 1 MiB of English (guarded vs the bare library call) and on the
 * adversarial 1 MiB inputs the guard exists for.
 *
 * `node bench/documents.ts`
 */
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import * as Tokens from "@tollgate/documents/Tokens"
import * as WorkerPool from "@tollgate/documents/WorkerPool"
import { TestDocuments } from "@tollgate/testkit"
import { Effect } from "effect"
import { OfficeParser } from "officeparser"
import { countTokensBare } from "../packages/documents/test/Baseline.ts"
import * as Large from "../packages/documents/test/Large.ts"

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const time = async (run: () => Promise<unknown>, runs: number) => {
  await run()
  const times: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const started = performance.now()
    await run()
    times.push(performance.now() - started)
  }
  return median(times)
}

// Two ways of doing the same work, run in turns, so that load from elsewhere hits both alike.
const timeInTurns = async (first: () => Promise<unknown>, second: () => Promise<unknown>, runs: number) => {
  await first()
  await second()
  const times: [Array<number>, Array<number>] = [[], []]
  for (let i = 0; i < runs; i++) {
    for (const [which, run] of [first, second].entries()) {
      const started = performance.now()
      await run()
      times[which]!.push(performance.now() - started)
    }
  }
  return [median(times[0]), median(times[1])] as const
}

const MB = 1_000_000
interface Case {
  readonly name: string
  readonly bar: string
  readonly bytes: Uint8Array
  readonly fileType?: string
}

console.log("building the bench files...")
const cases: Array<Case> = [
  { name: "dense.pdf (300 pages of 6 pt text)", bar: ">= 1 MB/s", bytes: await Large.densePdf(300) },
  // The public documents the repository ships (testkit/fixtures/documents; freeculture.pdf is left
  // out of the repository for its non-commercial license).
  { name: "pdfjs/tracemonkey.pdf", bar: ">= 2.5 MB/s", bytes: TestDocuments.read("pdfjs/tracemonkey.pdf") },
  { name: "long.docx (30k paragraphs)", bar: ">= 3 MB/s", bytes: await Large.longDocx(30_000) },
  { name: "deck.pptx (600 slides + notes)", bar: ">= 5 MB/s", bytes: await Large.bigDeck(600) },
  { name: "sheet.xlsx (60k rows x 5)", bar: ">= 3 MB/s", bytes: await Large.bigSheet(60_000) },
  ...["tika/testWORD_various.docx", "tika/testPPT_various.pptx", "tika/testEXCEL.xlsx"].map((file) => ({
    name: file,
    bar: "<= 20 ms",
    bytes: TestDocuments.read(file)
  })),
  {
    name: "english.txt (1 MiB)",
    bar: "<= 1.5 s",
    bytes: new TextEncoder().encode(Large.words(400_000).slice(0, 1_048_576)),
    fileType: "txt"
  },
  { name: "no-spaces.txt (1 MiB of a)", bar: "<= 1.5 s", bytes: new Uint8Array(1_048_576).fill(0x61), fileType: "txt" }
]

const rows: Array<Array<string>> = []
let englishText = ""

await Effect.runPromise(Effect.scoped(
  Effect.gen(function*() {
    const extractor = yield* DocumentExtractor.DocumentExtractor
    const oneWorker = yield* WorkerPool.make({ workers: 1, baseTimeoutMs: 120_000 })
    for (const { bar, bytes, fileType, name } of cases) {
      let peak = 0
      let workers = 1
      let text = ""
      const ours = async () => {
        const result = await Effect.runPromise(extractor.extract(bytes))
        peak = Math.max(peak, result.peakRssBytes ?? 0)
        workers = result.workers
        text = result.text
      }
      const [ms, unsplit] = yield* Effect.promise(() =>
        name.includes(".pdf")
          ? timeInTurns(ours, async () => {
            const result = await Effect.runPromise(oneWorker.run(bytes))
            if (result.text !== text) throw new Error(`${name}: the split text differs from the one-worker text`)
          }, 5)
          : time(ours, 5).then((ms) => [ms, Number.NaN] as const)
      )
      if (name === "pdfjs/freeculture.pdf") englishText = text
      const theirs = yield* Effect.promise(() =>
        time(async () => {
          const ast = await OfficeParser.parseOffice(Buffer.from(bytes), fileType === undefined ? {} : { fileType } as never)
          await ast.to("text")
        }, 3).catch(() => Number.NaN)
      )
      rows.push([
        name,
        (bytes.length / MB).toFixed(2),
        `${ms.toFixed(1)} ms (${workers} worker${workers === 1 ? "" : "s"})`,
        (bytes.length / MB / (ms / 1000)).toFixed(2),
        Number.isNaN(unsplit) ? "-" : `${unsplit.toFixed(1)} ms`,
        Number.isNaN(theirs) ? "failed" : `${theirs.toFixed(1)} ms`,
        Number.isNaN(theirs) ? "-" : `${(theirs / ms).toFixed(1)}x`,
        `${(peak / 1024 / 1024).toFixed(0)} MB`,
        bar
      ])
      console.log(`  ${name}: done`)
    }
  }).pipe(Effect.provide(DocumentExtractor.layer({ baseTimeoutMs: 120_000 })))
))

const table = (header: ReadonlyArray<string>, body: ReadonlyArray<ReadonlyArray<string>>) => {
  console.log(`| ${header.join(" | ")} |`)
  console.log(`|${header.map(() => "---").join("|")}|`)
  for (const row of body) console.log(`| ${row.join(" | ")} |`)
}

console.log("\nExtraction (tollgate: warm worker processes, text + token count; officeparser 8.1: in process, text only)\n")
table([
  "file",
  "MB",
  "tollgate median",
  "tollgate MB/s",
  "tollgate on 1 worker",
  "officeparser median",
  "speed-up",
  "tollgate peak RSS",
  "bar"
], rows)

let mib = englishText
while (mib.length < 1_048_576) mib += `\n${englishText === "" ? Large.words(200_000) : englishText}`
mib = mib.slice(0, 1_048_576)
const cold = (() => {
  const started = performance.now()
  Tokens.count(mib)
  return performance.now() - started
})()
const guarded = await time(async () => Tokens.count(mib), 5)
const bare = await time(async () => countTokensBare(mib), 5)
const random = new Uint8Array(786_432)
crypto.getRandomValues(random.subarray(0, 65_536))
for (let i = 65_536; i < random.length; i += 65_536) crypto.getRandomValues(random.subarray(i, i + 65_536))
const adversarial: Array<[string, string]> = [
  ["1 MiB of `a`", "a".repeat(1_048_576)],
  ["1 MiB of unspaced CJK", "日本語の文章".repeat(58_255)],
  ["1 MiB of base64", Buffer.from(random).toString("base64").slice(0, 1_048_576)]
]
const tokenRows = [
  ["1 MiB English (Free Culture text), first call", `${cold.toFixed(0)} ms`, "-", "-", "<= 250 ms"],
  ["1 MiB English, warm median", `${guarded.toFixed(0)} ms`, `${bare.toFixed(0)} ms`, `${(bare / guarded).toFixed(2)}x`, "<= 250 ms"],
  ...adversarial.map(([name, text]) => {
    const started = performance.now()
    Tokens.count(text)
    return [name, `${(performance.now() - started).toFixed(0)} ms`, "minutes (quadratic)", "-", "<= 1.5 s"]
  })
]
console.log("\nToken counting, o200k_base (tollgate's guarded count vs the bare gpt-tokenizer call)\n")
table(["input", "tollgate", "bare countTokens", "ratio", "bar"], tokenRows)
