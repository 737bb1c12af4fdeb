import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as RequestLog from "../src/RequestLog.ts"

const entry = (i: number): RequestLog.Entry => ({
  requestId: `req-${i}`,
  principalId: i % 2 === 0 ? `account-${i}` : undefined,
  method: "GET",
  route: "/api/v1/crypto/rpc/networks",
  status: i % 7 === 0 ? 503 : 200,
  latencyMs: i / 3
})

/** Records `count` entries through `layerJson`, releases the layer, and returns what reached stdout. */
const written = async (count: number, options?: { readonly errorsOnly?: boolean }) => {
  const chunks: Array<string> = []
  const original = process.stdout.write.bind(process.stdout)
  process.stdout.write = ((chunk: string | Uint8Array) => {
    chunks.push(Buffer.from(chunk).toString("utf8"))
    return true
  }) as typeof process.stdout.write
  try {
    await Effect.runPromise(
      Effect.gen(function*() {
        const log = yield* RequestLog.RequestLog
        for (let i = 0; i < count; i++) log.record(entry(i))
      }).pipe(Effect.provide(RequestLog.layerJson(options)))
    )
  } finally {
    process.stdout.write = original
  }
  return { chunks, lines: chunks.join("").split("\n").filter((line) => line !== "") }
}

describe("Request log lines reach stdout whole and in order, in batched writes", () => {
  it("every recorded line is written by the time the layer is released", async () => {
    const { lines } = await written(10)
    expect(lines.map((line) => JSON.parse(line).annotations.requestId)).toEqual(Array.from({ length: 10 }, (_, i) => `req-${i}`))
    expect(JSON.parse(lines[1]!).annotations.principalId).toBe("anonymous")
  })

  it("a batch larger than one chunk is written in several chunks, no line cut between them", async () => {
    const { chunks, lines } = await written(5_000)
    expect(chunks.length).toBeGreaterThan(1)
    for (const chunk of chunks) expect(chunk.endsWith("\n")).toBe(true)
    expect(lines).toHaveLength(5_000)
    expect(lines.every((line, i) => JSON.parse(line).annotations.requestId === `req-${i}`)).toBe(true)
  })

  it("errorsOnly keeps the 5xx lines alone", async () => {
    const { lines } = await written(50, { errorsOnly: true })
    expect(lines.map((line) => JSON.parse(line).annotations.status)).toEqual(Array.from({ length: 8 }, () => 503))
  })
})

describe("A request log line names the client's own request id only when it sent one", () => {
  const base = { requestId: "0b7e", principalId: undefined, method: "GET", route: "/x", status: 200, latencyMs: 1 }
  it("clientRequestId is a field beside requestId", () => {
    const line = JSON.parse(RequestLog.format({ ...base, clientRequestId: "client-7" }, "2026-01-01T00:00:00.000Z"))
    expect(line.annotations).toMatchObject({ requestId: "0b7e", clientRequestId: "client-7" })
  })
  it("no client id, no field", () => {
    const line = JSON.parse(RequestLog.format(base, "2026-01-01T00:00:00.000Z"))
    expect("clientRequestId" in line.annotations).toBe(false)
  })
})
