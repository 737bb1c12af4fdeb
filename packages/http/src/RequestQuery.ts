/**
 * Reading a request's query string through a schema: the parameters (the last value of a repeated
 * name wins) decoded by `RequestBody.decode`, so a bad query is the same 400 DetailedError naming
 * every bad field on every route.
 *
 * @since 0.1.0
 */
import type { Errors } from "@tollgate/core"
import { Effect, type Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import * as RequestBody from "./RequestBody.ts"

/**
 * The query parameters as a record.
 *
 * @category reading
 */
export const params = (request: HttpServerRequest.HttpServerRequest): Record<string, string> =>
  Object.fromEntries(new URL(request.url, "http://localhost").searchParams)

/**
 * The query decoded with `schema`; a failure is a 400 under `message`.
 *
 * @category reading
 */
export const schema = <S extends Schema.Decoder<unknown>>(
  schema: S,
  message?: string
): Effect.Effect<S["Type"], Errors.InvalidRequest, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    return yield* RequestBody.decode(schema, params(request), message)
  })
