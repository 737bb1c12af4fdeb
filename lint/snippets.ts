/**
 * Every TypeScript snippet of the docs is a copy of a tested example: a ```ts block of `docs/*.md`
 * or `README.md` names the file it was copied from on the line before it,
 * `<!-- from examples/own-endpoint/express.ts -->`, and must appear in that file line for line,
 * leading indentation aside (a snippet may be cut from inside a function).
 *
 * When to use: `pnpm lint` runs it. `node lint/snippets.ts --fix` copies each snippet again from
 * its example where the example's text changed only in its whitespace and semicolons (`pnpm format`
 * re-wraps the examples, not the docs, and a type literal it breaks over lines loses its `;`), and
 * leaves the others to be copied by hand.
 *
 * Details: a block that names no example fails the check, so no snippet is written by hand: the
 * file it names is an example under `examples/`, the test that runs the same calls, or, for the
 * wiring of the services, the reference server's source.
 *
 * @since 0.1.0
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.join(import.meta.dirname, "..")
const fix = process.argv.includes("--fix")

/** The marker line that names a snippet's example, relative to the repository's root. */
const FROM = /^<!--\s*from\s+(\S+)\s*-->$/u

interface Snippet {
  readonly doc: string
  /** Index of the opening fence's line. */
  readonly open: number
  /** Index of the closing fence's line. */
  readonly close: number
  readonly lines: ReadonlyArray<string>
  readonly example: string | undefined
}

const docs = (): Array<string> => [
  "README.md",
  ...Fs.readdirSync(Path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

const snippetsOf = (doc: string, lines: ReadonlyArray<string>): Array<Snippet> => {
  const found: Array<Snippet> = []
  for (let open = 0; open < lines.length; open++) {
    if (lines[open]!.trim() !== "```ts") continue
    let close = open + 1
    while (close < lines.length && lines[close]!.trim() !== "```") close++
    let before = open - 1
    while (before >= 0 && lines[before]!.trim() === "") before--
    const marker = before >= 0 ? FROM.exec(lines[before]!.trim()) : null
    found.push({ doc, open, close, lines: lines.slice(open + 1, close), example: marker?.[1] })
    open = close
  }
  return found
}

/** Whether `lines` appear in `example` one after another, each compared without its indentation. */
const appearsIn = (lines: ReadonlyArray<string>, example: ReadonlyArray<string>): boolean => {
  const wanted = lines.map((line) => line.trimStart())
  for (let start = 0; start + wanted.length <= example.length; start++) {
    let at = 0
    while (at < wanted.length && example[start + at]!.trimStart() === wanted[at]) at++
    if (at === wanted.length) return true
  }
  return false
}

/** What formatting may change: whitespace, and the semicolons of the `asi` style. */
const formatting = /[\s;]/u

/**
 * The lines of `example` whose text is the snippet's but for formatting, indented as the snippet's
 * first line is; `undefined` when there are none, or the match starts or ends inside a line.
 */
const recopy = (lines: ReadonlyArray<string>, example: string): Array<string> | undefined => {
  const wanted = lines.join("\n").replace(/[\s;]+/gu, "")
  if (wanted === "") return undefined
  // The example without what formatting may change, and where each remaining character was.
  let squeezed = ""
  const positions: Array<number> = []
  for (let i = 0; i < example.length; i++) {
    if (formatting.test(example[i]!)) continue
    squeezed += example[i]
    positions.push(i)
  }
  const at = squeezed.indexOf(wanted)
  if (at === -1) return undefined
  const start = example.lastIndexOf("\n", positions[at]!) + 1
  const endOfLine = example.indexOf("\n", positions[at + wanted.length - 1]!)
  const end = endOfLine === -1 ? example.length : endOfLine
  if (example.slice(start, positions[at]).trim() !== "" || example.slice(positions[at + wanted.length - 1]! + 1, end).trim() !== "") {
    return undefined
  }
  const copied = example.slice(start, end).split("\n")
  const indent = Math.min(...copied.filter((line) => line.trim() !== "").map((line) => line.length - line.trimStart().length))
  const docIndent = /^\s*/u.exec(lines.find((line) => line.trim() !== "") ?? "")![0]
  return copied.map((line) => (line.trim() === "" ? "" : docIndent + line.slice(indent)))
}

const failures: Array<string> = []
let fixed = 0
for (const doc of docs()) {
  const file = Path.join(root, doc)
  const lines = Fs.readFileSync(file, "utf8").split("\n")
  const snippets = snippetsOf(doc, lines)
  const fixedBefore = fixed
  // From the last, so a snippet copied again with more or fewer lines moves none still to check.
  for (const snippet of snippets.reverse()) {
    const where = `${doc}:${snippet.open + 1}`
    if (snippet.example === undefined) {
      failures.push(`${where}: names no example; copy it from one and name it on the line before (<!-- from examples/... -->)`)
      continue
    }
    const examplePath = Path.join(root, snippet.example)
    if (!Fs.existsSync(examplePath)) {
      failures.push(`${where}: names ${snippet.example}, which does not exist`)
      continue
    }
    const example = Fs.readFileSync(examplePath, "utf8")
    if (appearsIn(snippet.lines, example.split("\n"))) continue
    const copied = fix ? recopy(snippet.lines, example) : undefined
    if (copied === undefined) {
      failures.push(`${where}: is not in ${snippet.example}; copy it from there${fix ? "" : " (or run node lint/snippets.ts --fix)"}`)
      continue
    }
    lines.splice(snippet.open + 1, snippet.lines.length, ...copied)
    fixed++
  }
  if (fixed > fixedBefore) Fs.writeFileSync(file, lines.join("\n"))
}

if (fixed > 0) console.log(`Copied ${fixed} snippet(s) again from their examples.`)
if (failures.length > 0) {
  console.error(`${failures.length} snippet(s) are not copies of their examples:`)
  for (const failure of failures) console.error(`  ${failure}`)
  process.exit(1)
}
console.log("Every snippet names its example and is a copy of it.")
