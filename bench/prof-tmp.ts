import { Anvil, RedisServer } from "@tollgate/testkit"
import autocannon from "autocannon"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { dir, freePort } from "./Harness.ts"

const store = process.argv[2] ?? "memory"
const script = process.argv[3] ?? "servers/rpc-tollgate.ts"
const anvil = await Anvil.start({ chainId: 1 })
const redis = store === "redis" ? await RedisServer.start() : undefined
const port = await freePort()
const child = ChildProcess.spawn(process.execPath, ["--cpu-prof", "--cpu-prof-dir=/tmp/prof", "--import", "/tmp/prof/exit.mjs", Path.join(dir, script), String(port)], {
  env: { ...process.env, RPC_UPSTREAM: anvil.url, STORE: store, ...(redis ? { REDIS_URL: redis.url } : {}) },
  stdio: ["ignore", "pipe", "inherit"]
})
const key = await new Promise<string>((resolve) => {
  let out = ""
  child.stdout!.on("data", (c: Buffer) => {
    out += c.toString()
    const m = /key (\S+)\nlistening/.exec(out)
    if (m) resolve(m[1]!)
    else if (out.includes("listening")) resolve("")
  })
})
const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
const r = await autocannon({ url: `http://127.0.0.1:${port}/api/v1/crypto/rpc/ethereum-mainnet`, method: "POST", body, headers: { "content-type": "application/json", authorization: `Bearer ${key}` }, connections: 50, duration: 8 })
console.log("req/s", r.requests.average, "non2xx", r.non2xx)
const exited = new Promise((res) => child.once("exit", res))
child.kill("SIGINT")
await exited
await anvil.stop()
await redis?.stop()
