/**
 * Text of a PDF through pdf.js (`pdfjs-dist`, the legacy build for Node), page by page in the
 * order pdf.js reads the content. pdf.js is configured as a pure text reader: no font faces, no
 * XFA, no network, and CMaps and standard fonts from the installed package so CJK text decodes.
 * (`isEvalSupported: false` is not passed because pdf.js 6.5 no longer compiles font programs with
 * `eval` at all and dropped the option; the installed version is past the CVE-2026-16633 fix.) It has no cap of its own on decoded stream sizes, so this module runs only
 * inside the extraction workers, where the parent's watchdog can kill it.
 *
 * @since 0.1.0
 */
import * as Path from "node:path"
import * as Url from "node:url"
import { getDocument } from "pdfjs-dist/legacy/build/pdf.mjs"
import { DocumentRefused, refuse } from "./DocumentError.ts"
import * as Xml from "./Xml.ts"

const packageRoot = Path.dirname(Url.fileURLToPath(import.meta.resolve("pdfjs-dist/package.json")))
const cMapUrl = `${Path.join(packageRoot, "cmaps")}${Path.sep}`
const standardFontDataUrl = `${Path.join(packageRoot, "standard_fonts")}${Path.sep}`

/** @category models */
export interface Limits {
  /** Text items allowed: a base plus one per input byte (a real page has a few hundred). */
  readonly baseItems: number
  readonly maxChars: number
}

/** @category defaults */
export const defaultLimits: Limits = { baseItems: 20_000, maxChars: Xml.defaultMaxChars }

const errorName = (error: unknown): string =>
  typeof error === "object" && error !== null && "name" in error ? String(error.name) : ""

/**
 * The text of a PDF, pages separated by blank lines; a page with no text (a scan) adds nothing.
 * Rejects with `DocumentRefused`.
 *
 * @category extracting
 */
export const extract = async (bytes: Uint8Array, limits: Limits = defaultLimits): Promise<string> => {
  const task = getDocument({
    data: bytes,
    disableFontFace: true,
    useSystemFonts: false,
    cMapUrl,
    cMapPacked: true,
    standardFontDataUrl,
    stopAtErrors: false,
    enableXfa: false,
    verbosity: 0
  })
  let document
  try {
    document = await task.promise
  } catch (error) {
    await task.destroy()
    if (errorName(error) === "PasswordException") throw refuse("encrypted", "Password-protected PDFs are not supported")
    throw refuse("malformed", "The PDF could not be read")
  }
  try {
    const out = Xml.output(limits.maxChars)
    const maxItems = limits.baseItems + bytes.length
    let items = 0
    for (let number = 1; number <= document.numPages; number++) {
      const page = await document.getPage(number)
      const content = await page.getTextContent()
      let pageText = ""
      for (const item of content.items) {
        if (++items > maxItems) throw refuse("output-limit", "The PDF holds more text items than allowed")
        if (!("str" in item)) continue
        pageText += item.str
        if (item.hasEOL) pageText += "\n"
      }
      page.cleanup()
      const trimmed = pageText.trim()
      if (trimmed !== "") out.push(out.length() === 0 ? trimmed : `\n\n${trimmed}`)
    }
    return out.text()
  } catch (error) {
    if (error instanceof DocumentRefused) throw error
    throw refuse("malformed", "The PDF could not be read")
  } finally {
    await task.destroy()
  }
}
