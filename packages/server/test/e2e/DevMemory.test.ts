import { Anvil, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll } from "vitest"
import * as Endpoints from "./support/Endpoints.ts"

let anvil: Anvil.Anvil
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
  server = await ShippedServer.start({ config: { rpc: { upstreams: { "base-mainnet": [anvil.url] } } } })
})

afterAll(async () => {
  await server?.stop()
  await anvil?.stop()
})

Endpoints.suite("Dev mode on the memory store", () => ({ server, chatModel: "local-echo", chatReply: /hello/i, network: "base-mainnet" }))
