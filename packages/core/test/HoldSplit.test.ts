import { describe, expect, it } from "vitest"
import * as CreditLedger from "../src/CreditLedger.ts"

describe("Hold split: an amount takes today's allowance first, the rest in USD; a funded hold takes neither", () => {
  it.each<[string, number, number, boolean, number, number]>([
    ["no allowance: all USD", 500, 0, false, 0, 500],
    ["allowance below the amount: all of it, the rest USD", 500, 200, false, 200, 300],
    ["allowance above the amount: the amount", 500, 900, false, 500, 0],
    ["an allowance read below zero counts as none", 500, -100, false, 0, 500],
    ["a zero amount takes nothing", 0, 900, false, 0, 0],
    ["a hold funded by a per-call payment takes neither", 500, 900, true, 0, 0]
  ])("%s", (_, amount, allowance, funded, fromAllowance, fromUsd) => {
    expect(CreditLedger.split(amount, allowance, funded)).toEqual({ fromAllowance, fromUsd })
  })
})
