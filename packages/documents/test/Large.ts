/**
 * Large, text-dense documents for the benchmark (`bench/documents.ts`), written with the same npm
 * writers the tests use: a dense many-page PDF, a long DOCX, a many-slide PPTX and a big XLSX.
 * Text is pseudo-random English-like words from a fixed seed, so every run measures the same bytes.
 */
import * as Docx from "docx"
import ExcelJS from "exceljs"
import PDFDocument from "pdfkit"
import PptxGenJSModule from "pptxgenjs"

const PptxGenJS = PptxGenJSModule as unknown as typeof PptxGenJSModule.default

const WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an they " +
  "you were her she there been one all we their has would when if so no will more can who out up about into them its " +
  "culture property creative law copyright freedom market public domain technology internet music film artist work " +
  "history court congress rights owners innovation archive library book").split(" ")

export const words = (count: number, seed = 1): string => {
  let state = seed
  const out: Array<string> = []
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    out.push(WORDS[state % WORDS.length]!)
  }
  return out.join(" ")
}

export const densePdf = (pages: number) =>
  new Promise<Uint8Array>((resolve) => {
    const doc = new PDFDocument({ size: "A4", margin: 20 })
    const chunks: Array<Buffer> = []
    doc.on("data", (chunk: Buffer) => chunks.push(chunk))
    doc.on("end", () => resolve(new Uint8Array(Buffer.concat(chunks))))
    doc.fontSize(6)
    for (let page = 0; page < pages; page++) {
      if (page > 0) doc.addPage()
      doc.text(words(1400, page + 1), { width: 555 })
    }
    doc.end()
  })

export const longDocx = async (paragraphs: number) => {
  const children = Array.from({ length: paragraphs }, (_, i) => new Docx.Paragraph(words(60, i + 1)))
  return new Uint8Array(await Docx.Packer.toBuffer(new Docx.Document({ sections: [{ children }] })))
}

export const bigDeck = async (slides: number) => {
  const deck = new PptxGenJS()
  for (let i = 0; i < slides; i++) {
    const slide = deck.addSlide()
    slide.addText(`Slide ${i + 1}: ${words(6, i + 1)}`, { x: 0.5, y: 0.3, w: 9, h: 0.8 })
    slide.addText(words(120, i + 7), { x: 0.5, y: 1.2, w: 9, h: 4 })
    slide.addNotes(words(40, i + 13))
  }
  return new Uint8Array(await deck.write({ outputType: "nodebuffer", compression: true }) as Buffer)
}

export const bigSheet = async (rows: number) => {
  const workbook = new ExcelJS.Workbook()
  const sheet = workbook.addWorksheet("Data")
  for (let i = 0; i < rows; i++) sheet.addRow([i, words(3, i + 1), i * 1.5, words(2, i + 5), (i % 100) / 100])
  return new Uint8Array(await workbook.xlsx.writeBuffer())
}
