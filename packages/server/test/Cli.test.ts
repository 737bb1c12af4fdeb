import { NodeServices } from "@effect/platform-node"
import { assert, describe, expect, it } from "@effect/vitest"
import { type AuditLog, Auth, AuthStore, CreditLedger, Jwt, KeyCaps } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { TestConsole } from "effect/testing"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cli from "../src/Cli.ts"
import * as DevCredentials from "../src/DevCredentials.ts"

const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const services = Layer.mergeAll(
  Auth.layer({ signingKey, publicOrigin: "http://localhost:8787" }).pipe(Layer.provideMerge(AuthStore.layerMemory)),
  CreditLedger.layerMemory,
  NodeServices.layer
)

const lastJson = Effect.map(TestConsole.logLines, (lines) => JSON.parse(String(lines.at(-1))) as Record<string, string>)

describe("Operator CLI: create an account, mint and revoke keys with the signing key, grant credits", () => {
  it.effect("the commands act on the store, and a minted key authenticates until revoked", () =>
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      // The commands act on these very instances, so the test can look at what they did.
      const shared = Layer.succeedContext(
        yield* Effect.context<Auth.Auth | KeyCaps.KeyCaps | CreditLedger.CreditLedger | AuditLog.AuditLog>()
      )
      const run = (argv: ReadonlyArray<string>) => Cli.run(argv, shared)
      yield* run(["accounts", "create", "--id", "acct_cli", "--description", "Acme"])
      assert.isTrue(Option.isSome(yield* auth.getAccount("acct_cli")))

      yield* run(["keys", "mint", "--account", "acct_cli", "--type", "ADMIN", "--description", "ops"])
      const minted = yield* lastJson
      const principal = yield* auth.authenticate({ authorization: `Bearer ${minted["apiKey"]}` })
      assert.strictEqual(Option.getOrUndefined(principal)?.accountId, "acct_cli")

      yield* run(["keys", "revoke", "--account", "acct_cli", "--id", minted["keyId"]!])
      const refused = yield* Effect.flip(auth.authenticate({ authorization: `Bearer ${minted["apiKey"]}` }))
      assert.strictEqual(refused._tag, "Unauthenticated")

      yield* run(["credits", "grant", "--account", "acct_cli", "--usd", "25.00", "--reference", "invoice-42"])
      assert.strictEqual(Number((yield* lastJson)["balanceUsd"]), 25)
    }).pipe(Effect.provide(services)))

  it.effect("keys mint --cap-usd caps a key from its first call; keys cap changes or removes the cap", () =>
    Effect.gen(function*() {
      const caps = yield* KeyCaps.KeyCaps
      const shared = Layer.succeedContext(
        yield* Effect.context<Auth.Auth | KeyCaps.KeyCaps | CreditLedger.CreditLedger | AuditLog.AuditLog>()
      )
      const run = (argv: ReadonlyArray<string>) => Cli.run(argv, shared)
      const capOf = (keyId: string) => Effect.map(caps.read("acct_caps", [keyId], Date.now()), (found) => found.get(keyId)?.cap)
      yield* run(["accounts", "create", "--id", "acct_caps"])
      yield* run(["keys", "mint", "--account", "acct_caps", "--type", "INFERENCE", "--cap-usd", "5", "--limit-period", "MONTH"])
      const minted = yield* lastJson
      assert.deepStrictEqual([minted["capUsd"], minted["limitPeriod"]], ["5", "MONTH"])
      assert.deepStrictEqual(yield* capOf(minted["keyId"]!), { usd: 5_000_000_000, period: "MONTH" })
      yield* run(["keys", "cap", "--account", "acct_caps", "--id", minted["keyId"]!, "--usd", "0.05"])
      assert.deepStrictEqual(yield* capOf(minted["keyId"]!), { usd: 50_000_000, period: "EPOCH" })
      yield* run(["keys", "cap", "--account", "acct_caps", "--id", minted["keyId"]!, "--usd", "none"])
      assert.isUndefined(yield* capOf(minted["keyId"]!))
      const unknown = yield* Effect.flip(run(["keys", "cap", "--account", "acct_caps", "--id", "key_missing", "--usd", "1"]))
      assert.strictEqual(unknown._tag, "UserError")
    }).pipe(Effect.provide(services)))
})

describe("Dev mode: a demo account with one ADMIN and one INFERENCE key, written to the credentials file", () => {
  it.effect("the keys authenticate with their types and the file holds exactly the three fields", () =>
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const dir = yield* Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "tollgate-dev-")))
      const file = Path.join(dir, "credentials.json")
      const credentials = yield* DevCredentials.create({ file })
      const written = JSON.parse(yield* Effect.promise(() => Fs.readFile(file, "utf8")))
      assert.deepStrictEqual(written, credentials)
      assert.deepStrictEqual(Object.keys(written), ["accountId", "adminKey", "inferenceKey"])
      const admin = yield* auth.authenticate({ authorization: `Bearer ${credentials.adminKey}` })
      const inference = yield* auth.authenticate({ authorization: `Bearer ${credentials.inferenceKey}` })
      const typeOf = (principal: typeof admin) =>
        Option.match(principal, { onNone: () => undefined, onSome: (p) => p._tag === "ApiKey" ? p.keyType : undefined })
      assert.strictEqual(typeOf(admin), "ADMIN")
      assert.strictEqual(typeOf(inference), "INFERENCE")
      yield* Effect.promise(() => Fs.rm(dir, { recursive: true }))
    }).pipe(Effect.provide(services)))
})

// Each command below runs in its own process and shares nothing with the others: those suites are
// concurrent, so the file waits for its slowest commands rather than their sum.
const cliMain = Path.join(import.meta.dirname, "..", "bin", "tollgate-cli.mjs")

