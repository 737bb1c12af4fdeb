/**
 * Text of a PowerPoint deck: slides in presentation order (the `p:sldIdLst`, not the part names),
 * each with its shapes' text, tables and alternative text, then the text of its charts and
 * SmartArt, then its speaker notes. Layouts and masters are skipped: their text is placeholder
 * prompts, not content.
 *
 * @since 0.1.0
 */
import * as Ooxml from "./Ooxml.ts"
import * as Xml from "./Xml.ts"
import * as Zip from "./Zip.ts"

const slideText = (bytes: Uint8Array, out: Xml.Output): void => {
  let inText = false
  Xml.parse(bytes, {
    open: (name, attributes) => {
      if (name === "t") inText = true
      else if (name === "br") out.push("\n")
      else if (name === "cNvPr") {
        const alt = attributes["descr"]
        if (alt !== undefined && alt.trim() !== "") out.push(`${alt}\n`)
      }
    },
    close: (name) => {
      if (name === "t") inText = false
      else if (name === "p") out.push("\n")
    },
    text: (text) => {
      if (inText) out.push(text)
    }
  })
}

// Charts keep their titles in DrawingML runs and their series names, categories and values in
// cached `c:v` points.
const chartText = (bytes: Uint8Array, out: Xml.Output): void => {
  let capture = false
  Xml.parse(bytes, {
    open: (name) => {
      if (name === "t" || name === "v") capture = true
    },
    close: (name) => {
      if (name === "t" || name === "v") {
        capture = false
        out.push("\n")
      }
    },
    text: (text) => {
      if (capture) out.push(text)
    }
  })
}

const EXTRAS: ReadonlyArray<readonly [string, (bytes: Uint8Array, out: Xml.Output) => void]> = [
  ["chart", chartText],
  ["diagramData", slideText],
  ["notesSlide", slideText]
]

/**
 * Appends the deck's text to `out`. Throws `DocumentRefused`.
 *
 * @category extracting
 */
export const extract = (archive: Zip.Archive, main: string, out: Xml.Output): void => {
  const byId = new Map(Ooxml.relationships(archive, main).map((rel) => [rel.id, rel]))
  const order: Array<string> = []
  const presentation = Zip.read(archive, main)
  if (presentation === undefined) return
  Xml.parse(presentation, {
    open: (name, attributes) => {
      const id = attributes["r:id"]
      if (name === "sldId" && id !== undefined) order.push(id)
    },
    close: () => {},
    text: () => {}
  })
  for (const id of order) {
    const slide = byId.get(id)
    if (slide === undefined || slide.type !== "slide") continue
    const bytes = Zip.read(archive, slide.target)
    if (bytes === undefined) continue
    slideText(bytes, out)
    const rels = Ooxml.relationships(archive, slide.target)
    for (const [type, read] of EXTRAS) {
      for (const rel of rels) {
        if (rel.type !== type) continue
        const extra = Zip.read(archive, rel.target)
        if (extra !== undefined) read(extra, out)
      }
    }
    out.push("\n")
  }
}
