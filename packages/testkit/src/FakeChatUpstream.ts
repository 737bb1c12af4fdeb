/**
 * A fake OpenAI-compatible upstream: a real `node:http` server answering `POST
 * <base>/chat/completions` with a JSON completion or a Server-Sent Events stream, the way vLLM or a
 * hosted API does. Tests script each reply and read back every request it received, so a test can
 * see what tollgate forwarded and that a client's disconnect reached the upstream.
 *
 * **Details**
 *
 * A script gives the content pieces, function calls, status, usage, and a stream that stalls after
 * its pieces; the fake records whether the caller hung up. It speaks the rest of the OpenAI API the
 * same way: `POST /embeddings` (a vector per input, usage counted one token per word), `POST
 * /audio/speech` (bytes naming the format and voice), `POST /audio/transcriptions` (multipart in, a
 * verbose transcript of `transcriptSeconds` out), and the videos API (`POST /videos`, `GET
 * /videos/{id}`, `GET /videos/{id}/content`), whose jobs end as `videoOutcome` says. A `status` in
 * the script refuses any of them the same way.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type * as Net from "node:net"

/** How the upstream answers one request. @category models */
export interface Script {
  /** Content pieces: one stream chunk each, joined for a non-streaming reply. */
  readonly pieces: ReadonlyArray<string>
  /**
   * The model's reasoning, sent apart as `reasoning_content` (as vLLM's reasoning parsers do) before
   * the content: one stream chunk a piece, joined for a non-streaming reply.
   */
  readonly reasoning?: ReadonlyArray<string>
  /** A non-2xx status answers with an error body instead. */
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  /** Usage to report; by default prompt 10 and one completion token per piece. */
  readonly usage?: {
    readonly prompt_tokens: number
    readonly completion_tokens: number
    /** The prompt tokens read from the upstream's prompt cache, as OpenAI reports them. */
    readonly prompt_tokens_details?: { readonly cached_tokens: number }
  }
  /**
   * Function calls the model makes after its pieces (`tool_calls`, finish reason `tool_calls`);
   * streamed as the name first, then the arguments in two halves.
   */
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  /** Stream the pieces, then send nothing more and keep the connection open. */
  readonly stall?: boolean
  /** Stream the pieces, then drop the connection, as an upstream that breaks off does. */
  readonly breakOff?: boolean
  /**
   * Milliseconds between stream chunks; a completion that is not streamed is answered after as long
   * as its stream would take (this many milliseconds per piece), so a slow upstream is slow either way.
   */
  readonly delayMs?: number
  /**
   * Write the stream's JSON with a space after each colon and comma, as Python's `json.dumps` does
   * (servers that do not write it compact, as `JSON.stringify` does).
   */
  readonly spaced?: boolean
}

/** One request the upstream received. @category models */
export interface Received {
  /** The path after the base, e.g. `/embeddings`. */
  readonly path: string
  /** The JSON body; for multipart, the text fields, and the file as `{name, type, size}`. */
  readonly body: Record<string, unknown>
  /** The body's text as it arrived, for a chat completion. */
  readonly text?: string
  readonly headers: Http.IncomingHttpHeaders
  /** Resolves when the caller closed the connection before the reply ended. */
  readonly hungUp: Promise<void>
}

/** @category models */
export interface FakeChatUpstream {
  /** e.g. `http://127.0.0.1:4100/v1` */
  readonly baseUrl: string
  readonly received: Array<Received>
  /** Replaces the script for the next requests. */
  script: (body: Record<string, unknown>) => Script
  /** Seconds of audio every transcription reports (default 3.2). */
  transcriptSeconds: number
  /** How a video job answers its polls: `completed` (default), `failed` or `in_progress`. */
  videoOutcome: "completed" | "failed" | "in_progress"
  readonly close: () => Promise<void>
}

/** The base path every route of the fake lives under. */
const BASE = "/v1"

const json = (response: Http.ServerResponse, status: number, body: unknown) =>
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))

const wordsOf = (input: unknown): number =>
  typeof input === "string"
    ? Math.max(1, input.split(/\s+/u).filter((word) => word.length > 0).length)
    : Array.isArray(input) && input.every((n) => typeof n === "number")
    ? input.length
    : 0

