/**
 * `POST /augment/text-parser`: a multipart upload (`file`, optional `response_format`) in, the
 * document's text out, as `{text, tokens}` JSON or as text/plain. The upload is read as a stream
 * into memory with the 25 MB cap enforced while reading, so nothing beyond the cap is buffered and
 * nothing is ever written to disk (Effect's persisted multipart would use temp files); the request
 * is validated before anything is held or charged, and the extraction runs inside the metered
 * pipeline at a flat price. The upload holds its size against the process's `UploadBudget` while it
 * is in memory. The document and its text are never logged and not kept after the
 * response: usage notes record the format only.
 *
 * @since 0.1.0
 */
import { Errors, PricingEngine } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import type { DocumentRefused, DocumentTooLarge } from "@tollgate/documents/DocumentError"
import { ByteSize, Effect, Schema, Stream } from "effect"
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse, Multipart } from "effect/http"
import { Metered } from "../Metered.ts"
import * as Route from "../Route.ts"
import { UploadBudget } from "../UploadBudget.ts"

/** Room for the other parts and the multipart framing around a file at the cap. */
const FRAMING_BYTES = 64 * 1024

/** @category models */
export type ResponseFormat = "json" | "text"

/** @category models */
export interface Upload {
  readonly file: Uint8Array
  readonly responseFormat: ResponseFormat
}

/**
 * The 200 JSON body.
 *
 * @category schemas
 */
export const ParsedDocument = Schema.Struct({
  text: Schema.String,
  tokens: Schema.Int
}).annotate({ identifier: "TextParserResponse" })

/**
 * The multipart request, for the OpenAPI document.
 *
 * @category schemas
 */
export const UploadForm = Schema.Struct({
  file: Schema.String.annotate({ contentEncoding: "binary", description: "PDF, DOCX, PPTX, XLSX or plain text; at most 25 MB" }),
  response_format: Schema.optionalKey(Schema.Literals(["json", "text"]))
}).annotate({ identifier: "TextParserRequest" })

const invalid = (field: string, message: string) =>
  new Errors.InvalidRequest({ message: "Invalid request parameters", details: Errors.fieldErrors([{ path: [field], message }]) })

const tooLarge = (maxBytes: number) =>
  new Errors.PayloadTooLarge({ message: `The file is larger than the ${maxBytes / 1024 / 1024} MB limit` })

const fromMultipart = (maxBytes: number) => (error: Multipart.MultipartError): Errors.ApiError => {
  switch (error.reason._tag) {
    case "FileTooLarge":
    case "BodyTooLarge":
      return tooLarge(maxBytes)
    case "FieldTooLarge":
    case "TooManyParts":
      return new Errors.PayloadTooLarge({ message: "The form has too many or too large fields" })
    default:
      return new Errors.InvalidRequest({ message: "The multipart body could not be read" })
  }
}

/**
 * Reads the form: the `file` part into memory, stopping at the cap; `response_format`; any other
 * part is drained unread. Fails with a 400 naming every wrong field, or a 413.
 *
 * @category decoding
 */
export const readUpload = (maxBytes: number) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data")) {
      return yield* invalid("file", "Expected a multipart/form-data upload with a file")
    }
    yield* (yield* UploadBudget).hold(maxBytes + FRAMING_BYTES)
    const chunks: Array<Uint8Array> = []
    let size = 0
    let files = 0
    let fileAsField = false
    let responseFormat: string | undefined
    yield* Stream.runForEach(request.multipartStream, (part): Effect.Effect<void, Errors.ApiError | Multipart.MultipartError> => {
      if (part._tag === "Field") {
        if (part.key === "response_format") responseFormat = part.value
        if (part.key === "file") fileAsField = true
        return Effect.void
      }
      if (part.key !== "file" || files++ > 0) return Stream.runDrain(part.content)
      return Stream.runForEach(part.content, (chunk) => {
        size += chunk.length
        if (size > maxBytes) return Effect.fail(tooLarge(maxBytes))
        chunks.push(chunk)
        return Effect.void
      })
    }).pipe(
      Effect.catchIf(Multipart.isMultipartError, (error) => Effect.fail(fromMultipart(maxBytes)(error))),
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBytes + FRAMING_BYTES)),
      // The exact cap is the counter above; the parser's own limits are a backstop, with room for
      // the part's headers, which the parser counts into the part's size.
      Effect.provideService(Multipart.MaxFileSize, ByteSize.bytes(maxBytes + FRAMING_BYTES)),
      Effect.provideService(Multipart.MaxFieldSize, ByteSize.bytes(FRAMING_BYTES)),
      Effect.provideService(Multipart.MaxParts, 16)
    )
    const problems: Array<{ readonly path: ReadonlyArray<string>; readonly message: string }> = []
    if (files === 0) problems.push({ path: ["file"], message: fileAsField ? "Expected a file upload" : "Required" })
    else if (files > 1) problems.push({ path: ["file"], message: "Expected exactly one file" })
    else if (size === 0) problems.push({ path: ["file"], message: "The file is empty" })
    if (responseFormat !== undefined && responseFormat !== "json" && responseFormat !== "text") {
      problems.push({ path: ["response_format"], message: "Expected \"json\" or \"text\"" })
    }
    if (problems.length > 0) {
      return yield* new Errors.InvalidRequest({ message: "Invalid request parameters", details: Errors.fieldErrors(problems) })
    }
    const file = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    chunks.length = 0
    return { file, responseFormat: (responseFormat ?? "json") as ResponseFormat } satisfies Upload
  })

/**
 * The client-facing error of a refused document: a 400 naming the reason under `file`, or a 413.
 *
 * @category errors
 */
export const fromExtraction = (error: DocumentRefused | DocumentTooLarge): Errors.ApiError =>
  error._tag === "DocumentTooLarge"
    ? tooLarge(error.maxBytes)
    : new Errors.InvalidRequest({
      message: "The file could not be parsed",
      details: Errors.fieldErrors([{ path: ["file"], message: error.message }])
    })

/** @category routes */
export const route = Route.make(
  "POST",
  "/api/v1/augment/text-parser",
  Effect.gen(function*() {
    const metered = yield* Metered
    const extractor = yield* DocumentExtractor.DocumentExtractor
    const quote = PricingEngine.textParser(yield* PricingEngine.PricingEngine)
    return Effect.gen(function*() {
      const upload = yield* readUpload(extractor.maxBytes)
      return yield* metered.run({
        sku: quote.sku,
        kind: "text",
        quote,
        execute: () =>
          Effect.gen(function*() {
            const { format, text, tokens } = yield* extractor.extract(upload.file).pipe(Effect.mapError(fromExtraction))
            const response = upload.responseFormat === "text"
              ? HttpServerResponse.text(text, { contentType: "text/plain; charset=utf-8" })
              : HttpServerResponse.jsonUnsafe({ text, tokens })
            return { response, charge: quote.amount, usage: { units: 1, pricePerUnit: quote.pricePerUnit, notes: format } }
          })
      })
    })
  }),
  {
    summary: "Extract the text of a document",
    description: "Experimental. A multipart upload of a PDF, DOCX, PPTX, XLSX or plain-text file (at most 25 MB; the " +
      "format is detected from the content) returns its text, as JSON with an o200k_base token count or as " +
      "text/plain. Processed in memory with zero retention. A flat 0.01 USD per request.",
    tags: ["Augment"],
    security: "metered",
    request: { contentType: "multipart/form-data", schema: UploadForm },
    responses: {
      200: { description: "The extracted text (`response_format=json`, the default; `text` answers text/plain)", schema: ParsedDocument }
    }
  }
)
