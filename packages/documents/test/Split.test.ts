import { expect, layer } from "@effect/vitest"
import { TestDocuments } from "@tollgate/testkit"
import { Effect, Fiber } from "effect"
import * as DocumentExtractor from "../src/DocumentExtractor.ts"
import * as Extraction from "../src/Extraction.ts"
import * as Hostile from "./Hostile.ts"
import * as Large from "./Large.ts"

// What one worker gives for the whole document, computed here in the test process.
const onePass = (bytes: Uint8Array) => Effect.promise(() => Extraction.run(bytes))

const reasonOnOnePass = (bytes: Uint8Array) =>
  Effect.promise(() => Extraction.run(bytes).then(() => "extracted", (error: { reason: string }) => error.reason))

const extract = (bytes: Uint8Array) =>
  Effect.gen(function*() {
    const extractor = yield* DocumentExtractor.DocumentExtractor
    return yield* extractor.extract(bytes)
  })

layer(
  // Every document is split here; the memory limit is low enough that a bomb page is stopped quickly.
  DocumentExtractor.layer({ workers: 2, splitMinBytes: 0, maxRssBytes: 512 * 1024 * 1024, baseTimeoutMs: 60_000 }),
  { timeout: 60_000 }
)(
  "A document split across idle workers (a PDF by pages, a long text's token count by slices) gives exactly what one worker gives",
  (it) => {
    it.effect("the same text and token count as one pass, the pages in order", () =>
      Effect.gen(function*() {
        const pages = Array.from({ length: 9 }, (_, i) => ({ text: `Page ${i + 1} says ${Large.words(12, i + 1)}.` }))
        const bytes = Hostile.pdf(pages)
        const split = yield* extract(bytes)
        const whole = yield* onePass(bytes)
        expect(split.workers).toBe(2)
        expect(split.text).toBe(whole.text)
        expect(split.tokens).toBe(whole.tokens)
        const positions = pages.map((_, i) => split.text.indexOf(`Page ${i + 1} says`))
        expect(positions.every((position) => position >= 0)).toBe(true)
        expect(positions).toEqual([...positions].sort((a, b) => a - b))
      }))

    it.effect("a text-dense pdfkit document and a public PDF: the same text and token count as one pass", () =>
      Effect.gen(function*() {
        const documents = [yield* Effect.promise(() => Large.densePdf(6)), TestDocuments.read("pdfjs/tracemonkey.pdf")]
        for (const bytes of documents) {
          const split = yield* extract(bytes)
          const whole = yield* onePass(bytes)
          expect(split.workers).toBe(2)
          expect(split.text).toBe(whole.text)
          expect(split.tokens).toBe(whole.tokens)
        }
      }))

    it.effect("a long DOCX and long plain texts (English, unspaced CJK) have their tokens counted in slices to the same total", () =>
      Effect.gen(function*() {
        const documents = [
          yield* Effect.promise(() => Large.longDocx(4_000)),
          new TextEncoder().encode(Large.words(220_000)),
          new TextEncoder().encode("日本語の文章です。".repeat(120_000))
        ]
        for (const bytes of documents) {
          const sliced = yield* extract(bytes)
          const whole = yield* onePass(bytes)
          expect(sliced.text.length).toBeGreaterThan(1_000_000)
          expect(sliced.workers).toBe(2)
          expect(sliced.text).toBe(whole.text)
          expect(sliced.tokens).toBe(whole.tokens)
        }
      }))

    it.effect("a page that cannot be read in one share refuses the whole document, as one pass does", () =>
      Effect.gen(function*() {
        const bytes = Hostile.pdf([{ text: "Page one" }, { missing: true }, { text: "Page three" }])
        const error = yield* Effect.flip(extract(bytes))
        expect(error._tag === "DocumentRefused" && error.reason).toBe("malformed")
        expect(yield* reasonOnOnePass(bytes)).toBe("malformed")
      }))

    it.effect("a bomb page in the last share is stopped by the watchdog and refuses the whole document; the next one is extracted", () =>
      Effect.gen(function*() {
        const bomb = Hostile.pdf([{ text: "Harmless first page" }, { text: "Harmless second page" }, { bombMib: 1024 }])
        const error = yield* Effect.flip(extract(bomb))
        expect(error._tag === "DocumentRefused" && error.reason).toBe("memory-limit")
        const next = yield* extract(Hostile.pdf([{ text: "Alpha page" }, { text: "Omega page" }]))
        expect(next.text).toBe("Alpha page\n\nOmega page")
      }))

    it.effect("a busy pool extracts a large PDF on its one idle worker, and splits again once both are idle", () =>
      Effect.gen(function*() {
        // Counting the tokens of a megabyte of base64 keeps one worker busy for most of a second.
        const random = new Uint8Array(786_432)
        for (let i = 0; i < random.length; i += 65_536) crypto.getRandomValues(random.subarray(i, i + 65_536))
        const busy = yield* Effect.forkChild(extract(new TextEncoder().encode(Buffer.from(random).toString("base64"))))
        // The forked extraction takes its worker as soon as it runs, before its first wait.
        yield* Effect.yieldNow
        const bytes = Hostile.pdf(Array.from({ length: 4 }, (_, i) => ({ text: `Busy page ${i + 1}` })))
        const alone = yield* extract(bytes)
        expect(alone.workers).toBe(1)
        yield* Fiber.join(busy)
        const split = yield* extract(bytes)
        expect(split.workers).toBe(2)
        expect(split.text).toBe(alone.text)
      }))
  }
)
