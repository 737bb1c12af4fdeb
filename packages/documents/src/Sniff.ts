/**
 * Which format an upload is, decided from its bytes alone: the file name and the part's content
 * type are the client's claims and are never consulted. A zip is only a candidate for OOXML; the
 * extractor confirms DOCX, PPTX or XLSX from the package's main part.
 *
 * @since 0.1.0
 */

/** @category models */
export type Sniffed = "pdf" | "zip" | "text" | "binary"

const PDF = [0x25, 0x50, 0x44, 0x46, 0x2d]

const startsWith = (bytes: Uint8Array, magic: ReadonlyArray<number>, at = 0): boolean => magic.every((byte, i) => bytes[at + i] === byte)

// PDF readers accept junk before the header; the spec allows the header within the first 1 KiB.
const findPdfHeader = (bytes: Uint8Array): boolean => {
  const end = Math.min(bytes.length - PDF.length, 1024)
  for (let i = 0; i <= end; i++) {
    if (bytes[i] === 0x25 && startsWith(bytes, PDF, i)) return true
  }
  return false
}

const SAMPLE = 64 * 1024

/**
 * Whether the bytes look like text in some encoding: UTF-16 with a BOM, or no NUL bytes and
 * almost no C0 control characters other than whitespace in the first 64 KiB.
 *
 * @category guards
 */
export const looksLikeText = (bytes: Uint8Array): boolean => {
  if (startsWith(bytes, [0xff, 0xfe]) || startsWith(bytes, [0xfe, 0xff])) return true
  const end = Math.min(bytes.length, SAMPLE)
  let control = 0
  for (let i = 0; i < end; i++) {
    const byte = bytes[i]!
    if (byte === 0) return false
    if (byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d && byte !== 0x0c && byte !== 0x1b) control++
  }
  return control * 100 <= end
}

/**
 * The format family of the bytes.
 *
 * @category sniffing
 */
export const sniff = (bytes: Uint8Array): Sniffed => {
  if (startsWith(bytes, [0x50, 0x4b, 0x03, 0x04])) return "zip"
  if (findPdfHeader(bytes)) return "pdf"
  return looksLikeText(bytes) ? "text" : "binary"
}
