/**
 * Streaming chat through tollgate (auth, token limits, credit hold, usage counting, capture)
 * against the same fake OpenAI-compatible upstream called directly, same run. Upstreams, tollgate
 * and this client each run in their own process.
 *
 * - Time to the first content chunk by prompt size (20 words, 8,000 words, 60,000 words or about
 *   293 KiB, and a prompt of 150,000 o200k tokens): sequential streams, the upstream and tollgate
 *   alternating, p50 and p99 of each.
 * - Chunks per second of 16 streams of 2,000 chunks at once from an upstream that sends as fast as
 *   it can, and of one stream from an upstream paced at one chunk per millisecond.
 *
 * Options: --rounds n (default 3; medians of the rounds are printed), --samples n (TTFT streams per
 * prompt and target in a round, default 40), --baseline name=<checkout> (repeatable: another
 * tollgate checkout whose `bench/servers/chat-tollgate.ts` runs as one more target in the same
 * rounds, e.g. a git worktree of an older commit), --profile <dir> (tollgate runs under
 * `node --cpu-prof`; its profile is written there and its heaviest functions printed).
 */
import * as Tokens from "@tollgate/documents/Tokens"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { dir, table, untilListening } from "./Harness.ts"

const options = { rounds: 3, samples: 40, profile: "" }
const baselines: Array<readonly [string, string]> = []
{
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!.replace(/^--/, "")
    const value = argv[i + 1]
    if (flag === "baseline" && value?.includes("="))
      baselines.push([value.slice(0, value.indexOf("=")), value.slice(value.indexOf("=") + 1)])
    else if (flag in options && value !== undefined) {
      ;(options as Record<string, string | number>)[flag] = flag === "profile" ? Path.resolve(value) : Number(value)
    } else {
      console.error("usage: node bench/chat.ts [--rounds n] [--samples n] [--baseline name=<checkout>]... [--profile dir]")
      process.exit(2)
    }
  }
}

const SHORT_CHUNKS = 20
const LONG_CHUNKS = 2_000
const PARALLEL = 16
const PACED_CHUNKS = 100
const PACED_STREAMS = 9
const WARMUP = 10

// Common short English words: about 4.9 bytes and 1.0 o200k tokens per word with its space.
const WORDS = ("the of and to in is that it for on was with as at by be this from or have an are not but had " +
  "his they you were her she there been one all we can their has more when will would who so if no out " +
  "up what about which them into time only new some could these two may then do first any like now my " +
  "over such our man me even most made after also did many before must through back years where much way " +
  "well down should because each just those people how too little state good very make world still own " +
  "see men work long get here between both life being under never day same another know while last might " +
  "us great old year off come since against go came right used take three").split(" ")

/** `n` words picked by a fixed sequence, so every run sends the same prompts. */
const words = (n: number) => {
  const out: Array<string> = []
  let seed = 12345
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648
    out.push(WORDS[seed % WORDS.length]!)
  }
  return out.join(" ")
}

/** The words of about `tokens` o200k tokens. */
const wordsOfTokens = (tokens: number) => {
  let n = tokens
  for (let i = 0; i < 4; i++) n = Math.round((n * tokens) / Tokens.count(words(n)))
  return words(n)
}

const prompts = [
  { name: "20 words", text: words(20) },
  { name: "8,000 words", text: words(8_000) },
  { name: "60,000 words", text: words(60_000) },
  { name: "150,000 tokens", text: wordsOfTokens(150_000) }
].map((prompt) => {
  const body = (model: string) => JSON.stringify({ model, stream: true, messages: [{ role: "user", content: prompt.text }] })
  const size = Buffer.byteLength(body("bench-chat"))
  return { ...prompt, label: `${prompt.name} (${(size / 1024).toFixed(0)} KiB, ${Tokens.count(prompt.text)} tokens)`, body }
})

interface Child {
  readonly lines: Record<string, string>
  readonly stop: () => Promise<void>
}

// Every process started here, stopped if this one ends early (a server that failed to start).
const children: Array<ChildProcess.ChildProcess> = []
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
})

