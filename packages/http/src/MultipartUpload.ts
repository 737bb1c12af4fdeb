/**
 * Reading a multipart upload of one file and a few text fields, the same way on every route that
 * takes one (the text parser, audio transcriptions): a file over the cap is a 413, a body that is
 * not multipart a 400, and nothing beyond the cap is buffered or written to disk. What is wrong
 * with the file itself (missing, empty, several) is returned as problems, so a route reports them
 * in one 400 with its own fields' problems.
 *
 * **Details**
 *
 * The file is read as a stream into memory with the cap enforced while reading (Effect's persisted
 * multipart would use temp files), and other parts than the file and the named fields are drained
 * unread. The form holds its size against the process's `UploadBudget` while it is in memory (a 503
 * when the budget is spent).
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import { ByteSize, Effect, Stream } from "effect"
import { HttpIncomingMessage, HttpServerRequest, Multipart } from "effect/http"
import * as BodyDeadline from "./BodyDeadline.ts"
import { UploadBudget } from "./UploadBudget.ts"

/** Room for the other parts and the multipart framing around a file at the cap. */
const FRAMING_BYTES = 64 * 1024

/** The file and a few text fields: more parts than this is not a form any route takes. */
const MAX_PARTS = 16

/** @category models */
export interface Problem {
  readonly path: ReadonlyArray<string>
  readonly message: string
}

/** @category models */
export interface Upload {
  /** Empty when the form has no usable file (see `problems`). */
  readonly file: Uint8Array
  readonly filename: string
  readonly contentType: string
  /** The named text fields that were sent. */
  readonly fields: Readonly<Record<string, string>>
  /** What is wrong with the file part: missing, sent as text, empty, or more than one. */
  readonly problems: ReadonlyArray<Problem>
}

/** @category errors */
export const tooLarge = (maxBytes: number) =>
  new Errors.PayloadTooLarge({ message: `The file is larger than the ${maxBytes / 1024 / 1024} MB limit` })

const fromMultipart = (maxBytes: number) => (error: Multipart.MultipartError): Errors.ApiError => {
  switch (error.reason._tag) {
    case "FileTooLarge":
    case "BodyTooLarge":
      return tooLarge(maxBytes)
    case "FieldTooLarge":
      return new Errors.PayloadTooLarge({ message: `A form field is larger than the ${FRAMING_BYTES} byte limit` })
    case "TooManyParts":
      return new Errors.PayloadTooLarge({ message: `The form has more than the ${MAX_PARTS} parts allowed` })
    default:
      return new Errors.InvalidRequest({ message: "The multipart body could not be read" })
  }
}

/**
 * Reads the form: the `file` part into memory, stopping at `maxBytes`, and the text `fields`
 * named; fails with a 400 when the body is not multipart, a 413 when the file or the form is too large,
 * a 408 when it arrives too slowly (`BodyDeadline`).
 *
 * @category decoding
 */
export const read = (options: {
  readonly maxBytes: number
  readonly fields: ReadonlyArray<string>
  /** The name of the file part; `file` unless told (the image routes take `image`, as OpenAI's do). */
  readonly fileField?: string
}) =>
  Effect.gen(function*() {
    const { maxBytes } = options
    const fileField = options.fileField ?? "file"
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data")) {
      return yield* Errors.invalidParameters([{ path: [fileField], message: "Expected a multipart/form-data upload with a file" }])
    }
    yield* (yield* UploadBudget).hold(maxBytes + FRAMING_BYTES)
    const wanted = new Set(options.fields)
    const chunks: Array<Uint8Array> = []
    const fields: Record<string, string> = {}
    let size = 0
    let files = 0
    let fileAsField = false
    let filename = "file"
    let contentType = "application/octet-stream"
    yield* BodyDeadline.read(
      Stream.runForEach(request.multipartStream, (part): Effect.Effect<void, Errors.ApiError | Multipart.MultipartError> => {
        if (part._tag === "Field") {
          if (wanted.has(part.key)) fields[part.key] = part.value
          if (part.key === fileField) fileAsField = true
          return Effect.void
        }
        if (part.key !== fileField || files++ > 0) return Stream.runDrain(part.content)
        filename = part.name
        contentType = part.contentType
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
        Effect.provideService(Multipart.MaxParts, MAX_PARTS)
      )
    )
    const problems: Array<Problem> = []
    if (files === 0) problems.push({ path: [fileField], message: fileAsField ? "Expected a file upload" : "Required" })
    else if (files > 1) problems.push({ path: [fileField], message: "Expected exactly one file" })
    else if (size === 0) problems.push({ path: [fileField], message: "The file is empty" })
    const file = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    chunks.length = 0
    return { file, filename, contentType, fields, problems } satisfies Upload
  })

