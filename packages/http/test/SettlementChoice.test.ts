import { describe, expect, it } from "vitest"
import * as SettlementChoice from "../src/metered/SettlementChoice.ts"

// A call whose response may go first: the store settles over I/O, nothing else stands in the way.
const free: SettlementChoice.Input = {
  outcome: "Outcome",
  settlesInProcess: false,
  paymentSettlesCharge: false,
  holdLeftMs: 60_000,
  idempotencyKey: false,
  completesRecordsInStep: false
}

const margin = SettlementChoice.RESPOND_FIRST_MARGIN_MS

describe("Settlement choice: a paid call's response goes before its settlement only when that gains something and loses nothing", () => {
  it.each<[string, Partial<SettlementChoice.Input>, SettlementChoice.SettlementChoice]>([
    ["a deferred job's hold is handed over", { outcome: "Deferred" }, "Deferred"],
    ["a deferred job's hold is handed over whatever the store", { outcome: "Deferred", settlesInProcess: true, holdLeftMs: 0 }, "Deferred"],
    ["a stream is settled when it ends", { outcome: "Streaming" }, "Stream"],
    ["a stream is settled when it ends, even paid by a permit", { outcome: "Streaming", paymentSettlesCharge: true }, "Stream"],
    ["a store settling over I/O lets the response go first", {}, "RespondFirst"],
    ["a store settling in process is waited for", { settlesInProcess: true }, "SettleThenRespond"],
    ["a permit whose charge is settled on chain before the answer is waited for", { paymentSettlesCharge: true }, "SettleThenRespond"],
    ["a hold with just the margin left is settled first", { holdLeftMs: margin }, "SettleThenRespond"],
    ["a hold with more than the margin left lets the response go first", { holdLeftMs: margin + 1 }, "RespondFirst"],
    ["an expired hold is settled first", { holdLeftMs: -1 }, "SettleThenRespond"],
    ["an Idempotency-Key completed by a later store call is waited for", { idempotencyKey: true }, "SettleThenRespond"],
    ["an Idempotency-Key completed in the settlement's step lets the response go first", {
      idempotencyKey: true,
      completesRecordsInStep: true
    }, "RespondFirst"],
    ["a store completing records in step changes nothing without a key", { completesRecordsInStep: true }, "RespondFirst"]
  ])("%s", (_, changed, expected) => {
    expect(SettlementChoice.choose({ ...free, ...changed })).toBe(expected)
  })
})