const spawn = async (script: string, env: Record<string, string>, nodeArgs: ReadonlyArray<string> = []): Promise<Child> => {
  const child = ChildProcess.spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"]
  })
  children.push(child)
  const lines: Record<string, string> = {}
  for (const line of (await untilListening(child, script)).split("\n")) {
    const [name, ...rest] = line.split(" ")
    if (name !== undefined && rest.length > 0) lines[name] = rest.join(" ")
  }
  return {
    lines,
    stop: async () => {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await exited
    }
  }
}

interface Sample {
  readonly ttftMs: number
  readonly chunks: number
  readonly streamMs: number
}

/** One streamed completion, read as a client would: time to the first content, then every chunk. */
const stream = async (baseUrl: string, key: string, body: string): Promise<Sample> => {
  const started = performance.now()
  const response = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body
  })
  if (!response.ok || response.body === null) throw new Error(`${baseUrl} answered ${response.status}: ${await response.text()}`)
  const decoder = new TextDecoder()
  let pending = ""
  let first = 0
  let chunks = 0
  for await (const bytes of response.body) {
    pending += decoder.decode(bytes, { stream: true })
    const events = pending.split("\n\n")
    pending = events.pop() ?? ""
    for (const event of events) {
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue
      const chunk = JSON.parse(event.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> }
      if ((chunk.choices?.[0]?.delta?.content ?? "") === "") continue
      chunks++
      if (first === 0) first = performance.now()
    }
  }
  const ended = performance.now()
  return { ttftMs: first - started, chunks, streamMs: ended - first }
}

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
}

const median = (values: ReadonlyArray<number>) => percentile(values, 50)

const sum = (values: ReadonlyArray<number>) => values.reduce((total, value) => total + value, 0)

const upstream = await spawn(Path.join(dir, "servers/chat-upstream.ts"), { CHUNKS: String(SHORT_CHUNKS) })
const long = await spawn(Path.join(dir, "servers/chat-upstream.ts"), { CHUNKS: String(LONG_CHUNKS) })
const slow = await spawn(Path.join(dir, "servers/chat-upstream.ts"), { CHUNKS: String(PACED_CHUNKS), DELAY_MS: "1" })
const upstreams = {
  CHAT_UPSTREAM: upstream.lines["url"]!,
  CHAT_UPSTREAM_LONG: long.lines["url"]!,
  CHAT_UPSTREAM_PACED: slow.lines["url"]!
}
if (options.profile !== "") Fs.mkdirSync(options.profile, { recursive: true })
const servers: Array<Child> = []
const sequentially = async <A>(tasks: ReadonlyArray<() => Promise<A>>): Promise<Array<A>> => {
  const results: Array<A> = []
  for (const task of tasks) results.push(await task())
  return results
}
const checkouts: Array<readonly [string, string]> = [["tollgate", Path.resolve(dir, "..")], ...baselines]
const targets = [
  {
    name: "direct",
    urls: { short: upstreams.CHAT_UPSTREAM, long: upstreams.CHAT_UPSTREAM_LONG, paced: upstreams.CHAT_UPSTREAM_PACED },
    key: "none"
  },
  // One at a time: starting together, they compete for the cores they load their modules on.
  ...await sequentially(checkouts.map(([name, checkout], i) => async () => {
    const profiled = i === 0 && options.profile !== "" ? ["--cpu-prof", `--cpu-prof-dir=${options.profile}`] : []
    const server = await spawn(Path.join(Path.resolve(checkout), "bench/servers/chat-tollgate.ts"), upstreams, profiled)
    servers.push(server)
    const url = server.lines["url"]!
    return { name, urls: { short: url, long: url, paced: url }, key: server.lines["key"]! }
  }))
]

