/**
 * Where the public test documents live: `../shared/test-documents` from the repository root,
 * with a manifest of the strings their own projects' tests expect. Under CI a missing folder is a
 * failure, never a skip.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

export const root = Path.resolve(import.meta.dirname, "../../..", "../shared/test-documents")

export const available = Fs.existsSync(Path.join(root, "manifest.json"))

if (!available && process.env["CI"] !== undefined) {
  throw new Error(`The public test documents are missing: expected ${root}/manifest.json`)
}

export interface Expectations {
  readonly format: string
  readonly must_include: ReadonlyArray<string>
  readonly must_not_include: ReadonlyArray<string>
  readonly optional_include?: ReadonlyArray<string>
  readonly whitespace_normalized_include?: ReadonlyArray<string>
  readonly any_of?: ReadonlyArray<ReadonlyArray<string>>
}

export const manifest = (): Readonly<Record<string, Expectations>> =>
  available ? JSON.parse(Fs.readFileSync(Path.join(root, "manifest.json"), "utf8")).files : {}

export const read = (file: string): Uint8Array => new Uint8Array(Fs.readFileSync(Path.join(root, file)))
