/**
 * Public test documents from other projects' test suites (Apache Tika, pdf.js), kept in
 * `packages/testkit/fixtures/documents` with their source and license (see its README), and the
 * strings those projects' own tests expect to be extracted from them.
 *
 * @since 0.1.0
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The folder of the documents and their manifest. @category constants */
export const root = Path.join(import.meta.dirname, "..", "fixtures", "documents")

/** What a document's own project expects to be extracted from it. @category models */
export interface Expectations {
  readonly format: string
  readonly must_include: ReadonlyArray<string>
  readonly must_not_include: ReadonlyArray<string>
  /** Headers, footers, notes, number formats: content some extractors leave out. */
  readonly optional_include?: ReadonlyArray<string>
  readonly whitespace_normalized_include?: ReadonlyArray<string>
  readonly any_of?: ReadonlyArray<ReadonlyArray<string>>
}

/**
 * Every document, by its path under `root` (e.g. `tika/testPDF.pdf`).
 *
 * @category constructors
 */
export const manifest = (): Readonly<Record<string, Expectations>> =>
  JSON.parse(Fs.readFileSync(Path.join(root, "manifest.json"), "utf8")).files

/** The absolute path of a document. @category constructors */
export const path = (file: string): string => Path.join(root, file)

/** The bytes of a document. @category constructors */
export const read = (file: string): Uint8Array<ArrayBuffer> => Uint8Array.from(Fs.readFileSync(path(file)))
