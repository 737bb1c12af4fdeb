/**
 * A JSON-RPC node for the RPC proxy's tests that stands in front of a real one (anvil) and
 * misbehaves as real nodes do: it lags, answers slowly, reports another chain or refuses a wide
 * `eth_getLogs`, and counts the calls it received and answered, per method. In-process tests and
 * those of the shipped server use the same one.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** @category models */
export interface StandIn {
  readonly url: string
  /** HTTP requests received. */
  readonly requests: () => number
  /** The methods called so far. */
  readonly methods: () => ReadonlyArray<string>
  /** Calls of a method received (inside batches too). */
  readonly calls: (method: string) => number
  /** Calls of a method whose first parameter was `first`. */
  readonly callsWith: (method: string, first: unknown) => number
  /** Calls of a method answered so far. */
  readonly answered: (method: string) => number
  readonly stop: () => Promise<void>
}

/**
 * A node in front of a real one (anvil): a real HTTP server that forwards each item and can
 * misbehave like a real node does. `lagBlocks` makes it report a head that many blocks behind
 * (and answer `latest` with that block); `delayMs` slows the answer to a method; `chainId`
 * reports another chain; `maxLogRange` refuses an `eth_getLogs` over more blocks, as hosted
 * nodes do.
 *
 * @category constructors
 */
export const start = async (target: string, options: {
  readonly maxLogRange?: number
  readonly lagBlocks?: number
  readonly delayMs?: Readonly<Record<string, number>>
  readonly chainId?: number
} = {}): Promise<StandIn> => {
  let requests = 0
  const calls = new Map<string, number>()
  const answered = new Map<string, number>()
  const callsWith = new Map<string, number>()
  const bump = (map: Map<string, number>, method: string) => map.set(method, (map.get(method) ?? 0) + 1)
  const send = async (item: { id?: unknown; method: string; params?: Array<unknown> }): Promise<unknown> => {
    const response = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: item.id ?? null, method: item.method, params: item.params ?? [] })
    })
    return response.json()
  }
  const answer = async (item: { id?: unknown; method: string; params?: Array<unknown> }): Promise<unknown> => {
    bump(calls, item.method)
    bump(callsWith, `${item.method}\n${JSON.stringify(item.params?.[0])}`)
    const delay = options.delayMs?.[item.method] ?? 0
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay))
    let reply: unknown
    const filter = item.method === "eth_getLogs" ? item.params?.[0] as { fromBlock: string; toBlock: string } : undefined
    if (
      filter !== undefined && options.maxLogRange !== undefined &&
      Number.parseInt(filter.toBlock, 16) - Number.parseInt(filter.fromBlock, 16) + 1 > options.maxLogRange
    ) {
      reply = {
        jsonrpc: "2.0",
        id: item.id ?? null,
        error: { code: -32005, message: `query exceeds max block range ${options.maxLogRange}` }
      }
    } else if (options.chainId !== undefined && item.method === "eth_chainId") {
      reply = { jsonrpc: "2.0", id: item.id ?? null, result: `0x${options.chainId.toString(16)}` }
    } else if (options.lagBlocks !== undefined && (item.method === "eth_blockNumber" || item.params?.[0] === "latest")) {
      const head = Number.parseInt((await send({ id: 0, method: "eth_blockNumber" }) as { result: string }).result, 16)
      const behind = `0x${Math.max(0, head - options.lagBlocks).toString(16)}`
      reply = item.method === "eth_blockNumber"
        ? { jsonrpc: "2.0", id: item.id ?? null, result: behind }
        : await send({ ...item, params: [behind, ...(item.params ?? []).slice(1)] })
    } else {
      reply = await send(item)
    }
    bump(answered, item.method)
    return reply
  }
  const server = Http.createServer((request, response) => {
    requests++
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown
      const reply = Array.isArray(body) ? Promise.all(body.map(answer)) : answer(body as { method: string })
      reply.then((value) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify(value))
      }, () => response.destroy())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    methods: () => [...calls.keys()],
    calls: (method) => calls.get(method) ?? 0,
    answered: (method) => answered.get(method) ?? 0,
    callsWith: (method, first) => callsWith.get(`${method}\n${JSON.stringify(first)}`) ?? 0,
    stop: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}
