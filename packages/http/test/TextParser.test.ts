/**
 * `POST /augment/text-parser` through the real app and pipeline (memory Auth, RateLimiter,
 * CreditLedger, IdempotencyStore) and the real DocumentExtractor with its worker processes.
 */
import { Money, PricingEngine } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { TestDocuments } from "@tollgate/testkit"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers } from "../src/index.ts"
import * as TextParser from "../src/routes/TextParser.ts"
import * as TestApp from "./support/TestApp.ts"

const GRANT = Money.usd(10)
const PRICE = PricingEngine.textParser(PricingEngine.defaults).amount
const MAX = DocumentExtractor.MAX_BYTES

const scope = Effect.runSync(Scope.make())
let web: Handlers.WebHandler
let context: Awaited<ReturnType<typeof buildContext>>

const buildContext = () =>
  TestApp.buildContext(
    TestApp.layerMetered(Layer.mergeAll(PricingEngine.layer(), DocumentExtractor.layer({ workers: 1, baseTimeoutMs: 60_000 }))),
    scope
  )

const newAccount = () => TestApp.seedAccount(context, { label: "text-parser", grant: GRANT })

let alice: Awaited<ReturnType<typeof newAccount>>

beforeAll(async () => {
  context = await buildContext()
  web = Handlers.toWebHandler(App.layer([TextParser.route]).pipe(Layer.provide(Layer.succeedContext(context))))
  alice = await newAccount()
}, 60_000)
afterAll(async () => {
  await web.dispose()
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

const form = (fields: Record<string, string | Blob>) => {
  const body = new FormData()
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === "string") body.append(name, value)
    else body.append(name, value, "upload.bin")
  }
  return body
}

const parse = (body: FormData | string, headers: Record<string, string> = { authorization: alice.authorization }) =>
  web.handler(new Request("http://localhost/api/v1/augment/text-parser", { method: "POST", headers, body }))

const blob = (content: string | Uint8Array) => new Blob([typeof content === "string" ? content : new Uint8Array(content)])

describe("POST /augment/text-parser answers {text, tokens} by default, priced $0.01 flat", () => {
  it("a plain-text upload comes back as its text with its token count, and costs exactly the flat price", async () => {
    const before = await alice.charged()
    const response = await parse(form({ file: blob("Hello, parser.\r\nSecond line.") }))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    expect(await response.json()).toEqual({ text: "Hello, parser.\nSecond line.", tokens: expect.any(Number) })
    expect(await alice.charged() - before).toBe(PRICE)
    expect(response.headers.get("x-balance-remaining")).toBeNull()
  })

  it("a DOCX is detected from its bytes whatever the part is named", async () => {
    const response = await parse(form({ file: new Blob([TestDocuments.read("tika/testWORD_various.docx")], { type: "application/pdf" }) }))
    expect(response.status).toBe(200)
    const body = await response.json() as { text: string; tokens: number }
    expect(body.text).toContain("Here is a numbered list:")
    expect(body.tokens).toBeGreaterThan(100)
  })
})

describe("response_format=text answers the text alone as text/plain", () => {
  it("returns text/plain", async () => {
    const response = await parse(form({ file: blob("only the words"), response_format: "text" }))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/)
    expect(await response.text()).toBe("only the words")
  })
})

describe("A missing file, a bad response_format or an empty file is a 400 DetailedError, with no charge", () => {
  it.each(
    [
      ["no file", () => form({ response_format: "json" }), ["file"]],
      ["a file sent as a text field", () => form({ file: "not a file part" }), ["file"]],
      ["an empty file", () => form({ file: blob("") }), ["file"]],
      ["an unknown response_format", () => form({ file: blob("words"), response_format: "xml" }), ["response_format"]],
      ["both at once", () => form({ response_format: "yaml" }), ["file", "response_format"]]
    ] as const
  )("%s", async (_, body, fields) => {
    const before = await alice.charged()
    const response = await parse(body())
    expect(response.status).toBe(400)
    const json = await response.json() as { error: string; details: Record<string, { _errors: Array<string> }> }
    expect(json.error).toEqual(expect.any(String))
    for (const field of fields) expect(json.details[field]?._errors.length).toBeGreaterThan(0)
    expect(await alice.charged() - before).toBe(0)
  })

  it("a body that is not multipart names the file field", async () => {
    const response = await parse("plain body", { authorization: alice.authorization, "content-type": "text/plain" })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { details: { file: { _errors: Array<string> } } }).details.file._errors).toHaveLength(1)
  })
})

/**
 * A multipart body with one file of `size` bytes of `a`, produced on demand, counting what the
 * server pulled: a body that was buffered whole would have been pulled whole.
 */
