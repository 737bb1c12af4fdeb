/**
 * One extraction from bytes to text and token count, as the workers run it: sniff the format from
 * the bytes, hand the bytes to the reader of that format, count the tokens of the result. Every
 * refusal is a `DocumentRefused`; anything unexpected a reader throws is reported as a malformed
 * document, never passed through, so no internal detail reaches a client.
 *
 * @since 0.1.0
 */
import { DocumentRefused, refuse } from "./DocumentError.ts"
import * as Docx from "./Docx.ts"
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

/** @category models */
export interface ExtractedText {
  readonly format: Format
  readonly text: string
}

const textOf = async (bytes: Uint8Array): Promise<ExtractedText> => {
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

// Every refusal passes through as it is; anything else a reader throws becomes a refusal.
const guarded = async <A>(run: () => Promise<A> | A): Promise<A> => {
  try {
    return await run()
  } catch (error) {
    if (error instanceof DocumentRefused) throw error
    if (error instanceof RangeError) throw refuse("output-limit", "The document is too large to process")
    throw refuse("malformed", "The document could not be read")
  }
}

/**
 * Extracts and counts. Rejects with `DocumentRefused` only.
 *
 * @category extracting
 */
export const run = (bytes: Uint8Array): Promise<Extracted> =>
  guarded(async () => {
    const { format, text } = await textOf(bytes)
    return { format, text, tokens: Tokens.count(text) }
  })

/**
 * Extracts without counting, for a text whose tokens are counted across workers (`piece`, then
 * `countJoined`). Rejects with `DocumentRefused` only.
 *
 * @category extracting
 */
export const text = (bytes: Uint8Array): Promise<ExtractedText> => guarded(() => textOf(bytes))

/**
 * One slice of a text counted for joining (see `Tokens.piece`). Rejects with `DocumentRefused` only.
 *
 * @category counting
 */
export const piece = (text: string): Promise<Tokens.Piece> => guarded(() => Tokens.piece(text))

/**
 * The count of the slices of a text joined back together. Rejects with `DocumentRefused` only.
 *
 * @category counting
 */
export const countJoined = (pieces: ReadonlyArray<Tokens.Piece>): Promise<number> => guarded(() => Tokens.countJoined(pieces, ""))

/**
 * One share of a PDF's pages, for a document split across workers, with its text's count made
 * ready for joining.
 *
 * @category models
 */
export interface PdfShare {
  readonly range: Pdf.Range
  readonly tokens: Tokens.Piece
}

/**
 * Extracts one share of a PDF's pages. Rejects with `DocumentRefused` only.
 *
 * @category extracting
 */
export const pdfShare = (bytes: Uint8Array, share: Pdf.Share): Promise<PdfShare> =>
  guarded(async () => {
    const range = await Pdf.extractRange(bytes, share)
    return { range, tokens: Tokens.piece(range.text) }
  })

/**
 * A split PDF's result from its shares in page order: the same text and count as `run` gives for
 * the whole document. Rejects with `DocumentRefused` only.
 *
 * @category extracting
 */
export const pdfJoin = (shares: ReadonlyArray<PdfShare>, inputBytes: number): Promise<Extracted> =>
  guarded(() => {
    const text = Pdf.join(shares.map((share) => share.range), inputBytes)
    const pieces = shares.filter((share) => share.range.text !== "").map((share) => share.tokens)
    return { format: "pdf", text, tokens: Tokens.countJoined(pieces, Pdf.pageSeparator) }
  })