/** The requests of the other APIs; `undefined` for a path the fake does not know. */
const answerOther = async (
  upstream: FakeChatUpstream,
  videos: Map<string, number>,
  method: string,
  path: string,
  headers: Http.IncomingHttpHeaders,
  raw: Buffer
): Promise<
  | { readonly status: number; readonly type: string; readonly body: string | Uint8Array; readonly received: Record<string, unknown> }
  | undefined
> => {
  const ok = (body: unknown, received: Record<string, unknown>) => ({
    status: 200,
    type: "application/json",
    body: JSON.stringify(body),
    received
  })
  if (method === "POST" && path === "/embeddings") {
    const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>
    const inputs: Array<unknown> =
      typeof body["input"] === "string" || (Array.isArray(body["input"]) && typeof body["input"][0] === "number")
        ? [body["input"]]
        : body["input"] as Array<unknown>
    const dimensions = typeof body["dimensions"] === "number" ? body["dimensions"] : 8
    const tokens = inputs.reduce<number>((sum, input) => sum + wordsOf(input), 0)
    return ok({
      object: "list",
      data: inputs.map((_, index) => ({
        object: "embedding",
        index,
        embedding: Array.from({ length: dimensions }, (_, i) => (index + 1) / (i + 2))
      })),
      model: body["model"],
      usage: { prompt_tokens: tokens, total_tokens: tokens }
    }, body)
  }
  if (method === "POST" && path === "/audio/speech") {
    const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>
    return {
      status: 200,
      type: "audio/mpeg",
      body: `FAKE-AUDIO ${String(body["response_format"])} ${String(body["voice"])}: ${String(body["input"])}`,
      received: body
    }
  }
  if (method === "POST" && path === "/audio/transcriptions") {
    const form = await new Request("http://fake/", {
      method: "POST",
      headers: { "content-type": headers["content-type"] ?? "" },
      body: new Uint8Array(raw)
    }).formData()
    const received: Record<string, unknown> = {}
    for (const [key, value] of form.entries()) {
      received[key] = typeof value === "string" ? value : { name: value.name, type: value.type, size: value.size }
    }
    const seconds = upstream.transcriptSeconds
    return ok({
      task: "transcribe",
      language: "english",
      duration: seconds,
      text: "Hello from the fake upstream.",
      segments: [{ id: 0, start: 0, end: seconds, text: " Hello from the fake upstream." }]
    }, received)
  }
  if (method === "POST" && path === "/videos") {
    const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>
    const id = `video_${videos.size + 1}`
    videos.set(id, 0)
    return ok({ id, object: "video", status: "queued", model: body["model"], seconds: body["seconds"], size: body["size"] }, body)
  }
  const video = /^\/videos\/([^/]+)(\/content)?$/u.exec(path)
  if (method === "GET" && video !== null) {
    const id = decodeURIComponent(video[1]!)
    if (!videos.has(id))
      return { status: 404, type: "application/json", body: JSON.stringify({ error: { message: "no such video" } }), received: {} }
    videos.set(id, videos.get(id)! + 1)
    if (video[2] !== undefined) return { status: 200, type: "video/mp4", body: `FAKE-MP4 ${id}`, received: {} }
    const outcome = upstream.videoOutcome
    return ok({
      id,
      object: "video",
      status: outcome,
      ...(outcome === "in_progress" ? { progress: 40 } : {}),
      ...(outcome === "failed" ? { error: { code: "render_failed", message: "The fake upstream failed to render" } } : {})
    }, {})
  }
  return undefined
}

