/**
 * The shipped server as users run it, for end-to-end tests: the `pnpm start` entry point on a free
 * port, with a throwaway directory for its config file and dev credentials. Tests drive it over
 * HTTP only.
 *
 * **Details**
 *
 * The entry (`packages/server/bin/tollgate.mjs`, which runs `src/main.ts`) is spawned as a child
 * process of the test's own Node, not through pnpm, so the process tree is one process that signals
 * reach directly.
 *
 * Credentials, by mode:
 *
 * - dev mode (no signing key): the server's own demo account, read from
 *   `TOLLGATE_DEV_CREDENTIALS_FILE` once it answers.
 * - production on Redis: an account provisioned the operator's way, with the shipped CLI
 *   (`packages/server/bin/tollgate-cli.mjs`) against the same Redis and signing key while the
 *   server starts: one account (`acct_e2e` unless told), an ADMIN and an INFERENCE key, and $25 of
 *   credit (`provision: false` skips it). `cli` runs any other command the same way; a test that
 *   needs many accounts may instead seed the store in-process through the server's `Cli.layer` with
 *   the same signing key.
 * - production on memory: none. The memory store lives inside the server process and nothing
 *   outside it can create an account there, so such tests cover what needs no key (public
 *   endpoints, the 401 and 402 answers, wallets signing in).
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { freePort } from "./FreePort.ts"

const serverSource = Path.join(import.meta.dirname, "..", "..", "server", "src")

/** The `pnpm start` entry point. @category constants */
export const mainPath = Path.join(serverSource, "..", "bin", "tollgate.mjs")

/** The `tollgate-cli` bin. @category constants */
export const cliPath = Path.join(serverSource, "..", "bin", "tollgate-cli.mjs")

/**
 * The renderer that runs in the server, as a configuration file's `models` entry: an image model
 * that needs no upstream, for configurations that list their own models (production lists them).
 */
export const localRendererModel = {
  id: "local-renderer",
  name: "Local Renderer",
  type: "image",
  router: "local",
  sizing: "pixel",
  aspectRatios: [],
  resolutions: [],
  promptCharacterLimit: 7500,
  maxStyleReferences: 0,
  supportsOptimizePromptThinking: false,
  supportsWebSearch: false,
  qualities: [],
  upstreams: []
}

/** @category models */
export interface Options {
  /** More environment variables (`TOLLGATE_*`); they win over the ones derived below. */
  readonly env?: Readonly<Record<string, string>>
  /** Written to a JSON file in the server's directory and passed as `TOLLGATE_CONFIG`. */
  readonly config?: unknown
  readonly store?: "memory" | "redis"
  /** Required with `store: "redis"`. */
  readonly redisUrl?: string
  /** Production mode: a PKCS#8 PEM Ed25519 key, or `true` for a fresh one. Absent: dev mode. */
  readonly signingKey?: string | true
  /** Production on Redis: the provisioned account's id (default `acct_e2e`). */
  readonly accountId?: string
  /** Production on Redis: provision the account with the CLI (default true). */
  readonly provision?: boolean
  /** How long to wait for the first answer (default 60 s: a loaded CI machine starts slowly). */
  readonly timeoutMs?: number
}

/** @category models */
export interface Credentials {
  readonly accountId: string
  readonly adminKey: string
  readonly inferenceKey: string
}

/** A spawned server, not yet known to answer. @category models */
export interface Spawned {
  readonly origin: string
  readonly port: number
  readonly pid: number
  readonly signingKey: string | undefined
  /** The environment the server runs with (beyond `PATH`). */
  readonly env: Readonly<Record<string, string>>
  /** Everything the process wrote to stdout and stderr so far, interleaved. */
  readonly output: () => string
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (null when ended by a signal). */
  readonly exited: Promise<number | null>
  /** Sends a signal (default SIGTERM) and resolves with the exit code; removes the directory. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
  /** SIGKILL: a crash, not a shutdown. */
  readonly kill: () => Promise<void>
}

/** A server that answers HTTP. @category models */
export interface ShippedServer extends Spawned {
  /** `origin + "/api/v1"` */
  readonly api: string
  /** Dev mode and production on Redis; see the module comment. */
  readonly credentials: Credentials | undefined
  /** Runs the shipped CLI with the server's environment; resolves with its JSON output line. */
  readonly cli: (args: ReadonlyArray<string>) => Promise<Record<string, unknown>>
}

/**
 * A fresh Ed25519 signing key in the PKCS#8 PEM form `TOLLGATE_SIGNING_KEY` takes.
 *
 * @category constructors
 */
export const generateSigningKey = (): string =>
  Crypto.generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()

const baseEnv = () => ({ PATH: process.env["PATH"] ?? "" })

/**
 * Spawns the server and returns at once, without waiting for it to answer (for tests of the
 * start itself: refused configurations, the first requests).
 *
 * @category constructors
 */