const runCli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = ChildProcess.spawn(process.execPath, [cliMain, ...args], {
      env: { PATH: process.env["PATH"] ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

describe.concurrent("The CLI as documented: every command described in --help, signing-key to a file, each error printed once", () => {
  it("--help lists signing-key, accounts, keys and credits, each with a description, with no configuration", async () => {
    const { code, stdout } = await runCli(["--help"])
    expect(code).toBe(0)
    for (
      const [command, description] of [
        ["signing-key", "Make a new Ed25519 signing key"],
        ["accounts", "Accounts own API keys and credit"],
        ["keys", "API keys, signed with TOLLGATE_SIGNING_KEY"],
        ["credits", "Prepaid credit of an account"]
      ]
    ) {
      expect(stdout).toMatch(new RegExp(`${command}\\s+${description}`))
    }
  })

  it("signing-key --out FILE writes a key the server accepts, and nothing else goes in the file", async () => {
    const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "tollgate-cli-"))
    const file = Path.join(dir, "key.pem")
    const { code } = await runCli(["signing-key", "--out", file])
    expect(code).toBe(0)
    const pem = await Fs.readFile(file, "utf8")
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+-----END PRIVATE KEY-----\n$/)
    expect((await Fs.stat(file)).mode & 0o777).toBe(0o600)
    await Effect.runPromise(Jwt.importSigningKey(pem))
    const again = await runCli(["signing-key", "--out", file])
    expect(again.code).toBe(1)
    expect(again.stderr.trim().split("\n")).toHaveLength(1)
    expect(await Fs.readFile(file, "utf8")).toBe(pem)
    await Fs.rm(dir, { recursive: true })
  })

  it("a command that needs the signing key, run without one, prints one line and exits 1", async () => {
    const { code, stderr, stdout } = await runCli(["accounts", "create"], { TOLLGATE_STORE: "memory" })
    expect(code).toBe(1)
    expect(stdout).toBe("")
    expect(stderr.trim().split("\n")).toEqual([
      "tollgate-cli: TOLLGATE_SIGNING_KEY must be set: accounts, keys and credits are managed with the servers' signing key (tollgate-cli signing-key makes one)"
    ])
  })
})

describe.concurrent("Signing keys are named: signing-key prints the kid of the key it makes, and --id-of the kid of a key file", () => {
  it("the kid printed at creation is the one --id-of reads back, and the one keys minted with it carry", async () => {
    const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "tollgate-kid-"))
    const file = Path.join(dir, "key.pem")
    const made = JSON.parse((await runCli(["signing-key", "--out", file])).stdout) as { kid: string }
    const read = JSON.parse((await runCli(["signing-key", "--id-of", file])).stdout) as { kid: string }
    expect(read.kid).toBe(made.kid)
    const key = await Effect.runPromise(Jwt.importSigningKey(await Fs.readFile(file, "utf8")))
    expect(key.kid).toBe(made.kid)
    const refused = await runCli(["signing-key", "--id-of", Path.join(dir, "missing.pem")])
    expect(refused.code).toBe(1)
    expect(refused.stderr.trim().split("\n")).toHaveLength(1)
    await Fs.rm(dir, { recursive: true })
  })
})

describe.concurrent("A store command refuses a store nobody chose: the memory default would lose the account as the command exits", () => {
  it("accounts create with no TOLLGATE_STORE prints one line naming TOLLGATE_STORE and TOLLGATE_REDIS_URL, exits 1 and creates nothing", async () => {
    const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))
    const { code, stderr, stdout } = await runCli(["accounts", "create", "--id", "acct_lost"], { TOLLGATE_SIGNING_KEY: signingKey })
    expect(code).toBe(1)
    expect(stdout).toBe("")
    expect(stderr.trim().split("\n")).toEqual([
      "tollgate-cli: TOLLGATE_STORE is not set: set TOLLGATE_STORE=redis and TOLLGATE_REDIS_URL (the servers' store), or TOLLGATE_STORE=memory to try the commands on a store that is gone when the command exits"
    ])
  })

  it("TOLLGATE_STORE=memory asks for the memory store on purpose: the account is created", async () => {
    const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))
    const { code, stdout } = await runCli(["accounts", "create", "--id", "acct_try"], {
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_STORE: "memory"
    })
    expect(code).toBe(0)
    expect(JSON.parse(stdout)).toMatchObject({ accountId: "acct_try" })
  })
})

describe.concurrent("A store command on a Redis that does not answer prints one line naming TOLLGATE_REDIS_URL, as the server does", () => {
  it("accounts create against a closed port: exit 1, one line with the URL and the reason, nothing on stdout", async () => {
    const closed = await new Promise<number>((resolve) => {
      const probe = Net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as Net.AddressInfo
        probe.close(() => resolve(port))
      })
    })
    const signingKey = await Effect.runPromise(Jwt.generateSigningKey.pipe(Effect.flatMap(Jwt.exportSigningKey)))
    const { code, stderr, stdout } = await runCli(["accounts", "create", "--id", "acct_nowhere"], {
      TOLLGATE_SIGNING_KEY: signingKey,
      TOLLGATE_STORE: "redis",
      TOLLGATE_REDIS_URL: `redis://127.0.0.1:${closed}`
    })
    expect(code).toBe(1)
    expect(stdout).toBe("")
    expect(stderr.trim().split("\n")).toEqual([
      `tollgate-cli: invalid configuration: TOLLGATE_REDIS_URL: cannot connect to redis://127.0.0.1:${closed} (connect ECONNREFUSED 127.0.0.1:${closed})`
    ])
  })
})
