import { Models } from "@tollgate/core"
import { Anvil, FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
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
        ...Models.defaults.filter((model) => model.id === "local-renderer" || model.id === "dev-tts")
      ],
      prices: { chat: { "house-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } },
      rpc: { upstreams: { "base-mainnet": [anvil.url] } },
      x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" }, facilitatorUrl: "http://127.0.0.1:9" }
    }
  })
})

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await anvil?.stop()
  await redis.stop()
})

Endpoints.suite(
  "Production mode on Redis",
  () => ({ server, chatModel: "house-model", chatReply: /Hello from upstream/, network: "base-mainnet" })
)

describe("The operator's CLI grants credit on Redis once per reference", () => {
  it("a retried grant answers the same balance and credits nothing more; another amount under the reference is refused", async () => {
    const grant = (usd: string) => server.cli(["credits", "grant", "--account", "acct_e2e", "--usd", usd, "--reference", "cli-once"])
    const first = await grant("2.00")
    expect(first).toMatchObject({ accountId: "acct_e2e", amountUsd: "2", reference: "cli-once" })
    expect(await grant("2.00")).toEqual(first)
    const refused = await grant("3.00").then(() => "granted", (error: Error) => error.message.split("--reference cli-once: ")[1])
    expect(refused).toMatch(/^tollgate-cli: The reference was used/)
    const limits = await fetch(`${server.api}/api_keys/rate_limits`, {
      headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
    })
    expect((await limits.json() as { balances: { usd: string } }).balances.usd).toBe(first["balanceUsd"])
  })
})
