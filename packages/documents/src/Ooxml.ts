/**
 * What DOCX, PPTX and XLSX share: an Open Packaging Convention zip whose parts are found through
 * relationship files. Parts are located only through relationships (never by guessing names), and
 * relationships with `TargetMode="External"` are dropped, so a document can never make the
 * extractor reach outside the upload.
 *
 * @since 0.1.0
 */
import * as Xml from "./Xml.ts"
import * as Zip from "./Zip.ts"

/** @category models */
export interface Relationship {
  readonly id: string
  /** The last segment of the relationship type, e.g. `officeDocument`, `slide`, `chart`. */
  readonly type: string
  /** The part path inside the archive, resolved against the source part. */
  readonly target: string
}

/** @category models */
export type Kind = "docx" | "pptx" | "xlsx"

const OFFICE_DOCUMENT = "officeDocument"

const resolve = (source: string, target: string): string => {
  const base = target.startsWith("/") ? [] : source.split("/").slice(0, -1)
  for (const segment of target.replace(/^\/+/, "").split("/")) {
    if (segment === "..") base.pop()
    else if (segment !== "." && segment !== "") base.push(segment)
  }
  return base.join("/")
}

const relsPathOf = (part: string): string => {
  const slash = part.lastIndexOf("/")
  return `${part.slice(0, slash + 1)}_rels/${part.slice(slash + 1)}.rels`
}

/**
 * The internal relationships of a part (`""` for the package itself), in document order.
 *
 * @category reading
 */
export const relationships = (archive: Zip.Archive, part: string): Array<Relationship> => {
  const bytes = Zip.read(archive, part === "" ? "_rels/.rels" : relsPathOf(part))
  const found: Array<Relationship> = []
  if (bytes === undefined) return found
  Xml.parse(bytes, {
    open: (name, attributes) => {
      const id = attributes["Id"]
      const type = attributes["Type"]
      const target = attributes["Target"]
      if (name !== "Relationship" || id === undefined || type === undefined || target === undefined) return
      if (attributes["TargetMode"] === "External") return
      found.push({ id, type: type.slice(type.lastIndexOf("/") + 1), target: resolve(part, target) })
    },
    close: () => {},
    text: () => {}
  })
  return found
}

/**
 * The main part of the package (`word/document.xml`, `ppt/presentation.xml`, `xl/workbook.xml`).
 *
 * @category reading
 */
export const mainPart = (archive: Zip.Archive): string | undefined =>
  relationships(archive, "").find((rel) => rel.type === OFFICE_DOCUMENT && archive.entries.has(rel.target))?.target

/**
 * Which OOXML format a package is, from its main part's name.
 *
 * @category reading
 */
export const kindOf = (main: string): Kind | undefined => {
  const file = main.slice(main.lastIndexOf("/") + 1)
  if (file.startsWith("document") && main.startsWith("word/")) return "docx"
  if (file.startsWith("presentation") && main.startsWith("ppt/")) return "pptx"
  if (file.startsWith("workbook") && main.startsWith("xl/")) return "xlsx"
  return undefined
}
