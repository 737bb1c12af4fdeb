import { Models } from "@tollgate/core"
import { Anvil, FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll } from "vitest"
import * as Endpoints from "./support/Endpoints.ts"

const redis = await RedisServer.start()
let anvil: Anvil.Anvil
let upstream: Awaited<ReturnType<typeof FakeChatUpstream.start>>
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  anvil = await Anvil.start({ chainId: 8453 })
  upstream = await FakeChatUpstream.start(() => ({ pieces: ["Hello", " from", " upstream"] }))
  server = await ShippedServer.start({
    store: "redis",
    redisUrl: redis.url,
    signingKey: true,
    env: { TOLLGATE_OPERATOR_ACCOUNTS: "acct_e2e" },
    config: {
      models: [
        { id: "house-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        ...Models.defaults.filter((model) => model.id === "local-renderer")
      ],
      prices: { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } },
      rpc: { upstreams: { "base-mainnet": [anvil.url] } },
      x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" } }
    }
  })
})

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await anvil?.stop()
  await redis.stop()
})

Endpoints.suite("Production mode on Redis", () => ({ server, chatModel: "house-model", chatReply: /Hello from upstream/, network: "base-mainnet" }))
