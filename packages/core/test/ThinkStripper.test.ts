import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ThinkStripper } from "../src/index.ts"

const streamed = (pieces: ReadonlyArray<string>): string => {
  const stripper = ThinkStripper.make()
  return pieces.map(stripper.push).join("") + stripper.flush()
}

/** Every way of cutting `text` into two and three pieces. */
const cuts = function*(text: string): Generator<ReadonlyArray<string>> {
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) yield [text.slice(0, i), text.slice(i, j), text.slice(j)]
  }
}

describe("strip_thinking_response: think-tag blocks are removed from the reply", () => {
  it.each([
    ["<think>plan the answer</think>\n\nThe answer is 4.", "The answer is 4."],
    ["Before <think>x</think>after", "Before after"],
    ["Before <think>x</think>\n\nafter", "Before \n\nafter"],
    ["a<think>1</think>b<think>2</think>c", "abc"],
    ["no thinking here", "no thinking here"],
    ["<think>never closed", ""],
    ["keep < and <th and </think without a block", "keep < and <th and </think without a block"],
    ["1 < 2 <thinking> is not a tag", "1 < 2 <thinking> is not a tag"]
  ])("%j -> %j", (input, output) => {
    expect(ThinkStripper.strip(input)).toBe(output)
  })
})

describe("strip_thinking_response: a tag split across stream chunks at ANY boundary is still removed", () => {
  const reply = "<think>step one\nstep two</think>\n\nHi four<think></think> and <think>more</think>five"
  const expected = ThinkStripper.strip(reply)

  it("gives the same text for every cut into two and three chunks", () => {
    expect(expected).toBe("Hi four and five")
    for (const pieces of cuts(reply)) expect(streamed(pieces)).toBe(expected)
  })

  it("gives the same text one character at a time", () => {
    expect(streamed([...reply])).toBe(expected)
  })

  it("gives the same text for random texts and random chunkings", () => {
    const alphabet = fc.constantFrom("<think>", "</think>", "<", "</", "think", ">", "a", " ", "\n")
    fc.assert(fc.property(fc.array(alphabet, { maxLength: 30 }), fc.array(fc.nat(40), { maxLength: 8 }), (parts, at) => {
      const text = parts.join("")
      const points = [...new Set(at.map((n) => n % (text.length + 1)))].sort((a, b) => a - b)
      const pieces = [0, ...points].map((start, i) => text.slice(start, [...points, text.length][i]))
      expect(streamed(pieces)).toBe(ThinkStripper.strip(text))
    }))
  })

  it("emits visible text at once, holding back only a possible tag start", () => {
    const stripper = ThinkStripper.make()
    expect(stripper.push("Hello wor")).toBe("Hello wor")
    expect(stripper.push("ld <thi")).toBe("ld ")
    expect(stripper.push("s is no tag")).toBe("<this is no tag")
  })
})

describe("onThought: the text inside the think blocks is handed over in order, the same for every chunking", () => {
  const reply = "<think>step one\nstep two</think>\n\nHi four<think></think> and <think>more</think>five<think>never closed"

  it("for every cut into two and three chunks", () => {
    for (const pieces of cuts(reply)) {
      let thought = ""
      const stripper = ThinkStripper.make((piece) => void (thought += piece))
      const text = pieces.map(stripper.push).join("") + stripper.flush()
      expect([text, thought]).toEqual(["Hi four and five", "step one\nstep twomorenever closed"])
    }
  })
})
