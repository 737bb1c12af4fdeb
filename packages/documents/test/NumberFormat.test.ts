import { describe, expect, it } from "@effect/vitest"
import * as NumberFormat from "../src/NumberFormat.ts"

describe("Spreadsheet numbers are shown as their cell format renders them, General otherwise", () => {
  it.each(
    [
      [1599.99, "#,##0.00", "1,599.99"],
      [-1599.99, "#,##0.00", "-1,599.99"],
      [1599.99, "$#,##0.00;[Red]($#,##0.00)", "$1,599.99"],
      [-1599.99, "$#,##0.00;[Red]($#,##0.00)", "($1,599.99)"],
      [0.025, "0.00%", "2.50%"],
      [0.025, "0%", "3%"],
      [198356388, "0.00E+00", "1.98E+08"],
      [2.5, "# ?/?", "2 1/2"],
      [0.26041666666666669, "h:mm", "6:15"],
      [0.76041666666666663, "h:mm AM/PM", "6:15 PM"],
      [39219, "d-mmm-yy", "17-May-07"],
      [46159, "yyyy-mm-dd", "2026-05-17"],
      [19.99, "0.00 \"cents\"", "19.99 cents"],
      [9, undefined, "9"],
      [0.1 + 0.2, undefined, "0.3"],
      [12, "General", "12"],
      [5, "[>=100]0;0.00", "5"]
    ] as const
  )("%s with %s is %s", (value, format, shown) => {
    expect(NumberFormat.format(value, format)).toBe(shown)
  })

  it("built-in format ids map to their codes", () => {
    expect(NumberFormat.builtin(10)).toBe("0.00%")
    expect(NumberFormat.builtin(0)).toBeUndefined()
  })
})
