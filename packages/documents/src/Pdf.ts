/**
 * Text of a PDF through pdf.js (`pdfjs-dist`, the legacy build for Node), page by page in the order
 * pdf.js reads the content: all pages at once, or one share of them when a large PDF is split
 * across idle workers (see `WorkerPool`).
 *
 * **When to use**
 *
 * Only inside the extraction workers: pdf.js has no cap of its own on decoded stream sizes, so this
 * module must run where the parent's watchdog can kill it.
 *
 * **Details**
 *
 * pdf.js is configured as a pure text reader: no font faces, no XFA, no network, and CMaps and
 * standard fonts from the installed package so CJK text decodes. `isEvalSupported: false` is not
 * passed: pdf.js 6.5 no longer compiles font programs with `eval` at all and dropped the option;
 * the installed version is past the CVE-2026-16633 fix.
 *
 * @since 0.1.0
 */
import * as Path from "node:path"
import * as Url from "node:url"
import { getDocument } from "pdfjs-dist/legacy/build/pdf.mjs"
import type { TextContent } from "pdfjs-dist/types/src/display/api.js"
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

const errorName = (error: unknown): string => typeof error === "object" && error !== null && "name" in error ? String(error.name) : ""

/**
 * The text of a share of a PDF's pages, as `extractRange` returns it: the non-empty pages of the
 * range separated by blank lines, and the number of text items read.
 *
 * @category models
 */
export interface Range {
  readonly text: string
  readonly items: number
}

/** @category models */
export interface Share {
  /** Which share, from 0. */
  readonly part: number
  /** How many shares the pages are cut into. */
  readonly parts: number
}

const whole: Share = { part: 0, parts: 1 }

/** What separates the text of two pages. @category constants */
export const pageSeparator = "\n\n"

const tooManyItems = () => refuse("output-limit", "The PDF holds more text items than allowed")
const tooMuchText = (limits: Limits) => refuse("output-limit", `The document holds more than ${limits.maxChars} characters of text`)

/**
 * The text of one share of the pages: share `part` of `parts` is pages
 * `floor(part * n / parts) + 1` to `floor((part + 1) * n / parts)` of `n`, so every worker that
 * opens the same bytes cuts the same ranges without being told the page count. Each range is held
 * to the whole document's limits; `join` then holds the sum to them. Rejects with
 * `DocumentRefused`.
 *
 * @category extracting
 */
export const extractRange = async (
  bytes: Uint8Array,
  share: Share = whole,
  limits: Limits = defaultLimits
): Promise<Range> => {
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
  // The page read ahead, whose failure is moot once the range has been given up.
  let next: Promise<TextContent> | undefined
  try {
    const out = Xml.output(limits.maxChars)
    const maxItems = limits.baseItems + bytes.length
    const first = Math.floor(share.part * document.numPages / share.parts) + 1
    const last = Math.floor((share.part + 1) * document.numPages / share.parts)
    let items = 0
    // One page is always read ahead: pdf.js inflates each page's content stream off the main
    // thread, and the next page's reading fills the wait.
    const read = (number: number) =>
      document.getPage(number).then(async (page) => {
        const content = await page.getTextContent()
        page.cleanup()
        return content
      })
    next = first <= last ? read(first) : undefined
    for (let number = first; number <= last; number++) {
      const content = await next!
      next = number < last ? read(number + 1) : undefined
      let pageText = ""
      for (const item of content.items) {
        if (++items > maxItems) throw tooManyItems()
        if (!("str" in item)) continue
        pageText += item.str
        if (item.hasEOL) pageText += "\n"
      }
      const trimmed = pageText.trim()
      if (trimmed !== "") out.push(out.length() === 0 ? trimmed : pageSeparator + trimmed)
    }
    return { text: out.text(), items }
  } catch (error) {
    next?.catch(() => undefined)
    if (error instanceof DocumentRefused) throw error
    throw refuse("malformed", "The PDF could not be read")
  } finally {
    await task.destroy()
  }
}

/**
 * The document's text from its ranges in page order: exactly what one pass over all the pages
 * gives, refused when the ranges together pass a limit that one pass would have stopped at.
 * Throws `DocumentRefused`.
 *
 * @category extracting
 */
export const join = (ranges: ReadonlyArray<Range>, inputBytes: number, limits: Limits = defaultLimits): string => {
  let items = 0
  const texts: Array<string> = []
  for (const range of ranges) {
    items += range.items
    if (range.text !== "") texts.push(range.text)
  }
  if (items > limits.baseItems + inputBytes) throw tooManyItems()
  const text = texts.join(pageSeparator)
  if (text.length > limits.maxChars) throw tooMuchText(limits)
  return text
}

/**
 * The text of a PDF, pages separated by blank lines; a page with no text (a scan) adds nothing.
 * Rejects with `DocumentRefused`.
 *
 * @category extracting
 */
export const extract = async (bytes: Uint8Array, limits: Limits = defaultLimits): Promise<string> =>
  join([await extractRange(bytes, whole, limits)], bytes.length, limits)