type Row = Record<string, number>
const rounds = new Map<string, Array<Row>>(targets.map((target) => [target.name, []]))
try {
  for (let round = 0; round < options.rounds; round++) {
    const results = new Map<string, Row>(targets.map((target) => [target.name, {}]))
    // TTFT: for each prompt, every target in turn, one stream at a time.
    for (const prompt of prompts) {
      for (const target of targets) {
        for (let i = 0; i < WARMUP; i++) await stream(target.urls.short, target.key, prompt.body("bench-chat"))
      }
      const samples = new Map<string, Array<number>>(targets.map((target) => [target.name, []]))
      for (let i = 0; i < options.samples; i++) {
        for (const target of targets) {
          samples.get(target.name)!.push((await stream(target.urls.short, target.key, prompt.body("bench-chat"))).ttftMs)
        }
      }
      for (const target of targets) {
        const row = results.get(target.name)!
        row[`${prompt.name} p50`] = percentile(samples.get(target.name)!, 50)
        row[`${prompt.name} p99`] = percentile(samples.get(target.name)!, 99)
      }
    }
    // Chunks: 16 long unpaced streams at once, then one paced stream at a time.
    const short = prompts[0]!
    for (const target of targets) {
      await stream(target.urls.long, target.key, short.body("bench-long"))
      const started = performance.now()
      const parallel = await Promise.all(
        Array.from({ length: PARALLEL }, () => stream(target.urls.long, target.key, short.body("bench-long")))
      )
      results.get(target.name)!["unpaced"] = sum(parallel.map((s) => s.chunks)) / ((performance.now() - started) / 1000)
      const paced: Array<number> = []
      for (let i = 0; i < PACED_STREAMS; i++) {
        const sample = await stream(target.urls.paced, target.key, short.body("bench-paced"))
        paced.push(sample.chunks / (sample.streamMs / 1000))
      }
      results.get(target.name)!["paced"] = median(paced)
    }
    for (const target of targets) rounds.get(target.name)!.push(results.get(target.name)!)
  }
} finally {
  for (const server of servers) await server.stop()
  await Promise.all([upstream.stop(), long.stop(), slow.stop()])
}

const of = (target: string, field: string) => median(rounds.get(target)!.map((row) => row[field] ?? 0))
const ratio = (target: string, field: string) => `${(of(target, field) / of("direct", field)).toFixed(2)}x`
const others = targets.slice(1).map((target) => target.name)

console.log(
  `\nTime to the first content chunk, ms (median of ${options.rounds} rounds of ${options.samples} streams each; ratio to direct)\n`
)
table(prompts.map((prompt) => ({
  prompt: prompt.label,
  "direct p50": of("direct", `${prompt.name} p50`).toFixed(2),
  "direct p99": of("direct", `${prompt.name} p99`).toFixed(2),
  ...Object.fromEntries(others.flatMap((name) => [
    [`${name} p50`, `${of(name, `${prompt.name} p50`).toFixed(2)} (${ratio(name, `${prompt.name} p50`)})`],
    [
      `${name} p99`,
      `${of(name, `${prompt.name} p99`).toFixed(2)} (p99/p50 ${
        (of(name, `${prompt.name} p99`) / of(name, `${prompt.name} p50`)).toFixed(1)
      })`
    ]
  ]))
})))
console.log(`\nChunks per second (median of ${options.rounds} rounds; ratio to direct)\n`)
table([
  { row: `${PARALLEL} streams of ${LONG_CHUNKS} chunks, unpaced`, field: "unpaced" },
  { row: `1 stream of ${PACED_CHUNKS} chunks, 1 ms/chunk`, field: "paced" }
].map(({ field, row }) => ({
  row,
  direct: Math.round(of("direct", field)),
  ...Object.fromEntries(others.map((name) => [name, `${Math.round(of(name, field))} (${ratio(name, field)})`]))
})))

if (options.profile !== "") {
  const file = Fs.readdirSync(options.profile).filter((name) =>
    name.endsWith(".cpuprofile")
  ).map((name) => Path.join(options.profile, name))
    .sort((a, b) => Fs.statSync(b).mtimeMs - Fs.statSync(a).mtimeMs)[0]
  if (file !== undefined) {
    const { heaviest } = await import("./Profile.ts")
    console.log(`\nThe tollgate process's heaviest functions by self time (${file})\n`)
    table(heaviest(file, 20))
  }
}
