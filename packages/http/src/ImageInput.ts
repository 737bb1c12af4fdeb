/**
 * Reading the image an image operation works on, the two ways the published reference allows: a
 * multipart upload (the image in the `image` part, the other fields as text parts) or a JSON body
 * (`image` as base64 or a data URL). The image may be up to `MAX_IMAGE_BYTES` either way; a larger
 * one is a 413. The other fields come back as sent (strings from a form, JSON values from JSON),
 * for the route's schema to decode.
 *
 * `image_url` is refused: fetching a caller's URL would need the scraper's SSRF rules, and a
 * caller can send the bytes.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import { ByteSize, Effect, type Scope } from "effect"
import { HttpServerRequest } from "effect/http"
import * as MultipartUpload from "./MultipartUpload.ts"
import * as RequestBody from "./RequestBody.ts"

/**
 * The largest image an operation takes, in bytes (the reference's 25 MB).
 *
 * @category constants
 */
export const MAX_IMAGE_BYTES = 25 * 1024 * 1024

/** Base64 is 4/3 of the bytes; the rest is room for the other fields. */
const MAX_JSON = ByteSize.bytes(Math.ceil(MAX_IMAGE_BYTES * 4 / 3) + 64 * 1024)

/** @category models */
export interface Input {
  readonly image: Uint8Array
  readonly fields: Readonly<Record<string, unknown>>
}

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}$/u

const fromJson = (fields: ReadonlyArray<string>) =>
  Effect.gen(function*(): Effect.fn.Return<Input, Errors.ApiError, HttpServerRequest.HttpServerRequest | Scope.Scope> {
    const body = yield* RequestBody.json(MAX_JSON)
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* new Errors.InvalidRequest({ message: "The request body must be a JSON object" })
    }
    const record = body as Record<string, unknown>
    if (record["image_url"] !== undefined) return yield* Errors.invalidField("image_url", "Not supported: send the image itself in image")
    const image = record["image"]
    if (image === undefined) return yield* Errors.invalidField("image", "Required")
    if (typeof image !== "string") return yield* Errors.invalidField("image", "Expected a base64 string or a data URL")
    const base64 = image.startsWith("data:") ? image.slice(image.indexOf(",") + 1) : image
    if (base64.length === 0 || !BASE64.test(base64)) return yield* Errors.invalidField("image", "Expected a base64 string or a data URL")
    const bytes = new Uint8Array(Buffer.from(base64, "base64"))
    if (bytes.length > MAX_IMAGE_BYTES) return yield* MultipartUpload.tooLarge(MAX_IMAGE_BYTES)
    return { image: bytes, fields: Object.fromEntries(fields.flatMap((field) => field in record ? [[field, record[field]]] : [])) }
  })

const fromForm = (fields: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const form = yield* MultipartUpload.read({ maxBytes: MAX_IMAGE_BYTES, fields: [...fields, "image_url"], fileField: "image" })
    if (form.fields["image_url"] !== undefined) return yield* Errors.invalidField("image_url", "Not supported: send the image itself in image")
    yield* MultipartUpload.check(form.problems)
    const { image_url: _, ...rest } = form.fields
    return { image: form.file, fields: rest }
  })

/**
 * The image and the named fields of a multipart or JSON request.
 *
 * @category reading
 */
export const read = (
  fields: ReadonlyArray<string>
): Effect.Effect<Input, Errors.ApiError, HttpServerRequest.HttpServerRequest | Scope.Scope> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    (request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data") ? fromForm(fields) : fromJson(fields))
