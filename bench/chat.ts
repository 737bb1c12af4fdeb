/**
 * Streaming chat through tollgate (auth, token limits, credit hold, usage counting, capture)
 * against the same fake OpenAI-compatible upstream called directly, same run: the time to the first
 * content chunk (sequential streams), the chunks per second of 16 streams at once from an upstream
 * that sends as fast as it can, and the chunks per second of one stream from an upstream paced at
 * one chunk per millisecond. Upstreams, tollgate and this client each run in their own process.
 */
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { dir, table, untilListening } from "./Harness.ts"

const CHUNKS = 200
const SEQUENTIAL = 40
const PARALLEL = 16
const ROUNDS = 3
const PACED_CHUNKS = 100
const PACED_STREAMS = 9

interface Child {
  readonly lines: Record<string, string>
  readonly stop: () => void
}

const spawn = async (script: string, env: Record<string, string>): Promise<Child> => {
  const child = ChildProcess.spawn(process.execPath, [Path.join(dir, script)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const lines: Record<string, string> = {}
  for (const line of (await untilListening(child, script)).split("\n")) {
    const [name, ...rest] = line.split(" ")
    if (name !== undefined && rest.length > 0) lines[name] = rest.join(" ")
  }
  return { lines, stop: () => child.kill("SIGKILL") }
}

interface Sample {
  readonly ttftMs: number
  readonly chunks: number
  readonly streamMs: number
}

/** One streamed completion, read as a client would: time to the first content, then every chunk. */
const stream = async (baseUrl: string, key: string, model: string): Promise<Sample> => {
  const started = performance.now()
  const response = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "Count to two hundred." }] })
  })
  if (!response.ok || response.body === null) throw new Error(`${baseUrl} answered ${response.status}`)
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

const sum = (values: ReadonlyArray<number>) => values.reduce((total, value) => total + value, 0)

/** Unpaced upstream: time to first token of sequential streams, and chunks/s of 16 streams at once. */
const unpaced = async (baseUrl: string, key: string) => {
  for (let i = 0; i < 10; i++) await stream(baseUrl, key, "bench-chat")
  const sequential: Array<Sample> = []
  for (let i = 0; i < SEQUENTIAL; i++) sequential.push(await stream(baseUrl, key, "bench-chat"))
  const started = performance.now()
  const parallel = await Promise.all(Array.from({ length: PARALLEL }, () => stream(baseUrl, key, "bench-chat")))
  return {
    ttftP50: percentile(sequential.map((s) => s.ttftMs), 50),
    ttftP99: percentile(sequential.map((s) => s.ttftMs), 99),
    parallel: sum(parallel.map((s) => s.chunks)) / ((performance.now() - started) / 1000)
  }
}

/** Upstream paced at one chunk per millisecond (faster than any model): chunks/s of one stream, median. */
const paced = async (baseUrl: string, key: string) => {
  const samples: Array<Sample> = []
  for (let i = 0; i < PACED_STREAMS; i++) samples.push(await stream(baseUrl, key, "bench-paced"))
  return percentile(samples.map((s) => s.chunks / (s.streamMs / 1000)), 50)
}

const upstream = await spawn("servers/chat-upstream.ts", { CHUNKS: String(CHUNKS) })
const slow = await spawn("servers/chat-upstream.ts", { CHUNKS: String(PACED_CHUNKS), DELAY_MS: "1" })
const tollgate = await spawn("servers/chat-tollgate.ts", {
  CHAT_UPSTREAM: upstream.lines["url"] ?? "",
  CHAT_UPSTREAM_PACED: slow.lines["url"] ?? ""
})
try {
  const targets = {
    direct: { unpaced: upstream.lines["url"]!, paced: slow.lines["url"]!, key: "none" },
    tollgate: { unpaced: tollgate.lines["url"]!, paced: tollgate.lines["url"]!, key: tollgate.lines["key"]! }
  }
  const results = { direct: [] as Array<Record<string, number>>, tollgate: [] as Array<Record<string, number>> }
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of ["direct", "tollgate"] as const) {
      const target = targets[name]
      results[name].push({ ...(await unpaced(target.unpaced, target.key)), paced: await paced(target.paced, target.key) })
    }
  }
  const median = (name: "direct" | "tollgate", field: string) => percentile(results[name].map((run) => run[field] ?? 0), 50)
  table((["direct", "tollgate"] as const).map((name) => ({
    path: name === "direct" ? "fake upstream, direct (baseline)" : "through tollgate",
    "TTFT p50 ms": median(name, "ttftP50").toFixed(2),
    "TTFT p99 ms": median(name, "ttftP99").toFixed(2),
    [`chunks/s, ${PARALLEL} streams, unpaced`]: Math.round(median(name, "parallel")),
    "chunks/s, 1 stream, 1 ms/chunk": Math.round(median(name, "paced"))
  })))
  console.log(`\ntollgate vs direct: TTFT p50 +${(median("tollgate", "ttftP50") - median("direct", "ttftP50")).toFixed(2)} ms; `
    + `unpaced chunks/s ${(median("tollgate", "parallel") / median("direct", "parallel")).toFixed(2)}x; `
    + `paced chunks/s ${(median("tollgate", "paced") / median("direct", "paced")).toFixed(2)}x`)
} finally {
  tollgate.stop()
  slow.stop()
  upstream.stop()
}
