import { ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import { describe, expect, it } from "vitest"

type Outcome = "refused" | "answered" | "unanswered"

interface Probe {
  readonly outcome: Outcome
  readonly status?: number
  readonly retryAfter?: string | undefined
}

/**
 * One request on a fresh connection: refused, answered (any status), or no answer in time. A lost
 * request never gets one; a slow answer on a loaded machine does, so the time allowed is generous.
 */
const probe = (port: number): Promise<Probe> =>
  new Promise((resolve) => {
    const request = Http.get(
      { host: "127.0.0.1", port, path: "/api/v1/crypto/rpc/networks", agent: false, timeout: 15_000 },
      (response) => {
        response.resume()
        response.once("end", () =>
          resolve({ outcome: "answered", status: response.statusCode!, retryAfter: response.headers["retry-after"] }))
      }
    )
    request.once("timeout", () => {
      request.destroy()
      resolve({ outcome: "unanswered" })
    })
    // A reset or a socket closed without an answer is a lost request too.
    request.once("error", (error: NodeJS.ErrnoException) =>
      resolve({ outcome: error.code === "ECONNREFUSED" ? "refused" : "unanswered" }))
  })

/**
 * Spawns the server and probes it every few milliseconds from that instant until it has answered
 * 200 twenty times (bounded at 120 s and 20,000 probes).
 */
const probeOneStart = async () => {
  const server = await ShippedServer.spawn()
  const probes: Array<Promise<Probe>> = []
  let ok = 0
  const deadline = Date.now() + 120_000
  try {
    while (ok < 20 && Date.now() < deadline && probes.length < 20_000) {
      const next = probe(server.port)
      next.then((result) => {
        if (result.status === 200) ok++
      })
      probes.push(next)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    return await Promise.all(probes)
  } finally {
    await server.stop()
  }
}

describe("No request is lost while the server starts: every connection is refused or answered", () => {
  it("5 starts, probed every 5 ms from the instant of spawning: zero probes without an answer", { timeout: 240_000 }, async () => {
    // One start after another: five booting at once on two cores measure the machine, not the server.
    const starts: Array<ReadonlyArray<Probe>> = []
    for (let i = 0; i < 5; i++) starts.push(await probeOneStart())
    const all = starts.flat()
    const count = (outcome: Outcome) => all.filter((result) => result.outcome === outcome).length
    const early = all.filter((result) => result.outcome === "answered" && result.status !== 200)
    console.log(
      `startup probes: ${starts.length} starts, ${all.length} probes, ${count("refused")} refused, ${count("answered")} answered ` +
        `(${early.length} not 200), ${count("unanswered")} unanswered`
    )
    expect(count("unanswered")).toBe(0)
    expect(starts.every((results) => results.some((result) => result.status === 200))).toBe(true)
    // An answer before the app is ready can only be the 503 that asks to retry.
    expect(early.every((result) => result.status === 503 && result.retryAfter === "1")).toBe(true)
  })
})
