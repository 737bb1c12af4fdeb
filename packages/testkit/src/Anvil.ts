/**
 * A throwaway anvil (the EVM node of `@foundry-rs/anvil`, binary from npm, works offline) on a
 * port of its own, for tests that need a real chain: RPC proxying, EIP-1271 wallets, EIP-3009
 * settlement.
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import { createRequire } from "node:module"
import * as Path from "node:path"

/** @category models */
export interface Anvil {
  readonly url: string
  readonly port: number
  readonly chainId: number
  readonly stop: () => Promise<void>
}

/** @category options */
export interface Options {
  readonly chainId?: number
  /** Keep sent transactions in the txpool (for txpool_* tests). */
  readonly noMining?: boolean
  readonly args?: ReadonlyArray<string>
}

/** The first dev account's key, funded with 10,000 ETH on every anvil. @category constants */
export const devPrivateKey = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80" as const

const platformPackage = (): string => {
  const arch = process.arch === "x64" ? "amd64" : process.arch
  return `@foundry-rs/anvil-${process.platform}-${arch}`
}

/**
 * The path of the anvil binary shipped by the platform package of `@foundry-rs/anvil`.
 *
 * @category constructors
 */
export const binaryPath = (): string => {
  const require = createRequire(require_base())
  const anvilPackage = Path.dirname(require.resolve("@foundry-rs/anvil/package.json"))
  const fromAnvil = createRequire(Path.join(anvilPackage, "package.json"))
  const platformDir = Path.dirname(fromAnvil.resolve(`${platformPackage()}/package.json`))
  return Path.join(platformDir, "bin", "anvil")
}

const require_base = () => new URL(import.meta.url).pathname

/**
 * Starts anvil on a free port (`--port 0`) and resolves once it listens.
 *
 * @category constructors
 */
export const start = (options: Options = {}): Promise<Anvil> =>
  new Promise((resolve, reject) => {
    const chainId = options.chainId ?? 31337
    const args = ["--host", "127.0.0.1", "--port", "0", "--chain-id", String(chainId), ...(options.args ?? [])]
    if (options.noMining) args.push("--no-mining")
    const child = ChildProcess.spawn(binaryPath(), args, { stdio: ["ignore", "pipe", "pipe"] })
    const onExit = () => child.kill("SIGKILL")
    process.once("exit", onExit)
    let output = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`anvil did not start: ${output}`))
    }, 15_000)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /Listening on 127\.0\.0\.1:(\d+)/.exec(output)
      if (match !== null) {
        clearTimeout(timer)
        child.stdout.removeAllListeners("data")
        child.stdout.resume()
        const port = Number(match[1])
        resolve({
          url: `http://127.0.0.1:${port}`,
          port,
          chainId,
          stop: async () => {
            process.removeListener("exit", onExit)
            if (child.exitCode !== null) return
            const exited = new Promise((done) => child.once("exit", done))
            child.kill("SIGKILL")
            await exited
          }
        })
      }
    })
  })
