/**
 * Reading a request's query string through a schema: the parameters (the last value of a repeated
 * name wins) decoded by `RequestBody.decode`, so a bad query is the same 400 DetailedError naming
 * every bad field on every route. Numbers and dates are read strictly: `Number` and `Date.parse`
 * accept `0x10`, `1e2` and `2026-02-30` (as 16, 100 and March 2), which no client means, so the
 * schemas here accept decimal digits and calendar dates only.
 *
 * @since 0.1.0
 */
import type { Errors } from "@tollgate/core"
import { Effect, Schema } from "effect"
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

/**
 * A whole number written in decimal digits (`16`, not `0x10`, `1e1`, `16.0` or ` 16`), decoded to
 * a number; at most 15 digits, so it is exact.
 *
 * @category schemas
 */
export const DecimalInteger = Schema.String.check(
  Schema.isPattern(/^(0|[1-9]\d{0,14})$/u, { message: "must be a whole number in decimal digits" })
).pipe(Schema.decodeTo(Schema.FiniteFromString))

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/u

/**
 * Whether `text` is an ISO 8601 date (optionally with a time) of a day that exists: `2026-02-30`
 * is refused, where `Date.parse` reads it as March 2.
 *
 * @category predicates
 */
export const isCalendarDate = (text: string): boolean => {
  const match = ISO_DATE.exec(text)
  if (match === null || Number.isNaN(Date.parse(text))) return false
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const date = new Date(Date.UTC(year, month - 1, day))
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

/**
 * An ISO 8601 date of a day that exists (`isCalendarDate`), kept as its text.
 *
 * @category schemas
 */
export const IsoDate = Schema.String.check(Schema.makeFilter((text: string) => isCalendarDate(text) ? true : "must be an ISO 8601 date"))
