/**
 * Removes `<think>...</think>` blocks from a model's reply (`strip_thinking_response`,
 * `disable_thinking`). The text a client sees is the same whatever the chunking of a stream, and no
 * later than it has to be. A stripper made with `onThought` hands it the text of the blocks as it
 * is read, for a reply that shows thinking apart (the Messages API's thinking blocks).
 *
 * **Details**
 *
 * A stream delivers the reply in arbitrary pieces, so a tag may be split across chunks at any
 * character; the streaming stripper holds back only the shortest tail that could still start a tag
 * and emits everything else at once. When the reply opens with thinking, the whitespace after its
 * closing tag goes too (models put a blank line before the answer). An unterminated block is
 * thinking to the end and is dropped.
 *
 * @since 0.1.0
 */

const OPEN = "<think>"
const CLOSE = "</think>"

/**
 * A stateful stripper for one stream of text (one choice of a completion).
 *
 * @category models
 */
export interface Stripper {
  /** The visible text of the next piece; may be empty while a tag is undecided. */
  readonly push: (piece: string) => string
  /** What is still held back once the stream has ended. */
  readonly flush: () => string
}

/** Length of the longest tail of `text` that is a proper prefix of `tag`. */
const partialTagAt = (text: string, tag: string): number => {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length
  }
  return 0
}

/**
 * A new stripper; `onThought` receives the text inside the think blocks, in order.
 *
 * @category constructors
 */
export const make = (onThought?: (thought: string) => void): Stripper => {
  let inside = false
  let trimLeading = false
  let started = false
  let held = ""
  const visible = (text: string): string => {
    const shown = trimLeading ? text.trimStart() : text
    if (shown.length > 0) {
      trimLeading = false
      started = true
    }
    return shown
  }
  const push = (piece: string): string => {
    let text = held + piece
    held = ""
    let out = ""
    while (text.length > 0) {
      if (inside) {
        const close = text.indexOf(CLOSE)
        if (close === -1) {
          const keep = partialTagAt(text, CLOSE)
          held = text.slice(text.length - keep)
          if (keep < text.length) onThought?.(text.slice(0, text.length - keep))
          return out
        }
        if (close > 0) onThought?.(text.slice(0, close))
        inside = false
        trimLeading = !started
        text = text.slice(close + CLOSE.length)
      } else {
        const open = text.indexOf(OPEN)
        if (open === -1) {
          const keep = partialTagAt(text, OPEN)
          held = text.slice(text.length - keep)
          return out + visible(text.slice(0, text.length - keep))
        }
        out += visible(text.slice(0, open))
        inside = true
        text = text.slice(open + OPEN.length)
      }
    }
    return out
  }
  const flush = (): string => {
    if (inside && held !== "") onThought?.(held)
    const rest = inside ? "" : visible(held)
    held = ""
    return rest
  }
  return { push, flush }
}

/**
 * The reply without its think blocks.
 *
 * @category stripping
 */
export const strip = (text: string): string => {
  const stripper = make()
  return stripper.push(text) + stripper.flush()
}
