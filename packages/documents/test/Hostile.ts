/**
 * Hostile documents, built by the tests themselves: a minimal zip writer that can lie about sizes
 * and counts, deflate streams that inflate to a gigabyte from about a megabyte (independent
 * sync-flushed blocks of the same chunk, concatenated), and a PDF whose content stream does the same.
 */
import * as Zlib from "node:zlib"

export interface ZipEntry {
  readonly name: string
  readonly data: Uint8Array
  /** Already-deflated bytes to store instead of deflating `data`. */
  readonly deflated?: Uint8Array
  /** The uncompressed size to declare instead of the real one. */
  readonly declaredSize?: number
  readonly stored?: boolean
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2)
  b.writeUInt16LE(n & 0xffff)
  return b
}
const u32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n >>> 0)
  return b
}

export const zip = (entries: ReadonlyArray<ZipEntry>): Uint8Array => {
  const locals: Array<Buffer> = []
  const centrals: Array<Buffer> = []
  let offset = 0
  for (const entry of entries) {
    const name = Buffer.from(entry.name, "utf8")
    const body = entry.stored ? Buffer.from(entry.data) : Buffer.from(entry.deflated ?? Zlib.deflateRawSync(entry.data))
    const crc = entry.deflated === undefined ? Zlib.crc32(entry.data) : 0
    const size = entry.declaredSize ?? entry.data.length
    const method = entry.stored ? 0 : 8
    const common = [u16(20), u16(0x800), u16(method), u16(0), u16(0x21), u32(crc), u32(body.length), u32(size), u16(name.length), u16(0)]
    const local = Buffer.concat([u32(0x04034b50), ...common, name, body])
    centrals.push(Buffer.concat([u32(0x02014b50), u16(20), ...common, u16(0), u16(0), u16(0), u32(0), u32(offset), name]))
    locals.push(local)
    offset += local.length
  }
  const directory = Buffer.concat(centrals)
  const end = Buffer.concat([
    u32(0x06054b50),
    u16(0),
    u16(0),
    u16(entries.length),
    u16(entries.length),
    u32(directory.length),
    u32(offset),
    u16(0)
  ])
  return new Uint8Array(Buffer.concat([...locals, directory, end]))
}

/** Raw deflate of prefix + chunk × times + suffix, without ever holding the inflated whole. */
export const deflateRepeated = (prefix: string, chunk: Uint8Array, times: number, suffix: string): Uint8Array => {
  const sync = { finishFlush: Zlib.constants.Z_SYNC_FLUSH }
  const head = Zlib.deflateRawSync(Buffer.from(prefix), sync)
  const block = Zlib.deflateRawSync(chunk, sync)
  const tail = Zlib.deflateRawSync(Buffer.from(suffix))
  return new Uint8Array(Buffer.concat([head, ...Array.from({ length: times }, () => block), tail]))
}

const W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
const R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"

const contentTypes =
  `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`
const rootRels =
  `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="${R}/officeDocument" Target="word/document.xml"/></Relationships>`

const text = (s: string) => new TextEncoder().encode(s)

/** A DOCX whose document part is `document` (already deflated when given as bytes). */
export const docx = (document: string | { readonly deflated: Uint8Array; readonly declaredSize?: number }): Uint8Array =>
  zip([
    { name: "[Content_Types].xml", data: text(contentTypes) },
    { name: "_rels/.rels", data: text(rootRels) },
    typeof document === "string"
      ? { name: "word/document.xml", data: text(document) }
      : { name: "word/document.xml", data: new Uint8Array(0), ...document }
  ])

export const GIB = 1024 * 1024 * 1024

/** document.xml with one run whose text inflates to about 1 GiB. */
export const docxBomb = (declaredSize?: number): Uint8Array => {
  const chunk = new Uint8Array(1024 * 1024).fill(0x61)
  const deflated = deflateRepeated(
    `<w:document xmlns:w="${W}"><w:body><w:p><w:r><w:t>`,
    chunk,
    1024,
    "</w:t></w:r></w:p></w:body></w:document>"
  )
  return docx(declaredSize === undefined ? { deflated, declaredSize: GIB } : { deflated, declaredSize })
}

export const docxNested = (depth: number): Uint8Array =>
  docx(
    `<w:document xmlns:w="${W}"><w:body>${"<w:tbl><w:tr><w:tc>".repeat(Math.ceil(depth / 3))}<w:p><w:r><w:t>deep</w:t></w:r></w:p>${
      "</w:tc></w:tr></w:tbl>".repeat(Math.ceil(depth / 3))
    }</w:body></w:document>`
  )

export const docxBillionLaughs = (): Uint8Array => {
  const entities = ["<!ENTITY lol \"lol\">"]
  for (let i = 1; i <= 9; i++) entities.push(`<!ENTITY lol${i} "${`&lol${i === 1 ? "" : i - 1};`.repeat(10)}">`)
  return docx(
    `<?xml version="1.0"?><!DOCTYPE w:document [${
      entities.join("")
    }]><w:document xmlns:w="${W}"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>`
  )
}

/**
 * An archive of `count` empty stored entries, written straight into one buffer (a zip writer per
 * entry is too slow at this size). The 16-bit count field wraps, as naive writers leave it.
 */
