/**
 * One extraction from bytes to text and token count, as the workers run it: sniff the format from
 * the bytes, hand the bytes to the reader of that format, count the tokens of the result. Every
 * refusal is a `DocumentRefused`; anything unexpected a reader throws is reported as a malformed
 * document, never passed through, so no internal detail reaches a client.
 *
 * @since 0.1.0
 */
import * as Docx from "./Docx.ts"
import { DocumentRefused, refuse } from "./DocumentError.ts"
import * as Ooxml from "./Ooxml.ts"
import * as Pdf from "./Pdf.ts"
import * as Pptx from "./Pptx.ts"
import * as Sniff from "./Sniff.ts"
import * as Text from "./Text.ts"
import * as Tokens from "./Tokens.ts"
import * as Xlsx from "./Xlsx.ts"
import * as Xml from "./Xml.ts"
import * as Zip from "./Zip.ts"

/** @category models */
export type Format = "pdf" | "docx" | "pptx" | "xlsx" | "text"

/** @category models */
export interface Extracted {
  readonly format: Format
  readonly text: string
  readonly tokens: number
}

const READERS = { docx: Docx.extract, pptx: Pptx.extract, xlsx: Xlsx.extract } as const

const office = (bytes: Uint8Array): { readonly format: Format; readonly text: string } => {
  const archive = Zip.open(bytes)
  const main = Ooxml.mainPart(archive)
  const kind = main === undefined ? undefined : Ooxml.kindOf(main)
  if (main === undefined || kind === undefined) {
    throw refuse("unsupported", "Unsupported file type: expected PDF, DOCX, PPTX, XLSX or plain text")
  }
  const out = Xml.output()
  READERS[kind](archive, main, out)
  return { format: kind, text: tidy(out.text()) }
}

// Readers end every paragraph, cell and part with a break; collapse the runs this leaves.
const tidy = (text: string): string => text.replace(/[ \t]+\n/g, "\n").replace(/\n{3,}/g, "\n\n").trim()

const textOf = async (bytes: Uint8Array): Promise<{ readonly format: Format; readonly text: string }> => {
  if (bytes.length === 0) throw refuse("empty", "The file is empty")
  switch (Sniff.sniff(bytes)) {
    case "zip":
      return office(bytes)
    case "pdf":
      return { format: "pdf", text: await Pdf.extract(bytes) }
    case "text": {
      const text = Text.decode(bytes)
      if (text.length > Xml.defaultMaxChars) throw refuse("output-limit", "The file holds too much text")
      return { format: "text", text }
    }
    case "binary":
      throw refuse("unsupported", "Unsupported file type: expected PDF, DOCX, PPTX, XLSX or plain text")
  }
}

/**
 * Extracts and counts. Rejects with `DocumentRefused` only.
 *
 * @category extracting
 */
export const run = async (bytes: Uint8Array): Promise<Extracted> => {
  try {
    const { format, text } = await textOf(bytes)
    return { format, text, tokens: Tokens.count(text) }
  } catch (error) {
    if (error instanceof DocumentRefused) throw error
    if (error instanceof RangeError) throw refuse("output-limit", "The document is too large to process")
    throw refuse("malformed", "The document could not be read")
  }
}
