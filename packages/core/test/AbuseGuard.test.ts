import { AbuseGuard } from "@tollgate/core"
import { describe, expect, it } from "vitest"

describe("Abuse guard: a failed attempt is a 4xx the caller caused (a body sent too slowly included); balance answers, duplicates in flight, limits, abandoned requests and 5xx are not", () => {
  it.each([400, 401, 403, 404, 405, 408, 413, 414, 415, 422, 431])("%i counts", (status) => {
    expect(AbuseGuard.countsAsFailure(status)).toBe(true)
  })
  it.each([200, 204, 304, 402, 409, 429, 499, 500, 502, 503, 504])("%i does not count", (status) => {
    expect(AbuseGuard.countsAsFailure(status)).toBe(false)
  })
})
