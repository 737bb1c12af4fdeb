/**
 * Renders spreadsheet numbers the way their cell format shows them, for the common Excel number
 * formats: fixed decimals, thousands separators, percentages, scientific notation, simple
 * fractions, currency and literal text, negative sections in parentheses, and dates and times. A
 * format it does not understand (conditions, scaling commas, exotic tokens) falls back to Excel's
 * General rendering, which shows the raw value.
 *
 * **Details**
 *
 * Hand-written because no maintained formatter fits the dependency bar, so this is a deliberately
 * small subset of Excel's format language.
 *
 * @since 0.1.0
 */

const BUILTIN: Readonly<Record<number, string>> = {
  1: "0",
  2: "0.00",
  3: "#,##0",
  4: "#,##0.00",
  9: "0%",
  10: "0.00%",
  11: "0.00E+00",
  12: "# ?/?",
  13: "# ??/??",
  14: "m/d/yyyy",
  15: "d-mmm-yy",
  16: "d-mmm",
  17: "mmm-yy",
  18: "h:mm AM/PM",
  19: "h:mm:ss AM/PM",
  20: "h:mm",
  21: "h:mm:ss",
  22: "m/d/yyyy h:mm",
  37: "#,##0 ;(#,##0)",
  38: "#,##0 ;(#,##0)",
  39: "#,##0.00;(#,##0.00)",
  40: "#,##0.00;(#,##0.00)",
  45: "mm:ss",
  46: "[h]:mm:ss",
  47: "mm:ss.0",
  48: "##0.0E+0",
  49: "@"
}

/**
 * The format code of a built-in format id (`undefined` for General and unknown ids).
 *
 * @category formats
 */
export const builtin = (id: number): string | undefined => BUILTIN[id]

/**
 * Excel's General rendering: integers as they are, other numbers to 15 significant digits.
 *
 * @category formatting
 */
export const general = (n: number): string => {
  if (Number.isInteger(n) && Math.abs(n) < 1e15) return String(n)
  const shown = String(Number.parseFloat(n.toPrecision(15)))
  return shown.includes("e") ? n.toExponential(5).replace(/(\.\d*?)0+e/, "$1e").replace(/\.e/, "e").toUpperCase() : shown
}

const splitSections = (code: string): Array<string> => {
  const sections: Array<string> = []
  let current = ""
  let quoted = false
  for (let i = 0; i < code.length; i++) {
    const c = code[i]!
    if (c === "\"") quoted = !quoted
    if (c === "\\" && !quoted) {
      current += c + (code[i + 1] ?? "")
      i++
      continue
    }
    if (c === ";" && !quoted) {
      sections.push(current)
      current = ""
    } else current += c
  }
  sections.push(current)
  return sections
}

interface Token {
  readonly literal: boolean
  readonly text: string
}

// Splits a section into literal text and format characters; brackets other than elapsed-time
// and currency markers are dropped (colors), and a condition makes the format unsupported.
const tokenize = (section: string): Array<Token> | undefined => {
  const tokens: Array<Token> = []
  for (let i = 0; i < section.length; i++) {
    const c = section[i]!
    if (c === "\"") {
      const end = section.indexOf("\"", i + 1)
      tokens.push({ literal: true, text: section.slice(i + 1, end === -1 ? undefined : end) })
      i = end === -1 ? section.length : end
    } else if (c === "\\") {
      tokens.push({ literal: true, text: section[i + 1] ?? "" })
      i++
    } else if (c === "_") {
      tokens.push({ literal: true, text: " " })
      i++
    } else if ((c === "E" || c === "e") && (section[i + 1] === "+" || section[i + 1] === "-")) {
      tokens.push({ literal: false, text: `E${section[i + 1]}` })
      i++
    } else if (c === "*") {
      i++
    } else if (c === "[") {
      const end = section.indexOf("]", i)
      const inner = section.slice(i + 1, end === -1 ? undefined : end)
      i = end === -1 ? section.length : end
      if (/^[<>=]/.test(inner)) return undefined
      if (/^(h+|m+|s+)$/i.test(inner)) tokens.push({ literal: false, text: `[${inner.toLowerCase()}]` })
      else if (inner.startsWith("$")) tokens.push({ literal: true, text: inner.slice(1).split("-")[0] ?? "" })
    } else if ("$-+/():!^&'~{}<>= ".includes(c) && c !== "/") {
      tokens.push({ literal: true, text: c })
    } else {
      tokens.push({ literal: false, text: c })
    }
  }
  return tokens
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]

