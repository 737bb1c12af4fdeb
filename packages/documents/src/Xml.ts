/**
 * Streaming XML for OOXML parts, on `saxes`: no DOM, no DTD and no entity expansion (a document
 * with a DOCTYPE is refused outright, which is what defeats billion-laughs), a nesting-depth cap
 * (deeply nested tables are a cheap way to exhaust a recursive consumer), and the part decoded in
 * slices so a large part never becomes one giant string.
 *
 * @since 0.1.0
 */
import { SaxesParser } from "saxes"
import { DocumentRefused, refuse } from "./DocumentError.ts"

/**
 * What a reader of one part does with its events. Names are local names (the `w:` of `w:t` is
 * dropped); attributes keep their qualified names (`r:id`).
 *
 * @category models
 */
export interface Handler {
  readonly open: (name: string, attributes: Readonly<Record<string, string>>) => void
  readonly close: (name: string) => void
  readonly text: (text: string) => void
}

/** @category models */
export interface Limits {
  readonly maxDepth: number
}

/** @category defaults */
export const defaultLimits: Limits = { maxDepth: 256 }

const SLICE = 1024 * 1024

const localName = (name: string): string => {
  const colon = name.indexOf(":")
  return colon === -1 ? name : name.slice(colon + 1)
}

/**
 * Parses one part, calling the handler as it goes. Throws `DocumentRefused`.
 *
 * @category parsing
 */
export const parse = (bytes: Uint8Array, handler: Handler, limits: Limits = defaultLimits): void => {
  const parser = new SaxesParser<{ xmlns: false; position: false }>({ xmlns: false, position: false })
  let depth = 0
  parser.on("doctype", () => {
    throw refuse("xml-dtd", "XML document type declarations are not allowed")
  })
  parser.on("error", () => {
    throw refuse("malformed", "A part of the document is not well-formed XML")
  })
  parser.on("opentag", (tag) => {
    if (++depth > limits.maxDepth) throw refuse("xml-depth", `XML is nested deeper than ${limits.maxDepth} levels`)
    handler.open(localName(tag.name), tag.attributes)
  })
  parser.on("closetag", (tag) => {
    depth--
    handler.close(localName(tag.name))
  })
  parser.on("text", handler.text)
  parser.on("cdata", handler.text)
  const decoder = new TextDecoder("utf-8")
  try {
    for (let offset = 0; offset < bytes.length; offset += SLICE) {
      parser.write(decoder.decode(bytes.subarray(offset, offset + SLICE), { stream: true }))
    }
    parser.write(decoder.decode())
    parser.close()
  } catch (error) {
    if (error instanceof DocumentRefused) throw error
    throw refuse("malformed", "A part of the document is not well-formed XML")
  }
}

/**
 * Collects extracted text with a character cap, so a document cannot produce more text than the
 * service is willing to hold.
 *
 * @category models
 */
export interface Output {
  readonly push: (text: string) => void
  readonly length: () => number
  readonly text: () => string
}

/** @category defaults */
export const defaultMaxChars = 32 * 1024 * 1024

/** @category constructors */
export const output = (maxChars: number = defaultMaxChars): Output => {
  const chunks: Array<string> = []
  let length = 0
  return {
    push: (text) => {
      length += text.length
      if (length > maxChars) throw refuse("output-limit", `The document holds more than ${maxChars} characters of text`)
      chunks.push(text)
    },
    length: () => length,
    text: () => chunks.join("")
  }
}
