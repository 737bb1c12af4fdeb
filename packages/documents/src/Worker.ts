/**
 * The entry point of an extraction worker process (see `WorkerPool`). It answers one message per
 * job on its IPC channel and writes nothing anywhere else: the pool starts it with its standard
 * streams closed, and nothing here logs, so no document content leaves the process except in the
 * reply. A job is a whole document; or, for a large document while other workers are idle, its
 * text alone, a slice of that text's token count, the joining of slice counts, one share of a PDF's
 * pages, or the joining of a split PDF's shares.
 *
 * @since 0.1.0
 */
import * as Module from "node:module"
import { DocumentRefused } from "./DocumentError.ts"
import * as Extraction from "./Extraction.ts"
import type * as Pdf from "./Pdf.ts"
import type * as Tokens from "./Tokens.ts"

/** @category models */
export type Job =
  | { readonly _tag: "Extract"; readonly bytes: Uint8Array }
  | { readonly _tag: "ExtractText"; readonly bytes: Uint8Array }
  | { readonly _tag: "CountPiece"; readonly text: string }
  | { readonly _tag: "CountJoined"; readonly pieces: ReadonlyArray<Tokens.Piece> }
  | { readonly _tag: "PdfShare"; readonly bytes: Uint8Array; readonly share: Pdf.Share }
  | { readonly _tag: "PdfJoin"; readonly shares: ReadonlyArray<Extraction.PdfShare>; readonly inputBytes: number }

/** What each job answers. @category models */
export interface Results {
  readonly Extract: Extraction.Extracted
  readonly ExtractText: Extraction.ExtractedText
  readonly CountPiece: Tokens.Piece
  readonly CountJoined: number
  readonly PdfShare: Extraction.PdfShare
  readonly PdfJoin: Extraction.Extracted
}

/** @category models */
export interface Request {
  readonly id: number
  readonly job: Job
}

/** @category models */
export type Reply =
  | { readonly id: number; readonly ok: true; readonly result: Results[Job["_tag"]] }
  | { readonly id: number; readonly ok: false; readonly reason: DocumentRefused["reason"]; readonly message: string }

const reply = (message: Reply) => process.send?.(message)

const perform = (job: Job): Promise<Results[Job["_tag"]]> => {
  switch (job._tag) {
    case "Extract":
      return Extraction.run(job.bytes)
    case "ExtractText":
      return Extraction.text(job.bytes)
    case "CountPiece":
      return Extraction.piece(job.text)
    case "CountJoined":
      return Extraction.countJoined(job.pieces)
    case "PdfShare":
      return Extraction.pdfShare(job.bytes, job.share)
    case "PdfJoin":
      return Extraction.pdfJoin(job.shares, job.inputBytes)
  }
}

process.on("message", (request: Request) => {
  perform(request.job).then(
    (result) => reply({ id: request.id, ok: true, result }),
    (error: unknown) =>
      reply(
        error instanceof DocumentRefused
          ? { id: request.id, ok: false, reason: error.reason, message: error.message }
          : { id: request.id, ok: false, reason: "malformed", message: "The document could not be read" }
      )
  )
})
process.on("disconnect", () => process.exit(0))
// The pool ends a worker with SIGKILL, so whatever its start compiled is written to the compile
// cache (when the server's bin turned it on) now, or never.
Module.flushCompileCache()
process.send?.({ ready: true })
