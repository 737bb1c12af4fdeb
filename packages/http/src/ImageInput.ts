/**
 * Reading the image an image operation works on, the two ways the published reference allows: a
 * multipart upload (the image in the `image` part, the other fields as text parts) or a JSON body
 * (`image` as base64 or a data URL). The image may be up to `MAX_IMAGE_BYTES` either way; a larger
 * one is a 413. The other fields come back as sent (strings from a form, JSON values from JSON),
 * for the route's schema to decode.
 *
 * `image_url` is refused: fetching a caller's URL would need the scraper's SSRF rules, and a
 * caller can send the bytes (so are URLs among a multi-edit's images).
 *
 * A multi-edit sends several images the same two ways (`readMany`): `images` file parts, or an
 * `images` array of base64 strings in JSON; each within `MAX_IMAGE_BYTES`, at most `max` of them.
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
const jsonCap = (images: number) => ByteSize.bytes(Math.ceil(MAX_IMAGE_BYTES * 4 / 3) * images + 64 * 1024)

/** @category models */
export interface Input {
  readonly image: Uint8Array
  readonly fields: Readonly<Record<string, unknown>>
}

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}$/u

/** The bytes of a base64 string or data URL, or `undefined` when it is neither. */
const decodeBase64 = (value: unknown) => {
  if (typeof value !== "string") return undefined
  const base64 = value.startsWith("data:") ? value.slice(value.indexOf(",") + 1) : value
  return base64.length === 0 || !BASE64.test(base64) ? undefined : new Uint8Array(Buffer.from(base64, "base64"))
}

const fromJson = (fields: ReadonlyArray<string>) =>
  Effect.gen(function*(): Effect.fn.Return<Input, Errors.ApiError, HttpServerRequest.HttpServerRequest | Scope.Scope> {
    const body = yield* RequestBody.json(jsonCap(1))
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* new Errors.InvalidRequest({ message: "The request body must be a JSON object" })
    }
    const record = body as Record<string, unknown>
    if (record["image_url"] !== undefined) return yield* Errors.invalidField("image_url", "Not supported: send the image itself in image")
    const image = record["image"]
    if (image === undefined) return yield* Errors.invalidField("image", "Required")
    const bytes = decodeBase64(image)
    if (bytes === undefined) return yield* Errors.invalidField("image", "Expected a base64 string or a data URL")
    if (bytes.length > MAX_IMAGE_BYTES) return yield* MultipartUpload.tooLarge(MAX_IMAGE_BYTES)
    return { image: bytes, fields: picked(record, fields) }
  })

const picked = (record: Record<string, unknown>, fields: ReadonlyArray<string>) =>
  Object.fromEntries(fields.flatMap((field) => field in record ? [[field, record[field]]] : []))

const fromForm = (fields: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const form = yield* MultipartUpload.read({ maxBytes: MAX_IMAGE_BYTES, fields: [...fields, "image_url"], fileField: "image" })
    if (form.fields["image_url"] !== undefined)
      return yield* Errors.invalidField("image_url", "Not supported: send the image itself in image")
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
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) =>
      (request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data") ? fromForm(fields) : fromJson(fields)
  )

/** @category models */
export interface Inputs {
  /** The base image first, then its layers. */
  readonly images: ReadonlyArray<Uint8Array>
  readonly fields: Readonly<Record<string, unknown>>
}

const manyFromJson = (fields: ReadonlyArray<string>, max: number) =>
  Effect.gen(function*(): Effect.fn.Return<Inputs, Errors.ApiError, HttpServerRequest.HttpServerRequest | Scope.Scope> {
    const body = yield* RequestBody.json(jsonCap(max))
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* new Errors.InvalidRequest({ message: "The request body must be a JSON object" })
    }
    const record = body as Record<string, unknown>
    const sent = record["images"]
    if (sent === undefined) return yield* Errors.invalidField("images", "Required")
    if (!Array.isArray(sent) || sent.length === 0)
      return yield* Errors.invalidField("images", "Expected a non-empty array of base64 images")
    if (sent.length > max) return yield* Errors.invalidField("images", `At most ${max} images`)
    const images: Array<Uint8Array> = []
    for (const image of sent) {
      if (typeof image === "string" && /^https?:/iu.test(image))
        return yield* Errors.invalidField("images", "URLs are not supported: send the images themselves")
      const bytes = decodeBase64(image)
      if (bytes === undefined) return yield* Errors.invalidField("images", "Expected base64 strings or data URLs")
      if (bytes.length > MAX_IMAGE_BYTES) return yield* MultipartUpload.tooLarge(MAX_IMAGE_BYTES)
      images.push(bytes)
    }
    return { images, fields: picked(record, fields) }
  })

const manyFromForm = (fields: ReadonlyArray<string>, max: number) =>
  Effect.gen(function*() {
    const form = yield* MultipartUpload.readFiles({ maxBytes: MAX_IMAGE_BYTES, maxFiles: max, fields, fileField: "images" })
    yield* MultipartUpload.check(form.problems)
    return { images: form.files, fields: form.fields }
  })

/**
 * The images (at most `max`) and the named fields of a multipart or JSON multi-edit request.
 *
 * @category reading
 */
export const readMany = (
  fields: ReadonlyArray<string>,
  max: number
): Effect.Effect<Inputs, Errors.ApiError, HttpServerRequest.HttpServerRequest | Scope.Scope> =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) =>
      (request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data")
        ? manyFromForm(fields, max)
        : manyFromJson(fields, max)
  )
