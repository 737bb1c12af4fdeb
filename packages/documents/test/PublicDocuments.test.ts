import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as DocumentExtractor from "../src/DocumentExtractor.ts"
import * as Corpus from "./Corpus.ts"

const files = Object.entries(Corpus.manifest())

describe.skipIf(!Corpus.available)("Public test documents (../shared/test-documents)", () => {
  layer(DocumentExtractor.layer({ workers: 2, baseTimeoutMs: 60_000 }), { timeout: 60_000 })("every string their own projects expect is extracted, in every format", (it) => {
    it.effect.each(files)("%s", ([file, expected]) =>
      Effect.gen(function*() {
        const extractor = yield* DocumentExtractor.DocumentExtractor
        const { format, text } = yield* extractor.extract(Corpus.read(file))
        expect(format).toBe(expected.format)
        const normalized = text.replace(/\s+/g, " ")
        expect(expected.must_include.filter((s) => !text.includes(s))).toEqual([])
        expect(expected.must_not_include.filter((s) => text.includes(s))).toEqual([])
        expect((expected.whitespace_normalized_include ?? []).filter((s) => !normalized.includes(s))).toEqual([])
        // Headers, footers, footnotes, notes and rendered number formats: in scope for this extractor.
        expect((expected.optional_include ?? []).filter((s) => !text.includes(s))).toEqual([])
        for (const alternatives of expected.any_of ?? []) {
          expect(alternatives.some((s) => text.includes(s)), alternatives.join(" | ")).toBe(true)
        }
      }))
  })
})

describe("The public test documents are present under CI", () => {
  it("finds the manifest, or runs outside CI", () => {
    expect(Corpus.available || process.env["CI"] === undefined).toBe(true)
  })
})
