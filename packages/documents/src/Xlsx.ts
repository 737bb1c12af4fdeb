/**
 * Text of an Excel workbook: every sheet in workbook order, its name on a line of its own, then
 * one line per non-empty row with the cell values separated by tabs. Shared and inline strings,
 * booleans and error values are taken as Excel shows them; numbers go through `NumberFormat` with
 * the cell's style, so a value shows as its format renders it (a date as a date, a percentage as a
 * percentage) where the format is one it understands, and as Excel's General rendering otherwise.
 *
 * @since 0.1.0
 */
import * as NumberFormat from "./NumberFormat.ts"
import * as Ooxml from "./Ooxml.ts"
import * as Xml from "./Xml.ts"
import * as Zip from "./Zip.ts"

const sharedStrings = (bytes: Uint8Array | undefined): Array<string> => {
  const strings: Array<string> = []
  if (bytes === undefined) return strings
  let current = ""
  let inText = false
  let phonetic = 0
  Xml.parse(bytes, {
    open: (name) => {
      if (name === "si") current = ""
      else if (name === "rPh") phonetic++
      else if (name === "t") inText = true
    },
    close: (name) => {
      if (name === "si") strings.push(current)
      else if (name === "rPh") phonetic--
      else if (name === "t") inText = false
    },
    text: (text) => {
      if (inText && phonetic === 0) current += text
    }
  })
  return strings
}

interface Styles {
  readonly formats: ReadonlyArray<string | undefined>
}

const styles = (bytes: Uint8Array | undefined): Styles => {
  const formats: Array<string | undefined> = []
  if (bytes === undefined) return { formats }
  const custom = new Map<number, string>()
  const ids: Array<number> = []
  let inCellXfs = false
  Xml.parse(bytes, {
    open: (name, attributes) => {
      if (name === "numFmt") {
        const id = Number(attributes["numFmtId"])
        const code = attributes["formatCode"]
        if (Number.isInteger(id) && code !== undefined) custom.set(id, code)
      } else if (name === "cellXfs") inCellXfs = true
      else if (name === "xf" && inCellXfs) ids.push(Number(attributes["numFmtId"] ?? 0))
    },
    close: (name) => {
      if (name === "cellXfs") inCellXfs = false
    },
    text: () => {}
  })
  for (const id of ids) formats.push(custom.get(id) ?? NumberFormat.builtin(id))
  return { formats }
}

const sheet = (bytes: Uint8Array, strings: ReadonlyArray<string>, style: Styles, out: Xml.Output): void => {
  let row: Array<string> = []
  let type = "n"
  let format: string | undefined
  let value = ""
  let capture = false
  Xml.parse(bytes, {
    open: (name, attributes) => {
      if (name === "c") {
        type = attributes["t"] ?? "n"
        format = style.formats[Number(attributes["s"] ?? 0)]
        value = ""
      } else if (name === "v" || (name === "t" && type === "inlineStr")) capture = true
    },
    close: (name) => {
      if (name === "v" || name === "t") capture = false
      else if (name === "c") {
        const shown = render(type, value, format, strings)
        if (shown !== "") row.push(shown)
      } else if (name === "row") {
        if (row.length > 0) out.push(`${row.join("\t")}\n`)
        row = []
      }
    },
    text: (text) => {
      if (capture) value += text
    }
  })
}

const render = (type: string, value: string, format: string | undefined, strings: ReadonlyArray<string>): string => {
  switch (type) {
    case "s":
      return strings[Number(value)] ?? ""
    case "b":
      return value === "1" ? "TRUE" : value === "0" ? "FALSE" : value
    case "n": {
      if (value === "") return ""
      const number = Number(value)
      return Number.isFinite(number) ? NumberFormat.format(number, format) : value
    }
    default:
      return value
  }
}

/**
 * Appends the workbook's text to `out`. Throws `DocumentRefused`.
 *
 * @category extracting
 */
export const extract = (archive: Zip.Archive, main: string, out: Xml.Output): void => {
  const rels = Ooxml.relationships(archive, main)
  const byId = new Map(rels.map((rel) => [rel.id, rel]))
  const partOf = (type: string) => {
    const rel = rels.find((candidate) => candidate.type === type)
    return rel === undefined ? undefined : Zip.read(archive, rel.target)
  }
  const strings = sharedStrings(partOf("sharedStrings"))
  const style = styles(partOf("styles"))
  const sheets: Array<{ readonly name: string; readonly id: string }> = []
  const workbook = Zip.read(archive, main)
  if (workbook === undefined) return
  Xml.parse(workbook, {
    open: (name, attributes) => {
      const id = attributes["r:id"]
      if (name === "sheet" && id !== undefined) sheets.push({ name: attributes["name"] ?? "", id })
    },
    close: () => {},
    text: () => {}
  })
  for (const { id, name } of sheets) {
    const rel = byId.get(id)
    if (rel === undefined) continue
    const bytes = Zip.read(archive, rel.target)
    if (bytes === undefined) continue
    out.push(`${name}\n`)
    sheet(bytes, strings, style, out)
    out.push("\n")
  }
}
