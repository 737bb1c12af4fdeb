import { Anvil, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll } from "vitest"
import * as Endpoints from "./support/Endpoints.ts"

let anvil: Anvil.Anvil
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
  server = await ShippedServer.start({
    config: {
      rpc: { upstreams: { "base-mainnet": [anvil.url] } },
      // Something that settles Base, so dev mode offers its USDC entries; never reached, no payment is sent.
      x402: { facilitatorUrl: "http://127.0.0.1:9" }
    }
  })
})

afterAll(async () => {
  await server?.stop()
  await anvil?.stop()
})

Endpoints.suite("Dev mode on the memory store", () => ({ server, chatModel: "local-echo", chatReply: /hello/i, network: "base-mainnet" }))
