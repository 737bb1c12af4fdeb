import { ShippedServer, TestDocuments } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Large from "../../../documents/test/Large.ts"

let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start()
})

afterAll(() => server?.stop())

/** A multipart upload with fetch and FormData, the way a user's script sends a file. */
const upload = async (bytes: Uint8Array, name: string, responseFormat?: "json" | "text") => {
  const form = new FormData()
  form.append("file", new Blob([Uint8Array.from(bytes)]), name)
  if (responseFormat !== undefined) form.append("response_format", responseFormat)
  return fetch(`${server.api}/augment/text-parser`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.credentials!.inferenceKey}` },
    body: form
  })
}

const extracted = async (bytes: Uint8Array, name: string) => {
  const response = await upload(bytes, name)
  const body = await response.json() as { text: string; tokens: number }
  expect(response.status, JSON.stringify(body)).toBe(200)
  expect(body.tokens).toBeGreaterThan(0)
  return body.text
}

const squeeze = (text: string) => text.replace(/\s+/g, " ")

describe("Every document format uploaded to the real server comes back as its text", () => {
  const documents = Object.entries(TestDocuments.manifest())

  it.each(documents)("%s: every string its own project's tests expect", async (file, expected) => {
    const text = await extracted(TestDocuments.read(file), file.split("/").at(-1)!)
    expect(expected.must_include.filter((s) => !text.includes(s))).toEqual([])
    expect((expected.whitespace_normalized_include ?? []).filter((s) => !squeeze(text).includes(s))).toEqual([])
  })

  it("a generated PDF (pdfkit, 3 dense pages): the words of every page", async () => {
    const text = squeeze(await extracted(await Large.densePdf(3), "dense.pdf"))
    for (const page of [1, 2, 3]) expect(text).toContain(Large.words(12, page))
  })

  it("a generated DOCX (docx): every paragraph", async () => {
    const text = squeeze(await extracted(await Large.longDocx(5), "long.docx"))
    for (const paragraph of [1, 5]) expect(text).toContain(Large.words(60, paragraph))
  })

  it("a generated PPTX (pptxgenjs): the title and body of each slide", async () => {
    const text = squeeze(await extracted(await Large.bigDeck(2), "deck.pptx"))
    expect(text).toContain(`Slide 1: ${Large.words(6, 1)}`)
    expect(text).toContain(`Slide 2: ${Large.words(6, 2)}`)
  })

  it("a generated XLSX (exceljs): the cells of its rows", async () => {
    const text = await extracted(await Large.bigSheet(4), "sheet.xlsx")
    expect(text).toContain(Large.words(3, 4))
  })

  it("a UTF-8 text file, answered as text/plain with response_format=text", async () => {
    const response = await upload(new TextEncoder().encode("Grüße aus der Datei.\nZweite Zeile.\n"), "notes.txt", "text")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/)
    expect(await response.text()).toBe("Grüße aus der Datei.\nZweite Zeile.\n")
  })
})