export const spawn = async (options: Options = {}): Promise<Spawned> => {
  const port = await freePort()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-shipped-"))
  const signingKey = options.signingKey === true ? generateSigningKey() : options.signingKey
  const env: Record<string, string> = {
    PORT: String(port),
    TOLLGATE_LOG_LEVEL: "warn",
    // One process per server unless a test asks for workers (production on Redis would fork one per
    // core): CI's two cores run many servers at once.
    TOLLGATE_WORKERS: "1",
    ...(options.store === undefined ? {} : { TOLLGATE_STORE: options.store }),
    ...(options.redisUrl === undefined ? {} : { TOLLGATE_REDIS_URL: options.redisUrl }),
    ...(signingKey === undefined
      ? { TOLLGATE_DEV_CREDENTIALS_FILE: Path.join(dir, "credentials.json") }
      : { TOLLGATE_SIGNING_KEY: signingKey }),
    ...options.env
  }
  if (options.config !== undefined) {
    const file = Path.join(dir, "config.json")
    Fs.writeFileSync(file, JSON.stringify(options.config))
    env["TOLLGATE_CONFIG"] ??= file
  }
  const child = ChildProcess.spawn(process.execPath, [mainPath], { env: { ...baseEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString()
    stdout += chunk.toString()
  })
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString()
    stderr += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const orphan = () => child.kill("SIGKILL")
  process.once("exit", orphan)
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    const code = await exited
    process.removeListener("exit", orphan)
    Fs.rmSync(dir, { recursive: true, force: true })
    return code
  }
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    signingKey,
    env,
    output: () => output,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    stop,
    kill: async () => {
      await stop("SIGKILL")
    }
  }
}

/** Resolves once anything answers HTTP on the origin (any status); each probe gives up after 1 s. */
const waitForAnswer = async (spawned: Spawned, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  let exitCode: number | null | "running" = "running"
  spawned.exited.then((code) => (exitCode = code), () => {})
  for (;;) {
    if (exitCode !== "running") throw new Error(`the server exited (${exitCode}) before answering:\n${spawned.output()}`)
    if (Date.now() > deadline) {
      await spawned.kill()
      throw new Error(`the server did not answer within ${timeoutMs} ms:\n${spawned.output()}`)
    }
    const answered = await fetch(`${spawned.origin}/`, { signal: AbortSignal.timeout(1000) }).then(
      async (response) => {
        await response.arrayBuffer()
        return true
      },
      () => false
    )
    if (answered) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const runCli = (env: Readonly<Record<string, string>>) => (args: ReadonlyArray<string>) =>
  new Promise<Record<string, unknown>>((resolve, reject) => {
    ChildProcess.execFile(process.execPath, [cliPath, ...args], { env: { ...baseEnv(), ...env } }, (error, stdout, stderr) => {
      if (error !== null) return reject(new Error(`tollgate-cli ${args.join(" ")}: ${stderr || String(error)}`))
      try {
        resolve(JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown>)
      } catch {
        reject(new Error(`tollgate-cli ${args.join(" ")} printed no JSON: ${stdout}${stderr}`))
      }
    })
  })

/** The operator's way: account, ADMIN and INFERENCE keys, credit. */
const provision = async (cli: ShippedServer["cli"], accountId: string): Promise<Credentials> => {
  await cli(["accounts", "create", "--id", accountId, "--description", "end-to-end tests"])
  const [admin, inference] = await Promise.all([
    cli(["keys", "mint", "--account", accountId, "--type", "ADMIN"]),
    cli(["keys", "mint", "--account", accountId, "--type", "INFERENCE"]),
    cli(["credits", "grant", "--account", accountId, "--usd", "25.00", "--reference", "e2e-seed"])
  ])
  return { accountId, adminKey: String(admin!["apiKey"]), inferenceKey: String(inference!["apiKey"]) }
}

/**
 * Spawns the server and resolves once it answers HTTP, with the credentials of its mode.
 *
 * @category constructors
 */
export const start = async (options: Options = {}): Promise<ShippedServer> => {
  const spawned = await spawn(options)
  const cli = runCli(spawned.env)
  const provisioned = spawned.signingKey !== undefined && options.store === "redis" && options.provision !== false
    ? provision(cli, options.accountId ?? "acct_e2e")
    : undefined
  try {
    await waitForAnswer(spawned, options.timeoutMs ?? 60_000)
    const credentials = provisioned !== undefined
      ? await provisioned
      : spawned.signingKey === undefined
      ? JSON.parse(Fs.readFileSync(spawned.env["TOLLGATE_DEV_CREDENTIALS_FILE"]!, "utf8")) as Credentials
      : undefined
    return { ...spawned, api: `${spawned.origin}/api/v1`, credentials, cli }
  } catch (error) {
    await spawned.kill()
    await provisioned?.catch(() => undefined)
    throw error
  }
}
