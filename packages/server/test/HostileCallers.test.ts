/**
 * What a hostile caller cannot do to the shipped server, on the memory store and on Redis: break an
 * account at the ledger's ceiling, credit an account that cannot exist, and the rest of issue #33's
 * findings, each reproduced the way the review found it.
 */
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** `Money.MAX`: the largest balance an account may reach. */
const MAX_USD = "9007199.254740991"
const MAX_NANO = 9_007_199_254_740_991n

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const nanoOf = (usd: string): bigint => {
  const [whole, fraction = ""] = usd.split(".")
  return BigInt(whole!) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0"))
}

const usdOf = (nano: bigint): string => {
  const fraction = (nano % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/u, "")
  return `${nano / 1_000_000_000n}${fraction === "" ? "" : `.${fraction}`}`
}

const redis = await RedisServer.acquire()
const redisUrl = "url" in redis ? redis.url : undefined
afterAll(() => ("stop" in redis ? redis.stop() : undefined))

type Store = "memory" | "redis"
const stores: ReadonlyArray<Store> = redisUrl === undefined ? ["memory"] : ["memory", "redis"]

/** One dev-mode server per store: its demo account is an operator's, so its ADMIN key grants credit. */
const servers = new Map<Store, ShippedServer.ShippedServer>()

beforeAll(async () => {
  for (const store of stores) {
    servers.set(store, await ShippedServer.start(store === "redis" ? { store, redisUrl: redisUrl! } : {}))
  }
}, 180_000)

afterAll(() => Promise.all([...servers.values()].map((server) => server.stop())))

const serverOf = (store: Store) => servers.get(store)!

let references = 0
const grant = (server: ShippedServer.ShippedServer, accountId: string, amountUsd: string) =>
  fetch(`${server.api}/billing/credits`, {
    method: "POST",
    headers: { ...bearer(server.credentials!.adminKey), "content-type": "application/json" },
    body: JSON.stringify({ accountId, amountUsd, reference: `hostile-${Date.now()}-${references++}` })
  })

const image = (server: ShippedServer.ShippedServer, key: string) =>
  fetch(`${server.api}/image/generate`, {
    method: "POST",
    headers: { ...bearer(key), "content-type": "application/json" },
    body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 32, height: 32, format: "png" })
  })

describe.each(stores)("Finding 5 (%s): a credit past the ledger's ceiling is refused before anything is written, and credits go only to accounts that can exist", (store) => {
  it("a grant reaching exactly the maximum is answered 200; one nano-USD more is a 400 naming the limit; the account still pays and reads its balance", async () => {
    const server = serverOf(store)
    const { accountId, inferenceKey } = server.credentials!
    const first = await grant(server, accountId, "0.000000001")
    expect(first.status).toBe(200)
    const before = nanoOf((await first.json() as { balanceUsd: string }).balanceUsd)

    const over = await grant(server, accountId, usdOf(MAX_NANO - before + 1n))
    expect(over.status).toBe(400)
    expect(await over.json()).toEqual({ error: `The balance would exceed the maximum of ${MAX_USD} USD` })

    const exact = await grant(server, accountId, usdOf(MAX_NANO - before))
    expect(exact.status).toBe(200)
    expect(await exact.json()).toMatchObject({ balanceUsd: MAX_USD })

    const oneMore = await grant(server, accountId, "0.000000001")
    expect(oneMore.status).toBe(400)
    expect(await oneMore.json()).toEqual({ error: `The balance would exceed the maximum of ${MAX_USD} USD` })

    const paid = await image(server, inferenceKey)
    expect(paid.status).toBe(200)
    expect(paid.headers.get("x-service-balance-usd")).toBe(MAX_USD)
    await paid.arrayBuffer()
    const after = await image(server, inferenceKey)
    expect(after.status).toBe(200)
    expect(nanoOf(after.headers.get("x-service-balance-usd")!)).toBeLessThan(MAX_NANO)
    await after.arrayBuffer()
  })

  it.each([
    ["a path", "../acct_demo"],
    ["a NUL", "acct\u0000demo"],
    ["a CRLF", "acct\r\ndemo"],
    ["a space", "acct demo"],
    ["a malformed wallet id", "wallet:evm:0xnot-an-address"],
    ["an account that does not exist", "acct_nobody_has_this"]
  ])("an account id with %s is refused with a 400 naming accountId", async (_, accountId) => {
    const response = await grant(serverOf(store), accountId, "1")
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ error: expect.any(String), details: { accountId: expect.any(Object) } })
  })

  it("a well-formed wallet's account can be granted credit before it ever signed in", async () => {
    const response = await grant(serverOf(store), "wallet:evm:0x00000000000000000000000000000000000000aa", "1")
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ balanceUsd: "1" })
  })
})
