/**
 * `POST /augment/text-parser`: a multipart upload (`file`, optional `response_format`) in, the
 * document's text out, as `{text, tokens}` JSON or as text/plain, at a flat price. The request is
 * validated before anything is held or charged, and the document and its text are never logged,
 * written to disk or kept after the response: usage notes record the format only.
 *
 * **Details**
 *
 * The upload is read into memory under the 25 MB cap by `MultipartUpload`, which holds its size
 * against the process's `UploadBudget` while it is in memory; the extraction runs inside the
 * metered pipeline.
 *
 * @since 0.1.0
 */
import { Errors, Money, PricingEngine } from "@tollgate/core"
import type { DocumentRefused, DocumentTooLarge } from "@tollgate/documents/DocumentError"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as MultipartUpload from "../MultipartUpload.ts"

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

const MAX_MB = DocumentExtractor.MAX_BYTES / 1024 / 1024

/**
 * The multipart request, for the OpenAPI document.
 *
 * @category schemas
 */
export const UploadForm = Schema.Struct({
  file: Schema.String.annotate({ contentEncoding: "binary", description: `PDF, DOCX, PPTX, XLSX or plain text; at most ${MAX_MB} MB` }),
  response_format: Schema.optionalKey(Schema.Literals(["json", "text"]))
}).annotate({ identifier: "TextParserRequest" })

/**
 * Reads the form (see `MultipartUpload`): the `file` and `response_format`. Fails with a 400 naming
 * every wrong field, or a 413.
 *
 * @category decoding
 */
export const readUpload = (maxBytes: number) =>
  Effect.gen(function*() {
    const form = yield* MultipartUpload.read({ maxBytes, fields: ["response_format"] })
    const responseFormat = form.fields["response_format"]
    yield* MultipartUpload.check([
      ...form.problems,
      ...(responseFormat !== undefined && responseFormat !== "json" && responseFormat !== "text"
        ? [{ path: ["response_format"], message: "Expected \"json\" or \"text\"" }]
        : [])
    ])
    return { file: form.file, responseFormat: (responseFormat ?? "json") as ResponseFormat } satisfies Upload
  })

/**
 * The client-facing error of a refused document: a 400 naming the reason under `file`, or a 413.
 *
 * @category errors
 */
export const fromExtraction = (error: DocumentRefused | DocumentTooLarge): Errors.ApiError =>
  error._tag === "DocumentTooLarge"
    ? MultipartUpload.tooLarge(error.maxBytes)
    : new Errors.InvalidRequest({
      message: "The file could not be parsed",
      details: Errors.fieldErrors([{ path: ["file"], message: error.message }])
    })

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/augment/text-parser",
  kind: "text",
  serve: Effect.gen(function*() {
    const extractor = yield* DocumentExtractor.DocumentExtractor
    const quote = PricingEngine.textParser(yield* PricingEngine.PricingEngine)
    return {
      decode: readUpload(extractor.maxBytes),
      quote: () => quote,
      execute: (upload: Upload) =>
        Effect.map(Effect.mapError(extractor.extract(upload.file), fromExtraction), ({ format, text, tokens }) => ({
          response: upload.responseFormat === "text"
            ? HttpServerResponse.text(text, { contentType: "text/plain; charset=utf-8" })
            : HttpServerResponse.jsonUnsafe({ text, tokens }),
          charge: quote.amount,
          usage: { units: 1, pricePerUnit: quote.pricePerUnit, notes: format }
        }))
    }
  }),
  docs: {
    summary: "Extract the text of a document",
    description: `Experimental. A multipart upload of a PDF, DOCX, PPTX, XLSX or plain-text file (at most ${MAX_MB} MB; the ` +
      "format is detected from the content) returns its text, as JSON with an o200k_base token count or as " +
      `text/plain. Processed in memory with zero retention. A flat ${Money.formatUsd(PricingEngine.defaults.textParser.perRequest)} USD ` +
      "per request by default.",
    tags: ["Augment"],
    x402Price: (tables) => PricingEngine.textParser(tables).amount,
    request: { contentType: "multipart/form-data", schema: UploadForm },
    responses: {
      200: { description: "The extracted text (`response_format=json`, the default; `text` answers text/plain)", schema: ParsedDocument }
    }
  }
})
