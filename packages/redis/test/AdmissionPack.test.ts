import { Money } from "@tollgate/core"
import { describe, expect, it } from "vitest"
import * as AdmissionStoreRedis from "../src/AdmissionStoreRedis.ts"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"

const prefixes: AdmissionStoreRedis.Prefixes = { ledger: "tg:cl:", records: "tollgate:idem" }
const account = CreditLedgerRedis.accountKeys(prefixes.ledger, "acct_1")
const counter = { key: "rl:{acct_1}:m", field: "r", rolling: false, limit: 60, amount: 1, windowMs: 60_000, bucketMs: 60_000 } as const
const adjustment = { key: "rl:{acct_1}:d", field: "t", rolling: true, bucket: 7, delta: -120 } as const

describe("Admission script: each operation's KEYS and ARGV are packed by its layout and read back by the same layout", () => {
  it("admit: the account's keys and the paying key's cap, then the hold and periods, then the take", () => {
    const packed = AdmissionStoreRedis.packAdmit(prefixes, {
      now: 1_700_000_000_000,
      accountId: "acct_1",
      spendKeyId: "key_1",
      counters: [counter],
      hold: { amount: Money.unsafeNano(2_500), reference: "req_1:h", priceVersion: "v3", ttlMs: 12_000 }
    })
    const read = AdmissionStoreRedis.unpack(AdmissionStoreRedis.admitLayout, packed)
    expect(read.op).toBe("admit")
    expect(read.now).toBe("1700000000000")
    expect(read.account).toEqual([...account])
    expect(read.keys).toEqual({ cap: "tollgate:cap:{acct_1}:key_1" })
    expect(read.args).toEqual({
      reference: "req_1:h",
      amount: "2500",
      priceVersion: "v3",
      ttlMs: "12000",
      day: expect.any(String),
      month: expect.any(String)
    })
    expect(read.restKeys).toEqual([counter.key])
    expect(read.restArgs.length).toBeGreaterThan(0)
  })

  it("admit without a key paying: no periods, and the cap key stays in the account's slot", () => {
    const packed = AdmissionStoreRedis.packAdmit(prefixes, {
      now: 1,
      accountId: "acct_1",
      counters: [],
      hold: { amount: Money.unsafeNano(1), reference: "r", priceVersion: "v" }
    })
    const read = AdmissionStoreRedis.unpack(AdmissionStoreRedis.admitLayout, packed)
    expect(read.args).toMatchObject({ day: "", month: "" })
    for (const key of Object.values(read.keys)) expect(key).toContain("{acct_1}")
    expect(read.restKeys).toEqual([])
  })

  it("settle: the record and cap, then the capture and the record's response, then the adjustments", () => {
    const usage = { sku: "text-parser", units: 1, pricePerUnit: Money.unsafeNano(10), requestId: "req_1", executionMs: 3 }
    const packed = AdmissionStoreRedis.packSettle(prefixes, {
      now: 5,
      spendKeyId: "key_1",
      capture: { accountId: "acct_1", reference: "req_1:h", amount: Money.unsafeNano(10), usage },
      adjustments: [adjustment],
      completion: { scope: "acct_1", key: "idem-1", response: { status: 200, headers: { "content-type": "application/json" }, body: "{}" } }
    })
    const read = AdmissionStoreRedis.unpack(AdmissionStoreRedis.settleLayout, packed)
    expect(read.op).toBe("settle")
    expect(read.account).toEqual([...account])
    expect(read.keys).toEqual({ record: "tollgate:idem:{acct_1}:idem-1", cap: "tollgate:cap:{acct_1}:key_1" })
    expect(read.args).toEqual({
      reference: "req_1:h",
      amount: "10",
      usage: JSON.stringify(usage),
      status: "200",
      headers: JSON.stringify({ "content-type": "application/json" }),
      body: "{}"
    })
    expect(read.restKeys).toEqual([adjustment.key])
    expect(read.restArgs).toEqual(["7", "-120"])
  })

  it("giveback: the record and cap, then the reference and whether the record is abandoned, then the adjustments", () => {
    const packed = AdmissionStoreRedis.packGiveBack(prefixes, {
      now: 5,
      accountId: "acct_1",
      reference: "req_1:h",
      adjustments: [adjustment],
      abandon: { scope: "acct_1", key: "idem-1" }
    })
    const read = AdmissionStoreRedis.unpack(AdmissionStoreRedis.giveBackLayout, packed)
    expect(read.op).toBe("giveback")
    expect(read.keys).toEqual({ record: "tollgate:idem:{acct_1}:idem-1", cap: "tollgate:cap:{acct_1}:" })
    expect(read.args).toEqual({ reference: "req_1:h", abandon: "1" })
    expect(read.restKeys).toEqual([adjustment.key])
    expect(read.restArgs).toEqual(["7", "-120"])
  })
})
