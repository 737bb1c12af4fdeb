import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as JsonText from "../src/JsonText.ts"

describe("JsonText.parse keeps every number's source, so stringify writes it back as it came", () => {
  it("numbers a double cannot hold, and ones that print otherwise, round-trip exactly", () => {
    const text = `{"id":12345678901234567890,"a":[1.0,1e3,-0,0.1,9007199254740993],"b":"12345678901234567890"}`
    expect(JSON.stringify(JsonText.parse(text))).toBe(text)
  })
  it("numbers that print as they came stay plain numbers", () => {
    expect(JsonText.parse(`[7,-3,0.5]`)).toEqual([7, -3, 0.5])
    expect(JsonText.isRawNumber((JsonText.parse(`[12345678901234567890]`) as Array<unknown>)[0])).toBe(true)
  })
})

describe("JsonText.elements gives the source text of each element of a top-level array", () => {
  it("strings with brackets, commas, quotes and escapes, nested values, whitespace", () => {
    const text = ` [ {"a":"],[\\"}{,"} , 12345678901234567890 ,"x\\\\",[1,[2]],null,\n{} ] `
    expect(JsonText.elements(text)).toEqual([`{"a":"],[\\"}{,"}`, "12345678901234567890", `"x\\\\"`, "[1,[2]]", "null", "{}"])
    expect(JsonText.elements("[]")).toEqual([])
    expect(JsonText.elements(" [ ] ")).toEqual([])
  })
  it("(property) each element parses to the value at its position", () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue()), fc.boolean(), (values, pretty) => {
        const text = JSON.stringify(values, null, pretty ? 2 : undefined)
        expect(JsonText.elements(text).map((element) => JSON.parse(element))).toEqual(JSON.parse(text))
      }),
      { numRuns: 300 }
    )
  })
})

describe("JsonText.member gives the bytes of one member of a top-level object, as they came", () => {
  const encoder = new TextEncoder()
  const decoder = new TextDecoder()
  const member = (text: string, key: string) => {
    const found = JsonText.member(encoder.encode(text), key)
    return found === undefined ? undefined : decoder.decode(found)
  }

  it("strings with braces, colons, quotes and escapes, nested values, whitespace, multi-byte text, a repeated key", () => {
    const text = ` { "a" : {"b":"}:,{\\\\"} , "c\\"d":[1,{"e":"ü€😀"}],"m":"x\\\\",\n"n" : null, "a":[ "last" ] } `
    expect(JSON.parse(text)).toMatchObject({ a: ["last"], "c\"d": [1, { e: "ü€😀" }], m: "x\\" })
    expect(member(text, "a")).toBe(`[ "last" ]`)
    expect(member(text, `c"d`)).toBe(`[1,{"e":"ü€😀"}]`)
    expect(member(text, "m")).toBe(`"x\\\\"`)
    expect(member(text, "n")).toBe("null")
    expect(member(text, "b")).toBeUndefined()
    expect(member("{}", "a")).toBeUndefined()
  })

  it("(property) each member's bytes parse to the value JSON.parse gives it", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.boolean(), (object, pretty) => {
        const text = JSON.stringify(object, null, pretty ? 2 : undefined)
        for (const key of Object.keys(object)) {
          expect(JSON.parse(member(text, key)!)).toEqual(JSON.parse(text)[key])
        }
      }),
      { numRuns: 300 }
    )
  })
})
