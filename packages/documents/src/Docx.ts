/**
 * Text of a Word document: the body in order (paragraphs, tables, text boxes), then headers,
 * footers, footnotes, endnotes and comments. Only run text (`w:t`) is taken, so field codes,
 * deleted text and the duplicate fallback copy of a text box (`mc:Fallback`) stay out.
 *
 * @since 0.1.0
 */
import * as Ooxml from "./Ooxml.ts"
import * as Xml from "./Xml.ts"
import * as Zip from "./Zip.ts"

const SECONDARY = ["header", "footer", "footnotes", "endnotes", "comments"]

const part = (archive: Zip.Archive, path: string, out: Xml.Output): void => {
  const bytes = Zip.read(archive, path)
  if (bytes === undefined) return
  const stack: Array<string> = []
  let skip = 0
  let inText = false
  Xml.parse(bytes, {
    open: (name) => {
      const parent = stack[stack.length - 1]
      stack.push(name)
      if (skip > 0 || name === "Fallback") {
        skip++
        return
      }
      if (name === "t") inText = true
      else if (parent === "r") {
        if (name === "tab") out.push("\t")
        else if (name === "br" || name === "cr") out.push("\n")
        else if (name === "noBreakHyphen") out.push("-")
      }
    },
    close: (name) => {
      stack.pop()
      if (skip > 0) {
        skip--
        return
      }
      if (name === "t") inText = false
      else if (name === "p") out.push("\n")
      else if (name === "tc") out.push("\t")
      else if (name === "tr") out.push("\n")
    },
    text: (text) => {
      if (inText && skip === 0) out.push(text)
    }
  })
}

/**
 * Appends the document's text to `out`. Throws `DocumentRefused`.
 *
 * @category extracting
 */
export const extract = (archive: Zip.Archive, main: string, out: Xml.Output): void => {
  part(archive, main, out)
  const rels = Ooxml.relationships(archive, main)
  for (const type of SECONDARY) {
    for (const rel of rels) {
      if (rel.type !== type) continue
      out.push("\n")
      part(archive, rel.target, out)
    }
  }
}