/** JSON as Python's `json.dumps` writes it: `, ` and `: ` between members. */
const spacedJson = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(spacedJson).join(", ")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.entries(value).map(([key, member]) => `${JSON.stringify(key)}: ${spacedJson(member)}`).join(", ")}}`
    : JSON.stringify(value)

/**
 * Starts the upstream on a free port of 127.0.0.1.
 *
 * @category constructors
 */
export const start = async (script: FakeChatUpstream["script"] = () => ({ pieces: ["Hello", " world"] })): Promise<FakeChatUpstream> => {
  const received: Array<Received> = []
  const videos = new Map<string, number>()
  const sockets = new Set<Net.Socket>()
  const server = Http.createServer(async (request, response) => {
    const parts: Array<Buffer> = []
    for await (const part of request) parts.push(part as Buffer)
    const path = (request.url ?? "").startsWith(BASE) ? (request.url ?? "").slice(BASE.length) : request.url ?? ""
    if (request.method !== "POST" || path !== "/chat/completions") {
      const refusal = upstream.script({}).status
      if (refusal !== undefined && (refusal < 200 || refusal >= 300)) {
        received.push({ path, body: {}, headers: request.headers, hungUp: new Promise(() => {}) })
        return json(response, refusal, { error: { message: `scripted ${refusal}` } })
      }
      const other = await answerOther(upstream, videos, request.method ?? "", path, request.headers, Buffer.concat(parts))
      if (other === undefined) return json(response, 404, { error: { message: "not found" } })
      received.push({ path, body: other.received, headers: request.headers, hungUp: new Promise(() => {}) })
      response.writeHead(other.status, { "content-type": other.type }).end(other.body)
      return
    }
    const text = Buffer.concat(parts).toString("utf8")
    const body = JSON.parse(text) as Record<string, unknown>
    let finished = false
    const hungUp = new Promise<void>((resolve) =>
      response.on("close", () => {
        if (!finished) resolve()
      })
    )
    received.push({ path, body, text, headers: request.headers, hungUp })
    const reply = upstream.script(body)
    if (reply.status !== undefined && (reply.status < 200 || reply.status >= 300)) {
      finished = true
      response.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
        .end(JSON.stringify({ error: { message: `scripted ${reply.status}` } }))
      return
    }
    const usage = reply.usage ?? { prompt_tokens: 10, completion_tokens: reply.pieces.length }
    const fullUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }
    const id = `chatcmpl-fake-${received.length}`
    if (body["stream"] !== true) {
      if (reply.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, reply.delayMs! * reply.pieces.length))
      if (response.destroyed) return
      finished = true
      response.writeHead(200, { "content-type": "application/json", ...reply.headers }).end(JSON.stringify({
        id,
        object: "chat.completion",
        created: 1,
        model: body["model"],
        choices: [{
          index: 0,
          message: {
            role: "assistant",
            content: reply.pieces.join(""),
            ...(reply.reasoning === undefined ? {} : { reasoning_content: reply.reasoning.join("") }),
            ...(reply.toolCalls === undefined ? {} : {
              tool_calls: reply.toolCalls.map((call) => ({
                id: call.id,
                type: "function",
                function: { name: call.name, arguments: call.arguments }
              }))
            })
          },
          finish_reason: reply.toolCalls === undefined ? "stop" : "tool_calls"
        }],
        usage: fullUsage
      }))
      return
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers })
    response.flushHeaders()
    const pause = () => new Promise((resolve) => setTimeout(resolve, reply.delayMs ?? 0))
    const encode = reply.spaced === true ? spacedJson : JSON.stringify
    const chunk = (id: string, model: unknown, delta: Record<string, unknown>, finish: string | null) =>
      `data: ${
        encode({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })
      }\n\n`
    response.write(chunk(id, body["model"], { role: "assistant", content: "" }, null))
    for (const piece of reply.reasoning ?? []) response.write(chunk(id, body["model"], { reasoning_content: piece }, null))
    for (const piece of reply.pieces) {
      if (reply.delayMs !== undefined) await pause()
      if (response.destroyed) return
      response.write(chunk(id, body["model"], { content: piece }, null))
    }
    for (const [index, call] of (reply.toolCalls ?? []).entries()) {
      const half = Math.ceil(call.arguments.length / 2)
      response.write(
        chunk(
          id,
          body["model"],
          { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] },
          null
        )
      )
      for (const part of [call.arguments.slice(0, half), call.arguments.slice(half)]) {
        response.write(chunk(id, body["model"], { tool_calls: [{ index, function: { arguments: part } }] }, null))
      }
    }
    if (reply.stall === true) return
    if (reply.breakOff === true) {
      // once what was written has left, so the pieces arrive before the connection drops
      finished = true
      return void response.write("", () => setTimeout(() => response.socket?.destroy(), 50))
    }
    response.write(chunk(id, body["model"], {}, reply.toolCalls === undefined ? "stop" : "tool_calls"))
    const streamOptions = body["stream_options"] as { include_usage?: boolean } | undefined
    if (streamOptions?.include_usage === true) {
      response.write(
        `data: ${encode({ id, object: "chat.completion.chunk", created: 1, model: body["model"], choices: [], usage: fullUsage })}\n\n`
      )
    }
    finished = true
    response.end("data: [DONE]\n\n")
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const upstream: FakeChatUpstream = {
    baseUrl: `http://127.0.0.1:${port}${BASE}`,
    received,
    script,
    transcriptSeconds: 3.2,
    videoOutcome: "completed",
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
  return upstream
}
