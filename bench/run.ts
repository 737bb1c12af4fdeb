/**
 * `pnpm bench`: runs every benchmark of `bench/` (or those named on the command line), one after
 * the other so they do not compete for the two cores, each printing its own table. Every
 * benchmark measures tollgate and its baseline in the same run and reports the ratio. Flags after
 * the names go to each selected benchmark (`pnpm bench peers --pin --baseline before=../old`).
 */
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

const benches = [
  "admission.ts",
  "auth.ts",
  "chat.ts",
  "dispatch.ts",
  "documents.ts",
  "heap.ts",
  "image.ts",
  "ledger.ts",
  "pipeline.ts",
  "networks.ts",
  "peers.ts",
  "ratelimit.ts",
  "replication.ts",
  "restrictions.ts",
  "rpc.ts",
  "rpc-cache.ts",
  "sse.ts",
  "voucher.ts"
]

// Names first, then the flags handed to every selected benchmark: `pnpm bench peers --rounds 3`.
const args = process.argv.slice(2)
const firstFlag = args.findIndex((arg) => arg.startsWith("--"))
const only = firstFlag === -1 ? args : args.slice(0, firstFlag)
const flags = firstFlag === -1 ? [] : args.slice(firstFlag)
const selected = only.length === 0 ? benches : benches.filter((name) => only.some((o) => name.includes(o)))
const dir = Path.dirname(new URL(import.meta.url).pathname)

for (const bench of selected) {
  console.log(`\n## ${bench}\n`)
  const result = ChildProcess.spawnSync(process.execPath, [Path.join(dir, bench), ...flags], { stdio: "inherit" })
  if (result.status !== 0) {
    console.error(`${bench} failed with status ${result.status}`)
    process.exitCode = 1
  }
}