const pad = (n: number, width: number) => String(n).padStart(width, "0")

const formatDate = (serial: number, tokens: ReadonlyArray<Token>): string => {
  // Serial 60 is Excel's fictitious 1900-02-29; days before it are one off from the real calendar.
  const days = serial < 60 ? serial + 1 : serial
  const date = new Date(Math.round((days - 25569) * 86_400_000))
  const pattern = tokens.map((token) => token.literal ? `\u0000${token.text}\u0000` : token.text).join("")
  const ampm = /AM\/PM|A\/P/i.test(pattern)
  const hours = date.getUTCHours()
  // eslint-disable-next-line no-control-regex -- NUL delimits a quoted literal: no format string contains one
  const parts = pattern.split(/(\u0000[^\u0000]*\u0000|\[h+\]|\[m+\]|\[s+\]|AM\/PM|A\/P|y+|m+|d+|h+|s+|\.0+)/i)
  let out = ""
  let lastWasHour = false
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (part === "") continue
    const lower = part.toLowerCase()
    if (part.startsWith("\u0000")) out += part.slice(1, -1)
    else if (lower === "am/pm") out += hours < 12 ? "AM" : "PM"
    else if (lower === "a/p") out += hours < 12 ? "A" : "P"
    else if (lower.startsWith("[h")) out += pad(Math.floor(serial * 24), lower.length - 2)
    else if (lower.startsWith("[m")) out += pad(Math.floor(serial * 1440), lower.length - 2)
    else if (lower.startsWith("[s")) out += pad(Math.floor(serial * 86400), lower.length - 2)
    else if (lower[0] === "y") out += lower.length <= 2 ? pad(date.getUTCFullYear() % 100, 2) : String(date.getUTCFullYear())
    else if (lower[0] === "d") {
      out += lower.length === 1 ? String(date.getUTCDate()) : lower.length === 2 ?
        pad(date.getUTCDate(), 2)
        : lower.length === 3
        ? DAYS[date.getUTCDay()]!.slice(0, 3)
        : DAYS[date.getUTCDay()]!
    } else if (lower[0] === "h") {
      const h = ampm ? (hours % 12 === 0 ? 12 : hours % 12) : hours
      out += lower.length === 1 ? String(h) : pad(h, 2)
    } else if (lower[0] === "s") out += lower.length === 1 ? String(date.getUTCSeconds()) : pad(date.getUTCSeconds(), 2)
    else if (lower[0] === "m") {
      // eslint-disable-next-line no-control-regex -- as above
      const rest = parts.slice(i + 1).join("").replace(/\u0000[^\u0000]*\u0000/g, "")
      const minutes = lastWasHour || /^[^a-z]*s/i.test(rest)
      if (minutes) out += lower.length === 1 ? String(date.getUTCMinutes()) : pad(date.getUTCMinutes(), 2)
      else {
        const month = date.getUTCMonth()
        out += lower.length === 1 ? String(month + 1) : lower.length === 2 ?
          pad(month + 1, 2)
          : lower.length === 3
          ? MONTHS[month]!.slice(0, 3)
          : lower.length === 5
          ? MONTHS[month]![0]!
          : MONTHS[month]!
      }
    } else if (lower.startsWith(".0")) out += (serial * 86400 % 1).toFixed(lower.length - 1).slice(1)
    else out += part
    if (/^[a-z]/i.test(lower) || lower.startsWith("[")) lastWasHour = lower[0] === "h" || lower.startsWith("[h")
  }
  return out
}

const withThousands = (digits: string): string => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",")

