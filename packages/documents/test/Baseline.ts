/**
 * The bare library call the token counter guards, for the benchmark's side-by-side (the bench
 * package does not depend on gpt-tokenizer itself).
 */
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"

export const countTokensBare = (text: string): number => countTokens(text, { disallowedSpecial: new Set(), allowedSpecial: new Set() })
