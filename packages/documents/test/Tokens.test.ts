import { describe, expect, it } from "@effect/vitest"
import * as Fc from "fast-check"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import * as Tokens from "../src/Tokens.ts"

const NO_SPECIAL = { disallowedSpecial: new Set<string>(), allowedSpecial: new Set<string>() }

// The guard as a regular expression states it: every maximal run of 256 or more spaces or
// non-spaces is counted in 256-character slices, the text between runs as it is.
const countByRegex = (text: string): number => {
  const plain = (part: string) => part === "" ? 0 : countTokens(part, NO_SPECIAL)
  let total = 0
  let last = 0
  for (const match of text.matchAll(/\S{256,}|\s{256,}/g)) {
    total += plain(text.slice(last, match.index))
    for (let i = 0; i < match[0].length; i += 256) total += plain(match[0].slice(i, i + 256))
    last = match.index + match[0].length
  }
  return total + plain(text.slice(last))
}

const piece = Fc.tuple(
  Fc.constantFrom("a", "word ", "語", "\u00a0", " ", "\n", "\u2003", "\u3000", "\ufeff", "x\u200b", "😀", "1"),
  Fc.oneof(Fc.integer({ min: 1, max: 8 }), Fc.integer({ min: 250, max: 600 }))
).map(([unit, times]) => unit.repeat(times))

describe("Tokens are counted with o200k_base, special-token text as plain text, long runs split", () => {
  it("ordinary text counts exactly as the tokenizer counts it", () => {
    const text = "The quick brown fox jumps over the lazy dog. ".repeat(200)
    expect(Tokens.count(text)).toBe(countTokens(text))
    expect(Tokens.count("")).toBe(0)
  })

  it("text spelling a special token is counted as text instead of throwing", () => {
    expect(Tokens.count("before <|endoftext|> after")).toBeGreaterThan(3)
    expect(Tokens.count("<|endoftext|>")).toBeGreaterThan(1)
  })

  it("a megabyte without whitespace and a megabyte of unspaced CJK are counted (BPE on one run would be quadratic)", () => {
    expect(Tokens.count("a".repeat(1024 * 1024))).toBeGreaterThan(1000)
    expect(Tokens.count("日本語".repeat(350_000))).toBeGreaterThan(1000)
    expect(Tokens.count(" ".repeat(100_000))).toBeGreaterThan(0)
  })

  it("the runs are found exactly where the regular expression \\S{256,}|\\s{256,} finds them", () => {
    Fc.assert(
      Fc.property(Fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join("")
        expect(Tokens.count(text)).toBe(countByRegex(text))
      }),
      { numRuns: 300 }
    )
  })

  it("texts counted in parts and joined count exactly as the joined text", () => {
    const text = Fc.array(Fc.oneof(piece, Fc.constantFrom("Word. ", "end.", "/path", "12345", "it's ", "a b", "x")), { maxLength: 10 })
      .map((pieces) => pieces.join(""))
    Fc.assert(
      Fc.property(Fc.array(text, { minLength: 1, maxLength: 5 }), Fc.constantFrom("\n\n", " ", ""), (texts, separator) => {
        expect(Tokens.countJoined(texts.map(Tokens.piece), separator)).toBe(Tokens.count(texts.join(separator)))
      }),
      { numRuns: 300 }
    )
    const pages = Array.from({ length: 6 }, (_, i) => `Page ${i} ends with a full stop.`)
    expect(Tokens.countJoined(pages.map(Tokens.piece), "\n\n")).toBe(Tokens.count(pages.join("\n\n")))
  })
})

describe("A conversation's bound is never below its count: a token stands for at least one byte", () => {
  const message = Fc.record({
    role: Fc.constantFrom("system", "user", "assistant"),
    content: Fc.oneof(
      Fc.string({ unit: "binary", maxLength: 300 }),
      Fc.array(piece, { maxLength: 6 }).map((pieces) => pieces.join("")),
      Fc.constantFrom("<|endoftext|><|endofprompt|>", "\u0000\uffff", "a".repeat(2_000)),
      Fc.array(Fc.record({ type: Fc.constant("text"), text: Fc.string({ unit: "grapheme", maxLength: 80 }) }), { maxLength: 4 })
    ),
    name: Fc.option(Fc.string({ unit: "grapheme-ascii", maxLength: 20 }), { nil: undefined })
  }, { requiredKeys: ["role", "content"] })

  it("any messages, any text: conversationBound >= conversation", () => {
    Fc.assert(
      Fc.property(Fc.array(message, { maxLength: 6 }), (messages) => {
        expect(Tokens.conversationBound(messages)).toBeGreaterThanOrEqual(Tokens.conversation(messages))
      }),
      { numRuns: 500 }
    )
  })
})
