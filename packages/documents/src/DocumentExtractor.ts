/**
 * The document-to-text service behind `POST /augment/text-parser`: PDF, DOCX, PPTX, XLSX and plain
 * text in, text and its o200k_base token count out. Every refusal is a `DocumentRefused` naming its
 * reason, or a `DocumentTooLarge` for an upload over the size cap; nothing is written to disk or
 * logged.
 *
 * **Details**
 *
 * The format is sniffed from the bytes, never taken from the file name. Every extraction runs in a
 * killable worker process (`WorkerPool`), so a hostile document can cost a worker but not the
 * server. The bytes and the text live only in memory for the call.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import { type DocumentRefused, DocumentTooLarge, refuse } from "./DocumentError.ts"
import type * as Extraction from "./Extraction.ts"
import * as WorkerPool from "./WorkerPool.ts"

/** @category models */
export type Format = Extraction.Format

/** @category models */
export type Extracted = WorkerPool.Outcome

/** @category models */
export interface Options {
  /** Overrides the service's size cap for this call (only downwards). */
  readonly maxBytes?: number
}

/** @category models */
export interface Config extends WorkerPool.Config {
  readonly maxBytes: number
}

/** The spec's upload cap: 25 MB. @category defaults */
export const MAX_BYTES = 25 * 1024 * 1024

/** @category services */
export class DocumentExtractor extends Context.Service<DocumentExtractor, {
  readonly maxBytes: number
  readonly extract: (
    bytes: Uint8Array,
    options?: Options
  ) => Effect.Effect<Extracted, DocumentRefused | DocumentTooLarge>
}>()("@tollgate/documents/DocumentExtractor") {}

/**
 * The extractor on a pool of worker processes, started when the layer is built and killed when it
 * is released.
 *
 * @category layers
 */
export const layer = (overrides: Partial<Config> = {}) =>
  Layer.effect(
    DocumentExtractor,
    Effect.gen(function*() {
      const maxBytes = overrides.maxBytes ?? MAX_BYTES
      const pool = yield* WorkerPool.make(overrides)
      const extract = Effect.fn("DocumentExtractor.extract")(function*(bytes: Uint8Array, options: Options = {}) {
        const cap = Math.min(maxBytes, options.maxBytes ?? maxBytes)
        if (bytes.length > cap) {
          return yield* new DocumentTooLarge({ maxBytes: cap, message: `The file is larger than ${cap} bytes` })
        }
        if (bytes.length === 0) return yield* refuse("empty", "The file is empty")
        return yield* pool.run(bytes)
      })
      return DocumentExtractor.of({ maxBytes, extract })
    })
  )