export const manyEntries = (count: number): Uint8Array => {
  const head = zip([
    { name: "[Content_Types].xml", data: text(contentTypes) },
    { name: "_rels/.rels", data: text(rootRels) }
  ])
  const headView = Buffer.from(head)
  const headDirectory = headView.readUInt32LE(head.length - 22 + 16)
  const headDirectorySize = headView.readUInt32LE(head.length - 22 + 12)
  const locals = headView.subarray(0, headDirectory)
  const centrals = headView.subarray(headDirectory, headDirectory + headDirectorySize)
  const NAME = 8
  const out = Buffer.alloc(locals.length + count * (30 + NAME) + centrals.length + count * (46 + NAME) + 22)
  locals.copy(out, 0)
  let p = locals.length
  const offsets: Array<number> = []
  for (let i = 0; i < count; i++) {
    offsets.push(p)
    out.writeUInt32LE(0x04034b50, p)
    out.writeUInt16LE(20, p + 4)
    out.writeUInt16LE(NAME, p + 26)
    out.write(String(i).padStart(NAME, "0"), p + 30, "latin1")
    p += 30 + NAME
  }
  const directory = p
  centrals.copy(out, p)
  p += centrals.length
  for (let i = 0; i < count; i++) {
    out.writeUInt32LE(0x02014b50, p)
    out.writeUInt16LE(20, p + 4)
    out.writeUInt16LE(20, p + 6)
    out.writeUInt16LE(NAME, p + 28)
    out.writeUInt32LE(offsets[i]!, p + 42)
    out.write(String(i).padStart(NAME, "0"), p + 46, "latin1")
    p += 46 + NAME
  }
  out.writeUInt32LE(0x06054b50, p)
  out.writeUInt16LE((count + 2) & 0xffff, p + 8)
  out.writeUInt16LE((count + 2) & 0xffff, p + 10)
  out.writeUInt32LE(p - directory, p + 12)
  out.writeUInt32LE(directory, p + 16)
  return new Uint8Array(out)
}

/** A one-page PDF whose content stream (spaces) inflates to `times` MiB. */
export const pdfBomb = (times = 1024): Uint8Array => {
  const raw = deflateRepeated("BT ", new Uint8Array(1024 * 1024).fill(0x20), times, " ET")
  const stream = Buffer.concat([Buffer.from([0x78, 0x9c]), Buffer.from(raw), Buffer.alloc(4)])
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>"
  ]
  const parts: Array<Buffer> = [Buffer.from("%PDF-1.4\n")]
  const offsets: Array<number> = []
  let length = parts[0]!.length
  const push = (b: Buffer) => {
    parts.push(b)
    length += b.length
  }
  objects.forEach((body, i) => {
    offsets.push(length)
    push(Buffer.from(`${i + 1} 0 obj\n${body}\nendobj\n`))
  })
  offsets.push(length)
  push(Buffer.from(`4 0 obj\n<< /Length ${stream.length} /Filter /FlateDecode >>\nstream\n`))
  push(stream)
  push(Buffer.from("\nendstream\nendobj\n"))
  const xref = length
  push(
    Buffer.from(
      `xref\n0 5\n0000000000 65535 f \n${
        offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("")
      }trailer\n<< /Size 5 /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
    )
  )
  return new Uint8Array(Buffer.concat(parts))
}

/** A page of `pdf`: text in Helvetica, a content stream inflating to `bombMib` MiB, or a dangling reference. */
export type PdfPage = { readonly text: string } | { readonly bombMib: number } | { readonly missing: true }

/** A PDF of the given pages, written by hand so a page can be broken or hostile. */
export const pdf = (pages: ReadonlyArray<PdfPage>): Uint8Array => {
  const objects: Array<Buffer> = [
    Buffer.from("<< /Type /Catalog /Pages 2 0 R >>"),
    Buffer.alloc(0),
    Buffer.from("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
  ]
  const kids: Array<number> = []
  const add = (body: Buffer) => objects.push(body)
  for (const page of pages) {
    if ("missing" in page) {
      kids.push(9999)
      continue
    }
    const stream = "text" in page
      ? Buffer.from(`BT /F1 12 Tf 72 720 Td (${page.text}) Tj ET`)
      : Buffer.concat([
        Buffer.from([0x78, 0x9c]),
        Buffer.from(deflateRepeated("BT ", new Uint8Array(1024 * 1024).fill(0x20), page.bombMib, " ET")),
        Buffer.alloc(4)
      ])
    const filter = "text" in page ? "" : " /Filter /FlateDecode"
    add(Buffer.concat([Buffer.from(`<< /Length ${stream.length}${filter} >>\nstream\n`), stream, Buffer.from("\nendstream")]))
    add(
      Buffer.from(
        `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${objects.length} 0 R >>`
      )
    )
    kids.push(objects.length)
  }
  objects[1] = Buffer.from(`<< /Type /Pages /Kids [${kids.map((kid) => `${kid} 0 R`).join(" ")}] /Count ${kids.length} >>`)
  const parts: Array<Buffer> = [Buffer.from("%PDF-1.4\n")]
  let length = parts[0]!.length
  const offsets: Array<number> = []
  objects.forEach((body, i) => {
    offsets.push(length)
    const object = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), body, Buffer.from("\nendobj\n")])
    parts.push(object)
    length += object.length
  })
  parts.push(
    Buffer.from(
      `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${
        offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("")
      }trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`
    )
  )
  return new Uint8Array(Buffer.concat(parts))
}
