import { describe, expect, it } from "@effect/vitest"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import * as Tokens from "../src/Tokens.ts"

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
})
