import autocannon from "autocannon"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { dir, freePort } from "./Harness.ts"

const port = await freePort()
const child = ChildProcess.spawn(process.execPath, [...(process.env["PROF"] === "0" ? [] : ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"]), "--import", "/tmp/prof/exit.mjs", Path.join(dir, process.argv[2] ?? "servers/tollgate.ts"), String(port)], {
  env: { ...process.env },
  stdio: ["ignore", "pipe", "inherit"]
})
await new Promise<void>((resolve) => {
  let out = ""
  child.stdout!.on("data", (c: Buffer) => { out += c.toString(); if (out.includes("listening")) resolve() })
})
await autocannon({ url: `http://127.0.0.1:${port}/api/v1/crypto/rpc/networks`, connections: 50, duration: 2 })
const r = await autocannon({ url: `http://127.0.0.1:${port}/api/v1/crypto/rpc/networks`, connections: 50, duration: 6 })
console.log("req/s", r.requests.average, "non2xx", r.non2xx)
const exited = new Promise((res) => child.once("exit", res))
child.kill("SIGINT")
await exited
