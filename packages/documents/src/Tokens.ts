/**
 * Token counts of extracted text with the o200k_base encoding. Two pitfalls of BPE tokenizers are
 * guarded here: text that spells a special token (`<|endoftext|>`) is counted as the plain text it
 * is instead of throwing, and a long run with no split point (a megabyte of `a`, unspaced CJK) is
 * cut into 256-character slices, because BPE merging is quadratic in the length of a run. Ordinary
 * text has no such runs, so its count is exact.
 *
 * @since 0.1.0
 */
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"

const NO_SPECIAL = { disallowedSpecial: new Set<string>(), allowedSpecial: new Set<string>() }

const RUN = 256
const LONG_RUN = /\S{256,}|\s{256,}/g

const countPlain = (text: string): number => text === "" ? 0 : countTokens(text, NO_SPECIAL)

/**
 * The number of o200k_base tokens in `text`.
 *
 * @category counting
 */
export const count = (text: string): number => {
  let total = 0
  let last = 0
  for (const match of text.matchAll(LONG_RUN)) {
    total += countPlain(text.slice(last, match.index))
    const run = match[0]
    for (let i = 0; i < run.length; i += RUN) total += countPlain(run.slice(i, i + RUN))
    last = match.index + run.length
  }
  return total + countPlain(text.slice(last))
}
