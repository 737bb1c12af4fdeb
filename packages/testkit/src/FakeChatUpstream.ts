/**
 * A fake OpenAI-compatible chat upstream: a real `node:http` server answering
 * `POST <base>/chat/completions` with a JSON completion or a Server-Sent Events stream, the way
 * vLLM or a hosted API does. Tests script each reply (content pieces, status, usage, a stream that
 * stalls after its pieces) and read back every request it received and whether the caller hung
 * up, so a test can see what tollgate forwarded and that a client's disconnect reached the upstream.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type * as Net from "node:net"

/** How the upstream answers one request. @category models */
export interface Script {
  /** Content pieces: one stream chunk each, joined for a non-streaming reply. */
  readonly pieces: ReadonlyArray<string>
  /** A non-2xx status answers with an error body instead. */
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  /** Usage to report; by default prompt 10 and one completion token per piece. */
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number }
  /** Stream the pieces, then send nothing more and keep the connection open. */
  readonly stall?: boolean
  /** Milliseconds between stream chunks. */
  readonly delayMs?: number
}

/** One request the upstream received. @category models */
export interface Received {
  readonly body: Record<string, unknown>
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
  readonly close: () => Promise<void>
}

const chunk = (id: string, model: unknown, delta: Record<string, unknown>, finish: string | null) =>
  `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

/**
 * Starts the upstream on a free port of 127.0.0.1.
 *
 * @category constructors
 */
export const start = async (script: FakeChatUpstream["script"] = () => ({ pieces: ["Hello", " world"] })): Promise<FakeChatUpstream> => {
  const received: Array<Received> = []
  const sockets = new Set<Net.Socket>()
  const server = Http.createServer(async (request, response) => {
    const parts: Array<Buffer> = []
    for await (const part of request) parts.push(part as Buffer)
    if (request.method !== "POST" || !request.url?.endsWith("/chat/completions")) {
      response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }))
      return
    }
    const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as Record<string, unknown>
    let finished = false
    const hungUp = new Promise<void>((resolve) => response.on("close", () => { if (!finished) resolve() }))
    received.push({ body, headers: request.headers, hungUp })
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
      finished = true
      response.writeHead(200, { "content-type": "application/json", ...reply.headers }).end(JSON.stringify({
        id,
        object: "chat.completion",
        created: 1,
        model: body["model"],
        choices: [{ index: 0, message: { role: "assistant", content: reply.pieces.join("") }, finish_reason: "stop" }],
        usage: fullUsage
      }))
      return
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers })
    response.flushHeaders()
    const pause = () => new Promise((resolve) => setTimeout(resolve, reply.delayMs ?? 0))
    response.write(chunk(id, body["model"], { role: "assistant", content: "" }, null))
    for (const piece of reply.pieces) {
      if (reply.delayMs !== undefined) await pause()
      if (response.destroyed) return
      response.write(chunk(id, body["model"], { content: piece }, null))
    }
    if (reply.stall === true) return
    response.write(chunk(id, body["model"], {}, "stop"))
    const streamOptions = body["stream_options"] as { include_usage?: boolean } | undefined
    if (streamOptions?.include_usage === true) {
      response.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: body["model"], choices: [], usage: fullUsage })}\n\n`)
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
    baseUrl: `http://127.0.0.1:${port}/v1`,
    received,
    script,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
  return upstream
}
