/**
 * Plain-text uploads to a string. A byte-order mark decides the encoding when there is one;
 * otherwise strict UTF-8 is tried first, and only when that fails are the legacy encodings tried,
 * keeping the decoding that produces the fewest replacement characters (with penalties for the
 * tell-tale signs of a wrong single-byte guess). Line endings come out as `\n`.
 *
 * @since 0.1.0
 */

const LEGACY = ["windows-1252", "shift_jis", "euc-jp", "gb18030", "big5", "euc-kr", "windows-1251", "koi8-r", "iso-8859-2"]

const decoderFor = (label: string): TextDecoder | undefined => {
  try {
    return new TextDecoder(label)
  } catch {
    return undefined
  }
}

const legacy = LEGACY.flatMap((label) => {
  const decoder = decoderFor(label)
  return decoder === undefined ? [] : [{ label, decoder }]
})

// Lower is better. Replacement characters are decoding errors; C1 controls and half-width katakana
// almost never occur in real text but are what a wrong guess turns bytes into; a run of accented
// Latin letters is what multi-byte text looks like through a single-byte code page.
const score = (text: string, label: string): number => {
  let penalty = 0
  let previousHigh = false
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === 0xfffd) penalty += 10
    else if (code >= 0x80 && code <= 0x9f) penalty += 3
    else if (code >= 0xff61 && code <= 0xff9f) penalty += 1
    const high = code >= 0x80
    if (high && previousHigh && (label === "windows-1252" || label === "iso-8859-2")) penalty += 1
    previousHigh = high
  }
  return penalty
}

const normalize = (text: string): string => text.replace(/\r\n?/g, "\n")

/**
 * Decodes text bytes, normalizing line endings.
 *
 * @category decoding
 */
export const decode = (bytes: Uint8Array): string => {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return normalize(new TextDecoder("utf-8").decode(bytes.subarray(3)))
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return normalize(new TextDecoder("utf-16le").decode(bytes.subarray(2)))
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return normalize(new TextDecoder("utf-16be").decode(bytes.subarray(2)))
  try {
    return normalize(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes))
  } catch {
    let best = ""
    let bestScore = Infinity
    for (const { decoder, label } of legacy) {
      const text = decoder.decode(bytes)
      const penalty = score(text, label)
      if (penalty < bestScore) {
        best = text
        bestScore = penalty
      }
    }
    return normalize(best)
  }
}
