import { describe, expect, layer } from "@effect/vitest"
import { TestDocuments } from "@tollgate/testkit"
import { Effect } from "effect"
import * as DocumentExtractor from "../src/DocumentExtractor.ts"

const files = Object.entries(TestDocuments.manifest())

describe("Public test documents (Apache Tika, pdf.js): every string their own projects expect is extracted", () => {
  layer(DocumentExtractor.layer({ workers: 2, baseTimeoutMs: 60_000 }), { timeout: 60_000 })("in every format", (it) => {
    it.effect.each(files)("%s", ([file, expected]) =>
      Effect.gen(function*() {
        const extractor = yield* DocumentExtractor.DocumentExtractor
        const { format, text } = yield* extractor.extract(TestDocuments.read(file))
        expect(format).toBe(expected.format)
        const normalized = text.replace(/\s+/g, " ")
        expect(expected.must_include.filter((s) => !text.includes(s))).toEqual([])
        expect(expected.must_not_include.filter((s) => text.includes(s))).toEqual([])
        expect((expected.whitespace_normalized_include ?? []).filter((s) => !normalized.includes(s))).toEqual([])
        // Headers, footers, footnotes, notes and rendered number formats: in scope for this extractor.
        expect((expected.optional_include ?? []).filter((s) => !text.includes(s))).toEqual([])
        for (const alternatives of expected.any_of ?? []) {
          expect(alternatives.some((s: string) => text.includes(s)), alternatives.join(" | ")).toBe(true)
        }
      }))
  })
})

describe("The extractor accepts whatever byte container the HTTP layer hands it", () => {
  layer(DocumentExtractor.layer({ workers: 1, baseTimeoutMs: 60_000 }), { timeout: 60_000 })("a PDF, in every container", (it) => {
    const pdf = TestDocuments.read("tika/testPDF.pdf")
    const padded = new Uint8Array(pdf.length + 16)
    padded.set(pdf, 8)
    it.effect.each(
      [
        ["a Node Buffer (what node:http multipart parts are)", Buffer.from(pdf)],
        ["a Buffer slice of a pooled allocation", Buffer.concat([Buffer.alloc(8), Buffer.from(pdf)]).subarray(8)],
        ["a Uint8Array view at an offset into a larger buffer", padded.subarray(8, 8 + pdf.length)]
      ] as const
    )("%s", ([, bytes]) =>
      Effect.gen(function*() {
        const extractor = yield* DocumentExtractor.DocumentExtractor
        const { format, text } = yield* extractor.extract(bytes)
        expect(format).toBe("pdf")
        expect(text).toContain("Apache Tika")
      }))
  })
})
