import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Errors from "../src/Errors.ts"

describe("DetailedError details map each field to {_errors}, nested fields nest", () => {
  it("builds the tree from paths", () => {
    expect(Errors.fieldErrors([
      { path: ["width"], message: "too wide" },
      { path: ["style_references", 0, "url"], message: "not a URL" },
      { path: [], message: "bad request" }
    ])).toEqual({
      _errors: ["bad request"],
      width: { _errors: ["too wide"] },
      style_references: { _errors: [], "0": { _errors: [], url: { _errors: ["not a URL"] } } }
    })
  })

  it("names every bad field of a Schema decoding", () => {
    const Request = Schema.Struct({ a: Schema.Int, b: Schema.Struct({ c: Schema.String }) })
    const result = Schema.decodeUnknownResult(Request)({ a: 1.5, b: { c: 3 } }, { errors: "all" })
    if (result._tag !== "Failure") throw new Error("expected a failure")
    const error = Errors.invalidRequestFromIssue(result.failure.issue)
    expect(Object.keys(error.details ?? {}).sort()).toEqual(["_errors", "a", "b"])
    expect((error.details?.["b"] as Errors.FieldErrors)["c"]).toEqual({ _errors: [expect.any(String)] })
  })
})

describe("Every status of the spec's Errors table has a tagged error", () => {
  it.each(
    [
      [400, "InvalidRequest"],
      [401, "Unauthenticated"],
      [402, "InsufficientBalance"],
      [402, "PaymentRequired"],
      [403, "Forbidden"],
      [410, "Gone"],
      [429, "RateLimited"],
      [500, "InferenceFailed"],
      [503, "ServiceUnavailable"]
    ] as const
  )(
    "%i %s",
    (status, tag) => {
      expect(Errors.statusOf[tag]).toBe(status)
    }
  )
})
