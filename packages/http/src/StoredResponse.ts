/**
 * A response as the idempotency store keeps it, and the replay of a kept one: what a retried
 * request (the same `Idempotency-Key`, or the same x402 `payment-identifier`) is answered with
 * instead of being served, and paid, a second time.
 *
 * @since 0.1.0
 */
import type * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import { HttpServerResponse } from "effect/http"

/**
 * The kept response, marked `Idempotent-Replayed: true`.
 *
 * @category constructors
 */
export const replayed = (stored: IdempotencyStore.StoredResponse): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.uint8Array(Buffer.from(stored.body, "base64"), {
    status: stored.status,
    headers: { ...stored.headers, "idempotent-replayed": "true" }
  })

/**
 * What is kept of a response: status, headers and body (a streamed body is kept empty).
 *
 * @category constructors
 */
export const toStored = (response: HttpServerResponse.HttpServerResponse): IdempotencyStore.StoredResponse => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) headers[name] = value
  if (response.body._tag === "Uint8Array") headers["content-type"] ??= response.body.contentType
  const bytes = response.body._tag === "Uint8Array" ? response.body.body : new Uint8Array()
  return { status: response.status, headers, body: Buffer.from(bytes).toString("base64") }
}
