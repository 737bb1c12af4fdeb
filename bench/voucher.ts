/**
 * The tollgate process's CPU per paid RPC call (`eth_blockNumber`, proxied to anvil), paid with an
 * API key and paid with an x402 `batch-settlement` voucher, in the same run against the same
 * shipped server (`pnpm start`'s entry, dev mode, memory stores) on the test chain (the test USDC
 * and x402's channel contract at their canonical addresses). The server's CPU (user + system, from
 * `/proc/<pid>/stat`) is read around each measured batch of sequential calls, key and voucher
 * batches alternated. A voucher call is measured two ways: the paid request alone (the client
 * signs the voucher from the entry it already knows and sends it at once), and as the official
 * `wrapFetchWithPayment` makes it (each call first meets the 402, then pays). Target: the paid
 * request's CPU at most 1.5x the key-paid call's.
 *
 * Options: --calls 500 (per measured batch), --rounds 2, --profile <dir> (the server runs under
 * `node --cpu-prof`; its profile is written there and its heaviest functions printed).
 */
import { ShippedServer } from "@tollgate/testkit"
import { toClientEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/client"
import { wrapFetchWithPayment, x402Client, x402HTTPClient } from "@x402/fetch"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { parseArgs } from "node:util"
import { createPublicClient, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as X402Chain from "../packages/http/test/support/X402Chain.ts"
import { table } from "./Harness.ts"

const { values } = parseArgs({
  options: { calls: { type: "string", default: "500" }, rounds: { type: "string", default: "2" }, profile: { type: "string", default: "" } }
})
const calls = Number(values.calls)
const rounds = Number(values.rounds)

/** Anvil's third dev key, the relayer. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const body = JSON.stringify({ jsonrpc: "2.0", method: "eth_blockNumber", params: [], id: 1 })

/** The process's CPU so far, in milliseconds (clock ticks of 10 ms). */
const cpuMs = (pid: number) => {
  const fields = Fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10
}

const chain = await X402Chain.start()
const server = await ShippedServer.start({
  config: {
    rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
    rateLimits: { tiers: { default: { rpc: { requests: 1_000_000 } } } },
    x402: {
      payTo: { evm: privateKeyToAccount(generatePrivateKey()).address },
      relayerKey: RELAYER_KEY,
      evmRpcUrl: chain.anvil.url,
      // No claim during the run: claims are background work, not the call's.
      batchSettlement: { claimIntervalSeconds: 86_400, claimThresholdUsd: "100", exposureCapUsd: "100", minDepositUsd: "10" }
    }
  },
  env: {
    TOLLGATE_LOG_LEVEL: "warn",
    ...(values.profile === "" ? {} : { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${Path.resolve(values.profile)}` })
  }
})
const url = `${server.api}/crypto/rpc/base-mainnet`
const key = server.credentials!.inferenceKey
try {
  const payer = privateKeyToAccount(generatePrivateKey())
  await chain.mint(payer.address, 100_000_000n)
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(payer, createPublicClient({ transport: http(chain.anvil.url) })))
  const client = new x402Client().register("eip155:*", scheme)
  const wrapped = wrapFetchWithPayment(fetch, client)
  const httpClient = new x402HTTPClient(client)
  const init = (headers: Record<string, string>): RequestInit => ({
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body
  })
  const expectOk = async (response: Response) => {
    if (response.status !== 200) throw new Error(`${response.status}: ${await response.text()}`)
    await response.arrayBuffer()
  }
  // The entry the paid requests sign for, from one 402; the first wrapped call makes the deposit.
  const unpaid = await fetch(url, init({}))
  const required = httpClient.getPaymentRequiredResponse((name) => unpaid.headers.get(name))
  await expectOk(await wrapped(url, init({})))

  const byKey = async () => expectOk(await fetch(url, init({ authorization: `Bearer ${key}` })))
  const byVoucher = async () => {
    const payload = await httpClient.createPaymentPayload(required)
    const response = await fetch(url, init(httpClient.encodePaymentSignatureHeader(payload)))
    // The scheme's hook reads the charge and the channel from PAYMENT-RESPONSE for the next voucher.
    await httpClient.processPaymentResult(payload, (name) => response.headers.get(name), response.status)
    await expectOk(response)
  }
  const byWrapper = async () => expectOk(await wrapped(url, init({})))

  const measure = async (call: () => Promise<void>) => {
    const before = cpuMs(server.pid)
    const started = performance.now()
    for (let i = 0; i < calls; i++) await call()
    return { cpuMs: cpuMs(server.pid) - before, wallMs: performance.now() - started }
  }
  for (let i = 0; i < 100; i++) {
    await byKey()
    await byWrapper()
  }
  const totals = { key: { cpuMs: 0, wallMs: 0 }, voucher: { cpuMs: 0, wallMs: 0 }, wrapper: { cpuMs: 0, wallMs: 0 } }
  for (let round = 0; round < rounds; round++) {
    for (const [name, call] of [["key", byKey], ["voucher", byVoucher], ["wrapper", byWrapper]] as const) {
      const took = await measure(call)
      totals[name].cpuMs += took.cpuMs
      totals[name].wallMs += took.wallMs
    }
  }
  const per = (total: { cpuMs: number; wallMs: number }) => total.cpuMs / (calls * rounds)
  table([
    { "paid with": "API key", "server CPU ms / call": per(totals.key).toFixed(3), "x key": "1.00" },
    {
      "paid with": "voucher (paid request)",
      "server CPU ms / call": per(totals.voucher).toFixed(3),
      "x key": (per(totals.voucher) / per(totals.key)).toFixed(2)
    },
    {
      "paid with": "voucher (official wrapper: 402, then paid)",
      "server CPU ms / call": per(totals.wrapper).toFixed(3),
      "x key": (per(totals.wrapper) / per(totals.key)).toFixed(2)
    }
  ])
} finally {
  await server.stop()
  await chain.stop()
}

if (values.profile !== "") {
  const file = Fs.readdirSync(values.profile).filter((name) => name.endsWith(".cpuprofile")).map((name) => Path.join(values.profile!, name))
    .sort((a, b) => Fs.statSync(b).mtimeMs - Fs.statSync(a).mtimeMs)[0]
  if (file !== undefined) {
    const { heaviest } = await import("./Profile.ts")
    console.log(`\nThe tollgate process's heaviest functions by self time (${file})\n`)
    table(heaviest(file, 25))
  }
}
