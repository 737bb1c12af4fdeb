/**
 * `/metrics` of a server that has just started, as a scraper sees it before any traffic.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"

/** The metrics docs/operations.md documents, from its table. */
const documented = [
  ...Fs.readFileSync(Path.join(import.meta.dirname, "..", "..", "..", "docs", "operations.md"), "utf8")
    .matchAll(/^\| `((?:tollgate|process|nodejs)_[a-z_]+)` \|/gm)
].map((match) => match[1]!)

const sample = (text: string, name: string): number | undefined => {
  const line = text.split("\n").find((each) => each.startsWith(`${name} `) || each.startsWith(`${name}{`))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("Every documented metric exists from the start at zero, with the process's memory and CPU", () => {
  it("a scrape before any other request lists them all", { timeout: 90_000 }, async () => {
    expect(documented.length).toBeGreaterThan(10)
    const server = await ShippedServer.start({ env: { TOLLGATE_METRICS: "open" } })
    try {
      const text = await (await fetch(`${server.origin}/metrics`)).text()
      for (const name of documented) {
        expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, "m"))
      }
      for (const counter of ["tollgate_admissions_total", "tollgate_credits_captured_nano_usd_total", "tollgate_upstream_errors_total"]) {
        expect(sample(text, counter), counter).toBe(0)
      }
      expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(10_000_000)
      expect(sample(text, "nodejs_heap_size_used_bytes")).toBeGreaterThan(1_000_000)
      expect(sample(text, "process_cpu_seconds_total")).toBeGreaterThan(0)
    } finally {
      await server.stop()
    }
  })
})