const formatFraction = (n: number, integerPart: boolean, denominatorDigits: number): string => {
  const whole = integerPart ? Math.trunc(n) : 0
  const rest = n - whole
  const maxDenominator = 10 ** denominatorDigits - 1
  let best = { num: 0, den: 1, err: Math.abs(rest) }
  for (let den = 1; den <= maxDenominator; den++) {
    const num = Math.round(rest * den)
    const err = Math.abs(rest - num / den)
    if (err < best.err - 1e-12) best = { num, den, err }
  }
  if (best.num === 0) return String(whole)
  if (best.num === best.den) return String(whole + 1)
  return `${whole === 0 && integerPart ? "" : `${whole} `}${best.num}/${best.den}`.trim()
}

const formatNumber = (n: number, tokens: ReadonlyArray<Token>): string | undefined => {
  const placeholders = tokens.filter((t) => !t.literal).map((t) => t.text).join("")
  const first = tokens.findIndex((t) => !t.literal && /[0#?.,]/.test(t.text))
  let last = -1
  tokens.forEach((t, i) => {
    if (!t.literal && /[0#?.,%E+\-/]/i.test(t.text)) last = i
  })
  const prefix = tokens.slice(0, Math.max(first, 0)).filter((t) => t.literal || t.text === "%").map((t) => t.literal ? t.text : "").join("")
  const suffix = tokens.slice(last + 1).map((t) => t.text).join("")
  const percents = (placeholders.match(/%/g) ?? []).length
  const value = n * 100 ** percents
  const core = placeholders.replace(/%/g, "")
  if (core.includes("/")) {
    const [left = "", right = ""] = core.split("/")
    return `${prefix}${formatFraction(value, /[0#?]\s*[0#?]/.test(left) || / /.test(left), Math.max(1, right.length))}${
      "%".repeat(percents)
    }${suffix}`
  }
  const exponent = /E([+-])(0+)/i.exec(core)
  if (exponent !== null) {
    const mantissa = core.slice(0, exponent.index)
    const decimals = (mantissa.split(".")[1] ?? "").length
    const [m = "", e = "0"] = value.toExponential(decimals).split("e")
    const power = Number(e)
    const sign = power < 0 ? "-" : exponent[1] === "+" ? "+" : ""
    return `${prefix}${m}E${sign}${pad(Math.abs(power), exponent[2]!.length)}${suffix}`
  }
  if (!/^[0#?,.]*$/.test(core) || core.endsWith(",")) return undefined
  const [integer = "", fraction = ""] = core.split(".")
  const decimals = fraction.replace(/,/g, "").length
  const minDecimals = (fraction.match(/0/g) ?? []).length
  let [whole = "0", frac = ""] = Math.abs(value).toFixed(decimals).split(".")
  frac = frac.replace(new RegExp(`0{0,${decimals - minDecimals}}$`), "")
  const minInteger = (integer.match(/0/g) ?? []).length
  whole = whole === "0" && minInteger === 0 ? "" : whole.padStart(minInteger, "0")
  if (integer.includes(",")) whole = withThousands(whole)
  const body = `${whole}${frac === "" && !fraction.includes("?") ? "" : `.${frac}`}`
  return `${value < 0 ? "-" : ""}${prefix}${body}${"%".repeat(percents)}${suffix}`
}

const isDate = (tokens: ReadonlyArray<Token>): boolean => tokens.some((t) => !t.literal && /^[dmyhs]$|^\[[hms]+\]$/i.test(t.text))

/**
 * `n` as the format `code` shows it; General when the code is absent or not understood.
 *
 * @category formatting
 */
export const format = (n: number, code: string | undefined): string => {
  if (code === undefined || /^general$/i.test(code) || code === "@") return general(n)
  const sections = splitSections(code)
  const useNegative = n < 0 && sections.length >= 2
  const section = n === 0 && sections.length >= 3 ? sections[2]! : useNegative ? sections[1]! : sections[0]!
  const tokens = tokenize(section)
  if (tokens === undefined) return general(n)
  if (isDate(tokens)) return n < 0 ? general(n) : formatDate(n, tokens)
  if (/general/i.test(section)) return general(n)
  const shown = formatNumber(useNegative ? Math.abs(n) : n, tokens)
  return shown === undefined ? general(n) : shown
}
