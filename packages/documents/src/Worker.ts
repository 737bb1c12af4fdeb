/**
 * The entry point of an extraction worker process (see `WorkerPool`). It answers one message per
 * document on its IPC channel and writes nothing anywhere else: the pool starts it with its
 * standard streams closed, and nothing here logs, so no document content leaves the process
 * except in the reply.
 *
 * @since 0.1.0
 */
import { DocumentRefused } from "./DocumentError.ts"
import * as Extraction from "./Extraction.ts"

/** @category models */
export interface Request {
  readonly id: number
  readonly bytes: Uint8Array
}

/** @category models */
export type Reply =
  | { readonly id: number; readonly ok: true; readonly result: Extraction.Extracted }
  | { readonly id: number; readonly ok: false; readonly reason: DocumentRefused["reason"]; readonly message: string }

const reply = (message: Reply) => process.send?.(message)

process.on("message", (request: Request) => {
  Extraction.run(request.bytes).then(
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
process.send?.({ ready: true })