/**
 * The 400 of a form's problems, or nothing when there are none.
 *
 * @category errors
 */
export const check = (problems: ReadonlyArray<Problem>): Effect.Effect<void, Errors.InvalidRequest> =>
  problems.length === 0
    ? Effect.void
    : Effect.fail(Errors.invalidParameters(problems))

/** @category models */
export interface Files {
  /** Every part named as the file field, in order, each non-empty and within the cap. */
  readonly files: ReadonlyArray<Uint8Array>
  readonly fields: Readonly<Record<string, string>>
  readonly problems: ReadonlyArray<Problem>
}

/**
 * Reads a form of several files under one field name (`images` of a multi-edit), each capped at
 * `maxBytes` and at most `maxFiles` of them (a 413 past either), and the text `fields` named. The
 * whole form is held against the `UploadBudget`.
 *
 * @category decoding
 */
export const readFiles = (options: {
  readonly maxBytes: number
  readonly maxFiles: number
  readonly fields: ReadonlyArray<string>
  readonly fileField: string
}) =>
  Effect.gen(function*() {
    const { fileField, maxBytes, maxFiles } = options
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data")) {
      return yield* Errors.invalidField(fileField, "Expected a multipart/form-data upload with files")
    }
    const formBytes = maxFiles * maxBytes + FRAMING_BYTES
    yield* (yield* UploadBudget).hold(formBytes)
    const wanted = new Set(options.fields)
    const files: Array<Uint8Array> = []
    const fields: Record<string, string> = {}
    const problems: Array<Problem> = []
    yield* Stream.runForEach(request.multipartStream, (part): Effect.Effect<void, Errors.ApiError | Multipart.MultipartError> => {
      if (part._tag === "Field") {
        if (wanted.has(part.key)) fields[part.key] = part.value
        if (part.key === fileField) problems.push({ path: [fileField], message: "Expected file uploads" })
        return Effect.void
      }
      if (part.key !== fileField) return Stream.runDrain(part.content)
      if (files.length === maxFiles) return Effect.fail(new Errors.PayloadTooLarge({ message: `At most ${maxFiles} files` }))
      const chunks: Array<Uint8Array> = []
      let size = 0
      return Stream.runForEach(part.content, (chunk) => {
        size += chunk.length
        if (size > maxBytes) return Effect.fail(tooLarge(maxBytes))
        chunks.push(chunk)
        return Effect.void
      }).pipe(Effect.map(() => {
        if (size === 0) problems.push({ path: [fileField], message: "A file is empty" })
        else files.push(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
      }))
    }).pipe(
      Effect.catchIf(Multipart.isMultipartError, (error) => Effect.fail(fromMultipart(maxBytes)(error))),
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(formBytes)),
      Effect.provideService(Multipart.MaxFileSize, ByteSize.bytes(maxBytes + FRAMING_BYTES)),
      Effect.provideService(Multipart.MaxFieldSize, ByteSize.bytes(FRAMING_BYTES)),
      Effect.provideService(Multipart.MaxParts, MAX_PARTS + maxFiles)
    )
    if (files.length === 0 && problems.length === 0) problems.push({ path: [fileField], message: "Required" })
    return { files, fields, problems } satisfies Files
  })
