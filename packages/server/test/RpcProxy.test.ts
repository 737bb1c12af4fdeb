/**
 * The RPC proxy through the shipped server (`pnpm start`'s entry on a real port), over anvil and
 * stand-in nodes: the start-up check of each upstream's chain, the cache and its charges on
 * memory and on Redis, and merged reads.
 */
import { Anvil, ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let anvil: Anvil.Anvil

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 1 })
}, 60_000)

afterAll(async () => {
  await anvil?.stop()
})

/** A node that says it is on `chainId` and answers nothing else. */
const otherChain = async (chainId: number) => {
  const server = Http.createServer((request, response) => {
    request.resume()
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify([{ jsonrpc: "2.0", id: 3, result: `0x${chainId.toString(16)}` }]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    stop: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(resolve))
    }
  }
}

describe("RPC proxy: an upstream reporting another chain id stops the server at start, with one line naming the URL", () => {
  it("an ethereum-mainnet upstream on chain 5 -> exit 1, one FATAL line naming it", async () => {
    const wrong = await otherChain(5)
    try {
      const spawned = await ShippedServer.spawn({
        config: { rpc: { upstreams: { "ethereum-mainnet": [anvil.url, wrong.url.replace("http://", "http://user:secret@")] } } }
      })
      const code = await spawned.exited
      const lines = spawned.stdout().trim().split("\n")
      await spawned.stop()
      expect(code).toBe(1)
      expect(lines).toHaveLength(1)
      const line = JSON.parse(lines[0]!) as { level: string; message: string }
      expect(line.level).toBe("FATAL")
      expect(line.message).toBe(`invalid configuration: TOLLGATE_CONFIG.rpc.upstreams.ethereum-mainnet: ${wrong.url} reports chain id 5, not 1 (ethereum-mainnet)`)
    } finally {
      await wrong.stop()
    }
  })

  it("upstreams on the right chain start", async () => {
    const server = await ShippedServer.start({ config: { rpc: { upstreams: { "ethereum-mainnet": [anvil.url] } } } })
    try {
      const response = await fetch(`${server.api}/crypto/rpc/ethereum-mainnet`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" })
      })
      expect(await response.json()).toEqual({ jsonrpc: "2.0", id: 1, result: "0x1" })
    } finally {
      await server.stop()
    }
  })
})