const streamedUpload = (size: number, fill = 0x61) => {
  const boundary = "----tollgate-cap-test"
  const head = new TextEncoder().encode(
    `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.txt"\r\ncontent-type: text/plain\r\n\r\n`
  )
  const tail = new TextEncoder().encode(`\r\n--${boundary}--\r\n`)
  const chunk = new Uint8Array(256 * 1024).fill(fill)
  let sent = 0
  let state: "head" | "file" | "tail" | "done" = "head"
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (state === "head") {
        controller.enqueue(head)
        state = "file"
      } else if (state === "file") {
        const n = Math.min(chunk.length, size - sent)
        controller.enqueue(chunk.subarray(0, n))
        sent += n
        if (sent === size) state = "tail"
      } else if (state === "tail") {
        controller.enqueue(tail)
        state = "done"
      } else controller.close()
    }
  }, { highWaterMark: 0 })
  const request = new Request("http://localhost/api/v1/augment/text-parser", {
    method: "POST",
    headers: { authorization: alice.authorization, "content-type": `multipart/form-data; boundary=${boundary}` },
    body,
    duplex: "half"
  } as RequestInit)
  return { request, pulled: () => sent }
}

describe("The 25 MB cap is enforced while streaming: one byte over is a 413 StandardError, with no charge", () => {
  it("the cap plus one byte is refused with a StandardError", async () => {
    const before = await alice.charged()
    const upload = streamedUpload(MAX + 1)
    const over = await web.handler(upload.request)
    expect(over.status).toBe(413)
    expect(await over.json()).toEqual({ error: expect.stringContaining("25 MB") })
    expect(await alice.charged() - before).toBe(0)
  })

  it("a file of exactly the cap is read whole and handed to the extractor (here: refused as binary)", async () => {
    const response = await web.handler(streamedUpload(MAX, 0x00).request)
    expect(response.status).toBe(400)
    expect(((await response.json()) as { details: { file: { _errors: Array<string> } } }).details.file._errors[0]).toMatch(
      /Unsupported file type/
    )
  })

  it("a far larger upload is cut off near the cap, not read to its end", async () => {
    const upload = streamedUpload(4 * MAX)
    const over = await web.handler(upload.request)
    expect(over.status).toBe(413)
    expect(upload.pulled()).toBeLessThan(MAX + 4 * 1024 * 1024)
  })
})

describe("A document the extractor refuses is a 400 naming the reason under file, with no charge", () => {
  it.each(
    [
      ["random bytes", () => crypto.getRandomValues(new Uint8Array(4096)), /Unsupported file type/],
      ["a truncated PDF", () => new TextEncoder().encode("%PDF-1.7\n1 0 obj\n<< /Type /Catalog"), /PDF/]
    ] as const
  )("%s", async (_, bytes, reason) => {
    const before = await alice.charged()
    const response = await parse(form({ file: blob(bytes()) }))
    expect(response.status).toBe(400)
    const json = await response.json() as { details: { file: { _errors: Array<string> } } }
    expect(json.details.file._errors[0]).toMatch(reason)
    expect(await alice.charged() - before).toBe(0)
  })
})

describe("Authentication comes before any work: no credentials is the 402 discovery answer", () => {
  it("answers 402 without reading the document into a charge", async () => {
    const response = await parse(form({ file: blob("words") }), {})
    expect(response.status).toBe(402)
    expect(await response.json()).toEqual(TestApp.operationDiscoveryBody("/api/v1/augment/text-parser"))
  })
})

const filesUnder = (dir: string, since: number, depth = 0): Array<string> => {
  if (depth > 4) return []
  let entries: Array<Fs.Dirent>
  try {
    entries = Fs.readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) return filesUnder(path, since, depth + 1)
    try {
      const stat = Fs.statSync(path)
      return entry.isFile() && stat.mtimeMs >= since && stat.size < 64 * 1024 * 1024 ? [path] : []
    } catch {
      return []
    }
  })
}

describe("Zero retention: the document and its text reach no log and no temporary file", () => {
  it("a marker inside the document appears in no console output and no file written to the temp folder", async () => {
    const marker = `zero-retention-marker-${crypto.randomUUID()}`
    const started = Date.now() - 1000
    const captured: Array<string> = []
    const writes = [process.stdout, process.stderr].map((stream) => {
      const original = stream.write.bind(stream)
      stream.write = ((chunk: unknown, ...rest: Array<never>) => {
        captured.push(String(chunk))
        return original(chunk as string, ...rest)
      }) as typeof stream.write
      return () => {
        stream.write = original
      }
    })
    const consoles = (["log", "info", "warn", "error", "debug"] as const).map((method) => {
      const original = console[method]
      console[method] = (...args: Array<unknown>) => {
        captured.push(args.map(String).join(" "))
      }
      return () => {
        console[method] = original
      }
    })
    try {
      const ok = await parse(form({ file: blob(`Confidential: ${marker}`) }))
      expect(((await ok.json()) as { text: string }).text).toContain(marker)
      const refused = await parse(form({ file: blob(new Uint8Array([0x50, 0x4b, 0x03, 0x04, ...new TextEncoder().encode(marker)])) }))
      expect(refused.status).toBe(400)
      expect(JSON.stringify(await refused.json())).not.toContain(marker)
    } finally {
      for (const restore of [...writes, ...consoles]) restore()
    }
    expect(captured.filter((line) => line.includes(marker))).toEqual([])
    const leaked = filesUnder(Os.tmpdir(), started).filter((path) => {
      try {
        return Fs.readFileSync(path).includes(marker)
      } catch {
        return false
      }
    })
    expect(leaked).toEqual([])
  })
})
