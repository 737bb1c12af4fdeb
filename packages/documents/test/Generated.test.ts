import { expect, layer } from "@effect/vitest"
import * as Docx from "docx"
import { Effect } from "effect"
import ExcelJS from "exceljs"
import PDFDocument from "pdfkit"
import PptxGenJSModule from "pptxgenjs"
import * as DocumentExtractor from "../src/DocumentExtractor.ts"

// The package is CommonJS: at run time its default export is the class itself.
const PptxGenJS = PptxGenJSModule as unknown as typeof PptxGenJSModule.default

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

const expectText = (text: string, include: ReadonlyArray<string>, exclude: ReadonlyArray<string>) => {
  expect(include.filter((s) => !text.includes(s))).toEqual([])
  expect(exclude.filter((s) => text.includes(s))).toEqual([])
}

const inOrder = (text: string, strings: ReadonlyArray<string>) => {
  const positions = strings.map((s) => text.indexOf(s))
  expect(positions).toEqual([...positions].sort((a, b) => a - b))
}

const makeDocx = () => {
  const document = new Docx.Document({
    comments: {
      children: [{ id: 0, author: "Reviewer", date: new Date(0), children: [new Docx.Paragraph("Comment about the opening")] }]
    },
    footnotes: { 1: { children: [new Docx.Paragraph("Footnote with a source")] } },
    sections: [{
      headers: { default: new Docx.Header({ children: [new Docx.Paragraph("Running header line")] }) },
      footers: { default: new Docx.Footer({ children: [new Docx.Paragraph("Running footer line")] }) },
      children: [
        new Docx.Paragraph({
          children: [
            new Docx.CommentRangeStart(0),
            new Docx.TextRun("Opening paragraph of the body"),
            new Docx.CommentRangeEnd(0),
            new Docx.TextRun({ children: [new Docx.CommentReference(0)] }),
            new Docx.FootnoteReferenceRun(1)
          ]
        }),
        new Docx.Paragraph({
          children: [
            new Docx.TextRun("Kept words "),
            new Docx.DeletedTextRun({ id: 1, author: "Editor", date: "2026-01-01T00:00:00Z", text: "Struck-out deletion" })
          ]
        }),
        new Docx.Table({
          rows: [
            new Docx.TableRow({
              children: [
                new Docx.TableCell({ children: [new Docx.Paragraph("Cell north west")] }),
                new Docx.TableCell({ children: [new Docx.Paragraph("Cell north east")] })
              ]
            }),
            new Docx.TableRow({
              children: [
                new Docx.TableCell({ children: [new Docx.Paragraph("Cell south west")] }),
                new Docx.TableCell({ children: [new Docx.Paragraph("Cell south east")] })
              ]
            })
          ]
        }),
        new Docx.Paragraph({
          children: [
            new Docx.ExternalHyperlink({ link: "https://example.invalid/secret-target", children: [new Docx.TextRun("Visible link text")] })
          ]
        }),
        new Docx.Paragraph("Closing paragraph of the body")
      ]
    }]
  })
  return Docx.Packer.toBuffer(document)
}

const makePptx = async () => {
  const deck = new PptxGenJS()
  const first = deck.addSlide()
  first.addText("First slide title", { x: 0.5, y: 0.5, w: 8, h: 1 })
  first.addImage({ data: `image/png;base64,${PNG}`, x: 1, y: 2, w: 1, h: 1, altText: "Alternative text of the logo" })
  first.addNotes("Speaker notes for the first slide")
  const second = deck.addSlide()
  second.addText("Second slide title", { x: 0.5, y: 0.5, w: 8, h: 1 })
  second.addTable([[{ text: "Table head one" }, { text: "Table head two" }], [{ text: "Table body one" }, { text: "Table body two" }]], {
    x: 0.5,
    y: 2,
    w: 8
  })
  const third = deck.addSlide()
  third.addText("Third slide title", { x: 0.5, y: 0.5, w: 8, h: 1 })
  third.addChart(deck.ChartType.bar, [{ name: "Revenue series", labels: ["Quarter alpha", "Quarter beta"], values: [3, 5] }], {
    x: 1,
    y: 1.5,
    w: 6,
    h: 3,
    showTitle: true,
    title: "Chart heading text"
  })
  return await deck.write({ outputType: "nodebuffer" }) as Buffer
}

const makeXlsx = async () => {
  const workbook = new ExcelJS.Workbook()
  const sales = workbook.addWorksheet("Quarterly sales")
  sales.addRow(["Region", "Share", "Amount", "Booked on", "Closed"])
  sales.addRow(["Northern region", 0.125, 1599.99, new Date(Date.UTC(2026, 4, 17)), true])
  sales.getCell("B2").numFmt = "0.0%"
  sales.getCell("C2").numFmt = "#,##0.00"
  sales.getCell("D2").numFmt = "yyyy-mm-dd"
  sales.getCell("C3").value = { formula: "SUM(C2:C2)", result: 1599.99 }
  const notes = workbook.addWorksheet("Second sheet name")
  notes.addRow(["Inline note on the second sheet", 42])
  return Buffer.from(await workbook.xlsx.writeBuffer())
}

