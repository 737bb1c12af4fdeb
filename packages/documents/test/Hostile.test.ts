import { expect, layer } from "@effect/vitest"
import { TestDocuments } from "@tollgate/testkit"
import { Effect, Layer } from "effect"
import * as DocumentExtractor from "../src/DocumentExtractor.ts"
import * as Zip from "../src/Zip.ts"
import * as Hostile from "./Hostile.ts"

const reasonOf = (bytes: Uint8Array) =>
  Effect.gen(function*() {
    const extractor = yield* DocumentExtractor.DocumentExtractor
    const error = yield* Effect.flip(extractor.extract(bytes))
    return error._tag === "DocumentRefused" ? error.reason : error._tag
  })

layer(DocumentExtractor.layer({ workers: 2, baseTimeoutMs: 30_000 }), { timeout: 60_000 })(
  "Hostile OOXML is refused, naming the reason",
  (it) => {
    it.effect("a DOCX whose XML inflates to 1 GiB stops at the inflate budget", () =>
      Effect.gen(function*() {
        expect(yield* reasonOf(Hostile.docxBomb())).toBe("inflate-budget")
      }))

    it.effect("a DOCX that declares 4 KB for its 1 GiB part is refused the same way: declared sizes are ignored", () =>
      Effect.gen(function*() {
        expect(yield* reasonOf(Hostile.docxBomb(4096))).toBe("inflate-budget")
      }))

    it.effect("an archive of 200,000 entries is refused before anything is inflated, even with a wrapped count field", () =>
      Effect.gen(function*() {
        expect(yield* reasonOf(Hostile.manyEntries(200_000))).toBe("zip-entries")
      }))

    it.effect("XML nested 100,000 deep is refused at the depth cap", () =>
      Effect.gen(function*() {
        expect(yield* reasonOf(Hostile.docxNested(100_000))).toBe("xml-depth")
      }))

    it.effect("billion laughs is refused: a DTD is never read, so no entity is expanded", () =>
      Effect.gen(function*() {
        expect(yield* reasonOf(Hostile.docxBillionLaughs())).toBe("xml-dtd")
      }))

    it.effect("zip64, encrypted entries and unknown compression methods are refused", () =>
      Effect.gen(function*() {
        const plain = Hostile.docx("<w:document/>")
        const view = Buffer.from(plain)
        const central = view.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
        const encrypted = Buffer.from(view)
        encrypted.writeUInt16LE(0x801, central + 8)
        const bzip2 = Buffer.from(view)
        bzip2.writeUInt16LE(12, central + 10)
        const zip64 = Buffer.from(view)
        zip64.writeUInt32LE(0xffffffff, central + 24)
        expect(yield* reasonOf(new Uint8Array(encrypted))).toBe("encrypted")
        expect(yield* reasonOf(new Uint8Array(bzip2))).toBe("zip-compression")
        expect(yield* reasonOf(new Uint8Array(zip64))).toBe("zip64")
      }))

    it.effect("random bytes and a non-Office zip are an unsupported file type", () =>
      Effect.gen(function*() {
        const random = new Uint8Array(64 * 1024)
        for (let i = 0; i < random.length; i += 65536) crypto.getRandomValues(random.subarray(i, i + 65536))
        expect(yield* reasonOf(random)).toBe("unsupported")
        expect(yield* reasonOf(Hostile.zip([{ name: "a.txt", data: new Uint8Array([0x61]) }]))).toBe("unsupported")
      }))

    it.effect("an external relationship target is never followed", () =>
      Effect.gen(function*() {
        const archive = Zip.open(Hostile.zip([
          {
            name: "_rels/.rels",
            data: new TextEncoder().encode(
              `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="file:///etc/passwd" TargetMode="External"/></Relationships>`
            )
          }
        ]))
        const extractor = yield* DocumentExtractor.DocumentExtractor
        expect(archive.entries.size).toBe(1)
        const error = yield* Effect.flip(extractor.extract(archive.bytes))
        expect(error._tag === "DocumentRefused" && error.reason).toBe("unsupported")
      }))
  }
)

layer(
  // A generous clock, so that on a loaded machine it is the memory watchdog that stops the bomb.
  DocumentExtractor.layer({ workers: 1, maxRssBytes: 384 * 1024 * 1024, baseTimeoutMs: 60_000 }).pipe(Layer.fresh),
  { timeout: 60_000 }
)("A PDF whose stream inflates to 1 GiB is killed by the watchdog, and the worker is replaced", (it) => {
  it.effect("the bomb is refused for memory, and the next document is extracted by a fresh worker", () =>
    Effect.gen(function*() {
      const extractor = yield* DocumentExtractor.DocumentExtractor
      expect(yield* reasonOf(Hostile.pdfBomb())).toBe("memory-limit")
      const next = yield* extractor.extract(TestDocuments.read("tika/testPDF.pdf"))
      expect(next.format).toBe("pdf")
      expect(next.text).toContain("Apache Tika")
    }))

  it.effect("a worker past its wall-clock budget is killed and answered as a time limit", () =>
    Effect.gen(function*() {
      const slow = yield* Effect.flip(
        Effect.gen(function*() {
          const extractor = yield* DocumentExtractor.DocumentExtractor
          return yield* extractor.extract(Hostile.pdfBomb())
        }).pipe(Effect.provide(DocumentExtractor.layer({ workers: 1, baseTimeoutMs: 300, timeoutMsPerMb: 0 })))
      )
      expect(slow._tag === "DocumentRefused" && slow.reason).toBe("time-limit")
    }))
})
