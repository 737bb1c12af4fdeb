/**
 * Token counts of extracted text, and of chat conversations, with the o200k_base encoding. Ordinary
 * text is counted exactly, a text that spells a special token is counted as plain text, and no
 * input makes counting quadratic.
 *
 * **When to use**
 *
 * A text counted in parts on several workers (a split PDF's shares, the slices of a long text) is
 * counted with `piece` and `countJoined`, to the same total as counting it whole.
 *
 * **Details**
 *
 * Two pitfalls of BPE tokenizers are guarded here: text that spells a special token
 * (`<|endoftext|>`) is counted as the plain text it is instead of throwing, and a long run with no
 * split point (a megabyte of `a`, unspaced CJK) is cut into 256-character slices, because BPE
 * merging is quadratic in the length of a run. Ordinary text has no such runs, so its count is
 * exact.
 *
 * @since 0.1.0
 */
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"

const NO_SPECIAL = { disallowedSpecial: new Set<string>(), allowedSpecial: new Set<string>() }

const RUN = 256

// The characters `\s` matches in a JavaScript regular expression; ASCII through a table.
const ASCII_SPACE = Uint8Array.from({ length: 128 }, (_, code) => code === 0x20 || (code >= 0x09 && code <= 0x0d) ? 1 : 0)
const isSpace = (code: number): boolean =>
  code < 128
    ? ASCII_SPACE[code] === 1
    : code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 ||
      code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff

const countPlain = (text: string): number => text === "" ? 0 : countTokens(text, NO_SPECIAL)

/**
 * The number of o200k_base tokens in `text`.
 *
 * @category counting
 */
export const count = (text: string): number => {
  let total = 0
  let last = 0
  // One pass over the maximal runs of spaces and of non-spaces; a run of RUN or more is counted
  // in slices. (The regular expression `\S{256,}|\s{256,}` finds the same runs, but retries up to
  // 255 characters at every position, which made it about a third of the counting time.)
  const length = text.length
  let i = 0
  while (i < length) {
    const start = i
    const space = isSpace(text.charCodeAt(i++))
    while (i < length && isSpace(text.charCodeAt(i)) === space) i++
    if (i - start < RUN) continue
    total += countPlain(text.slice(last, start))
    for (let j = start; j < i; j += RUN) total += countPlain(text.slice(j, Math.min(i, j + RUN)))
    last = i
  }
  return total + countPlain(text.slice(last))
}

/**
 * A text's count made ready to join with other texts: the tokens between its first and its last cut
 * point, and the text before and after them. A cut point is a space between two ASCII lowercase
 * letters: no o200k_base pretoken spans it (a word's pretoken takes the space before it, never the
 * one after) and no run the guard slices crosses it, so a text counts as the sum of its pieces
 * between cut points, whatever text surrounds it. A text without a cut point is all head.
 *
 * @category models
 */
export interface Piece {
  readonly head: string
  readonly inner: number
  readonly tail: string
  readonly cut: boolean
}

const isLower = (code: number): boolean => code >= 0x61 && code <= 0x7a

const isCut = (text: string, i: number): boolean =>
  text.charCodeAt(i) === 0x20 && isLower(text.charCodeAt(i - 1)) && isLower(text.charCodeAt(i + 1))

/**
 * Counts the inside of a text that will be joined with others (see `countJoined`).
 *
 * @category counting
 */
export const piece = (text: string): Piece => {
  let first = 1
  while (first < text.length - 1 && !isCut(text, first)) first++
  if (first >= text.length - 1) return { head: text, inner: 0, tail: "", cut: false }
  let last = text.length - 2
  while (!isCut(text, last)) last--
  return { head: text.slice(0, first), inner: count(text.slice(first, last)), tail: text.slice(last), cut: true }
}

/**
 * The count of the texts of `pieces` joined with `separator`, the same as `count` of the joined
 * text: only the text around each join is counted again.
 *
 * @category counting
 */
export const countJoined = (pieces: ReadonlyArray<Piece>, separator: string): number => {
  let total = 0
  let pending = ""
  pieces.forEach((part, i) => {
    pending += i === 0 ? part.head : separator + part.head
    if (!part.cut) return
    total += count(pending) + part.inner
    pending = part.tail
  })
  return total + count(pending)
}

/** Framing tokens of a chat template per message. @category constants */
export const TOKENS_PER_MESSAGE = 4

/** Framing tokens of a chat template priming the reply. */
const TOKENS_PER_REPLY = 3

const isObject = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The text of a chat message's `content`: the string, or the text parts joined by newlines.
 *
 * @category counting
 */
export const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (isObject(part) && typeof part["text"] === "string" ? part["text"] : "")).join("\n")
    : ""

/**
 * Prompt tokens of a conversation: every message's text and name, plus the template's framing.
 * The chat route bills by it when the upstream reports no usage; the local dev model reports it as
 * its usage.
 *
 * @category counting
 */
export const conversation = (messages: ReadonlyArray<Readonly<Record<string, unknown>>>): number =>
  messages.reduce<number>(
    (sum, message) =>
      sum + TOKENS_PER_MESSAGE + count(contentText(message["content"])) +
      (typeof message["name"] === "string" ? count(message["name"]) : 0),
    TOKENS_PER_REPLY
  )

/**
 * A bound `conversation` never exceeds, read from the UTF-8 length of the text instead of
 * tokenizing it: every o200k_base token stands for at least one byte (its vocabulary is of byte
 * sequences, and `count` counts special-token text and sliced runs as plain bytes too). Counting a
 * 293 KiB prompt takes tens of milliseconds; measuring its bytes, a few microseconds. For English
 * the bound is about 4.5 times the count.
 *
 * @category counting
 */
export const conversationBound = (messages: ReadonlyArray<Readonly<Record<string, unknown>>>): number =>
  messages.reduce<number>(
    (sum, message) =>
      sum + TOKENS_PER_MESSAGE + Buffer.byteLength(contentText(message["content"])) +
      (typeof message["name"] === "string" ? Buffer.byteLength(message["name"]) : 0),
    TOKENS_PER_REPLY
  )