const makePdf = (draw: (doc: PDFKit.PDFDocument) => void) =>
  new Promise<Buffer>((resolve) => {
    const doc = new PDFDocument()
    const chunks: Array<Buffer> = []
    doc.on("data", (chunk: Buffer) => chunks.push(chunk))
    doc.on("end", () => resolve(Buffer.concat(chunks)))
    draw(doc)
    doc.end()
  })

const extract = (bytes: Uint8Array) => Effect.flatMap(DocumentExtractor.DocumentExtractor, (extractor) => extractor.extract(bytes))

layer(DocumentExtractor.layer({ workers: 2, baseTimeoutMs: 60_000 }), { timeout: 60_000 })(
  "Documents written by well-known npm writers are extracted completely",
  (it) => {
    it.effect("DOCX (docx): body in order with tables, then headers, footers, footnotes and comments; no deleted text or link targets", () =>
      Effect.gen(function*() {
        const bytes = yield* Effect.promise(makeDocx)
        const { format, text } = yield* extract(new Uint8Array(bytes))
        expect(format).toBe("docx")
        expectText(text, [
          "Opening paragraph of the body",
          "Kept words",
          "Cell north west",
          "Cell north east",
          "Cell south west",
          "Cell south east",
          "Visible link text",
          "Closing paragraph of the body",
          "Running header line",
          "Running footer line",
          "Footnote with a source",
          "Comment about the opening"
        ], ["Struck-out deletion", "example.invalid", "secret-target"])
        inOrder(text, ["Opening paragraph", "Cell north west", "Cell south east", "Closing paragraph"])
      }))

    it.effect("PPTX (pptxgenjs): slides in order with text, alt text, tables, chart text and notes; no layout prompts", () =>
      Effect.gen(function*() {
        const bytes = yield* Effect.promise(makePptx)
        const { format, text } = yield* extract(new Uint8Array(bytes))
        expect(format).toBe("pptx")
        expectText(text, [
          "First slide title",
          "Alternative text of the logo",
          "Speaker notes for the first slide",
          "Second slide title",
          "Table head one",
          "Table body two",
          "Third slide title",
          "Chart heading text",
          "Revenue series",
          "Quarter alpha",
          "Quarter beta"
        ], ["Click to edit Master title style", "Click to add title"])
        inOrder(text, [
          "First slide title",
          "Speaker notes for the first slide",
          "Second slide title",
          "Table body two",
          "Third slide title",
          "Quarter beta"
        ])
      }))

    it.effect("XLSX (exceljs): every sheet by name, with formatted values and cached formula results, never formulas", () =>
      Effect.gen(function*() {
        const bytes = yield* Effect.promise(makeXlsx)
        const { format, text } = yield* extract(new Uint8Array(bytes))
        expect(format).toBe("xlsx")
        expectText(text, [
          "Quarterly sales",
          "Region",
          "Northern region",
          "12.5%",
          "1,599.99",
          "2026-05-17",
          "TRUE",
          "Second sheet name",
          "Inline note on the second sheet",
          "42"
        ], ["SUM(", "0.125", "46159"])
        inOrder(text, ["Quarterly sales", "Northern region", "Second sheet name", "Inline note"])
      }))

    it.effect("PDF (pdfkit): text of every page in order", () =>
      Effect.gen(function*() {
        const bytes = yield* Effect.promise(() =>
          makePdf((doc) => {
            doc.text("Words on the first page of the report")
            doc.addPage()
            doc.text("Conclusions on the second page")
          })
        )
        const { format, text } = yield* extract(new Uint8Array(bytes))
        expect(format).toBe("pdf")
        expectText(text, ["Words on the first page of the report", "Conclusions on the second page"], [])
        inOrder(text, ["Words on the first page", "Conclusions on the second page"])
      }))

    it.effect("an image-only PDF gives empty text, not page-marker noise", () =>
      Effect.gen(function*() {
        const bytes = yield* Effect.promise(() =>
          makePdf((doc) => {
            doc.image(Buffer.from(PNG, "base64"), 50, 50, { width: 300 })
            doc.addPage()
            doc.image(Buffer.from(PNG, "base64"), 50, 50, { width: 300 })
          })
        )
        const result = yield* extract(new Uint8Array(bytes))
        expect(result).toMatchObject({ format: "pdf", text: "", tokens: 0 })
      }))
  }
)
