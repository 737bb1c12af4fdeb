/**
 * An example host of this folder started as its docs say, as a child process:
 * `PORT=... TOLLGATE_DEV_CREDENTIALS_FILE=... node examples/own-endpoint/<host>.ts`, with the dev
 * keys it writes there once it answers.
 */
import { FreePort } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** A running host and the dev keys of its demo account. */
export interface Host {
  readonly origin: string
  readonly adminKey: string
  readonly inferenceKey: string
  /** Everything the process wrote to stdout and stderr so far. */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts `<host>.ts` on a free port with `env` (or the env of its port) added, once it answers under `prefix`. */
export const start = async (
  host: string,
  env: Record<string, string> | ((port: number) => Record<string, string>) = {},
  prefix = ""
): Promise<Host> => {
  const port = await FreePort.freePort()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-own-endpoint-"))
  const credentials = Path.join(dir, "credentials.json")
  const child = ChildProcess.spawn(process.execPath, [Path.join(import.meta.dirname, "..", `${host}.ts`)], {
    env: {
      PATH: process.env["PATH"] ?? "",
      PORT: String(port),
      TOLLGATE_DEV_CREDENTIALS_FILE: credentials,
      TOLLGATE_LOG_LEVEL: "warn",
      ...(typeof env === "function" ? env(port) : env)
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => void (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => void (output += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const origin = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${host} exited: ${output}`)
    if (Date.now() > deadline) throw new Error(`${host} did not answer: ${output}`)
    const answered = Fs.existsSync(credentials) &&
      await fetch(`${origin}${prefix}/api/v1/crypto/rpc/networks`).then((r) => r.ok, () => false)
    if (answered) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const { adminKey, inferenceKey } = JSON.parse(Fs.readFileSync(credentials, "utf8")) as { adminKey: string; inferenceKey: string }
  return {
    origin,
    adminKey,
    inferenceKey,
    output: () => output,
    stop: async () => {
      child.kill("SIGKILL")
      await exited
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** Decimal USD to integer nano-USD, exactly. */
export const nano = (usd: string | number): number => {
  const [whole, fraction = ""] = String(usd).split(".")
  return Number(whole) * 1_000_000_000 + Number(fraction.padEnd(9, "0"))
}

/**
 * The absolute URLs a 402 body links to, as paths. A JSON Schema's `$schema` (the bazaar
 * extension's schemas) names its dialect, not a page of the host.
 */
export const links = (body: unknown): Array<string> => {
  const found = new Set<string>()
  const collect = (value: unknown): void => {
    if (typeof value === "string" && /^https?:\/\//u.test(value)) found.add(new URL(value).pathname)
    else if (typeof value === "object" && value !== null)
      Object.entries(value).forEach(([key, inner]) => key === "$schema" || collect(inner))
  }
  collect(body)
  return [...found].sort()
}
