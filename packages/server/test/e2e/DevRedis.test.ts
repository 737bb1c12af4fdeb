import { Anvil, RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll } from "vitest"
import * as Endpoints from "./support/Endpoints.ts"

const redis = await RedisServer.start()
let anvil: Anvil.Anvil
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
  server = await ShippedServer.start({
    store: "redis",
    redisUrl: redis.url,
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
  await redis.stop()
})

Endpoints.suite("Dev mode on Redis", () => ({ server, chatModel: "local-echo", chatReply: /hello/i, network: "base-mainnet" }))
