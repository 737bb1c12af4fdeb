/**
 * Why a document was refused. Every guard of the extractor (format sniffing, zip limits, inflate
 * budgets, XML caps, the worker watchdog) fails with one of these, so the HTTP layer can answer a 400
 * that names the reason (or a 413 for an oversized upload) and never a 500.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/**
 * What tripped. `unsupported` and `malformed` are the client's file; the rest are guards against
 * hostile input.
 *
 * @category models
 */
export type Reason =
  | "empty"
  | "unsupported"
  | "malformed"
  | "encrypted"
  | "zip-entries"
  | "zip64"
  | "zip-compression"
  | "inflate-budget"
  | "xml-depth"
  | "xml-dtd"
  | "output-limit"
  | "memory-limit"
  | "time-limit"
  | "crashed"

/**
 * The document cannot be extracted; `message` is safe to show the client and never quotes the
 * document's content.
 *
 * @category errors
 */
export class DocumentRefused extends Data.TaggedError("DocumentRefused")<{
  readonly reason: Reason
  readonly message: string
}> {}

/**
 * The upload is larger than the extractor accepts.
 *
 * @category errors
 */
export class DocumentTooLarge extends Data.TaggedError("DocumentTooLarge")<{
  readonly maxBytes: number
  readonly message: string
}> {}

/** @category constructors */
export const refuse = (reason: Reason, message: string): DocumentRefused => new DocumentRefused({ reason, message })
