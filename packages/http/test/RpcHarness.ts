/**
 * What the RPC proxy tests share: the app with the real pipeline (memory Auth, RateLimiter,
 * CreditLedger; memory or Redis IdempotencyStore) over given upstreams, an account with a key and
 * a balance, and a fake JSON-RPC upstream (a real `node:http` server) for the chains that cannot
 * run here.
 */
import { NodeRedis } from "@effect/platform-node"
import { RpcUpstream } from "@tollgate/backends"
import { Admission, CreditLedger, IdempotencyStore, Money, Networks, PricingEngine, RpcCache } from "@tollgate/core"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as RateLimiter from "@tollgate/core/RateLimiter"
import { IdempotencyStoreRedis } from "@tollgate/redis"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as Metered from "../src/Metered.ts"
import * as Rpc from "../src/routes/Rpc.ts"
import * as TestApp from "./support/TestApp.ts"

export interface Account {
  readonly accountId: string
  readonly authorization: string
  /** A header set to `null` is left out (`{ authorization: null }`: no credentials). */
  readonly fetch: (network: string, body: unknown, headers?: Record<string, string | null>) => Promise<Response>
  /** nano-USD captured so far (granted minus settled balance). */
  readonly charged: () => Promise<number>
}

export interface Harness extends Account {
  /** Another account with its own key, balance and rate limits. */
  readonly account: () => Promise<Account>
  /** A real HTTP server in front of the app, for clients such as viem. */
  readonly listen: () => Promise<string>
  readonly dispose: () => Promise<void>
}

export const GRANT = Money.usd(100)

export const idempotencyMemory = IdempotencyStore.layerMemory

export const idempotencyRedis = (url: string) => IdempotencyStoreRedis.layerRedis.pipe(Layer.provide(NodeRedis.layer({ url })))

export const make = async (options: {
  readonly upstreams: Readonly<Record<string, ReadonlyArray<string>>>
  readonly idempotency?: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
  readonly timeoutMs?: number
  /** More of the `rpc` section; head polls are off unless set, so upstream call counts are the calls'. */
  readonly rpc?: Omit<RpcUpstream.Config, "upstreams">
  /** The cache store; memory with `rpc.cache` unless set. */
  readonly cache?: Layer.Layer<RpcCache.RpcCache, unknown>
}): Promise<Harness> => {
  const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
  const services = Layer.mergeAll(
    Metered.layer().pipe(Layer.provide(Admission.layerMemory)),
    PricingEngine.layer(),
    RpcUpstream.layer({
      upstreams: options.upstreams,
      headPollMs: 0,
      ...options.rpc,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
    }),
    ServiceInfo.layer({ version: "test", hostName: "test-host" }),
    options.cache ?? RpcCache.layerMemory(options.rpc?.cache)
  ).pipe(Layer.provideMerge(Layer.mergeAll(
    TestApp.layerPaymentRequiredBodies(
      Auth.layer({ signingKey, publicOrigin: "http://localhost" }).pipe(Layer.provideMerge(AuthStore.layerMemory))
    ),
    RateLimiter.layerMemory(),
    CreditLedger.layerMemory,
    options.idempotency ?? IdempotencyStore.layerMemory,
    Metered.layerLimitsDefault
  )))
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.build(services).pipe(Scope.provide(scope)))
  const app = App.layer([Rpc.route]).pipe(Layer.provide(Layer.succeedContext(context)))
  const web = Handlers.toWebHandler(app)
  const servers: Array<Http.Server> = []
  let accounts = 0
  const account = async (): Promise<Account> => {
    const { accountId, key } = await Effect.runPromise(
      Effect.gen(function*() {
        const auth = yield* Auth.Auth
        const ledger = yield* CreditLedger.CreditLedger
        const account = yield* auth.createAccount()
        const { key } = yield* auth.createKey({ accountId: account.id, type: "INFERENCE", description: "rpc tests" })
        yield* ledger.grant({ accountId: account.id, amount: GRANT, reference: `grant-${accounts++}` })
        return { accountId: account.id, key }
      }).pipe(Effect.provide(context))
    )
    const authorization = `Bearer ${key}`
    return {
      accountId,
      authorization,
      fetch: (network, body, headers = {}) =>
        web.handler(
          new Request(`http://localhost/api/v1/crypto/rpc/${network}`, {
            method: "POST",
            headers: Object.fromEntries(
              Object.entries({ authorization, "content-type": "application/json", ...headers })
                .filter((entry): entry is [string, string] => entry[1] !== null)
            ),
            body: typeof body === "string" ? body : JSON.stringify(body)
          })
        ),
      charged: () =>
        Effect.runPromise(
          Effect.gen(function*() {
            const ledger = yield* CreditLedger.CreditLedger
            const balance = yield* ledger.balance(accountId)
            return GRANT - balance.usd
          }).pipe(Effect.provide(context))
        )
    }
  }
  const first = await account()
  return {
    ...first,
    account,
    listen: async () => {
      const node = await Handlers.toNodeHandler(app)
      const server = Http.createServer(node.handler)
      servers.push(server)
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      server.once("close", () => void node.dispose())
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    },
    dispose: async () => {
      for (const server of servers) {
        server.closeAllConnections()
        await new Promise((resolve) => server.close(resolve))
      }
      await web.dispose()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

/** What a fake upstream answers for a method: a result, or a JSON-RPC error. */
export type Answer = { readonly result: unknown } | { readonly error: { readonly code: number; readonly message: string } }

export interface FakeUpstream {
  readonly url: string
  /** HTTP requests received. */
  readonly requests: () => number
  readonly methods: () => ReadonlyArray<string>
  readonly stop: () => Promise<void>
}

/**
 * A JSON-RPC 2.0 server over `node:http`: canned answers per method, `unknown` for the rest (by
 * default the standard -32601), batches answered in reverse order so the proxy must restore it.
 * Reached at `<url>/<slug>`, it answers `eth_chainId` with that network's chain id, so one fake
 * can stand for every network (the proxy checks each upstream's chain id at start).
 */
export const fakeUpstream = async (
  answers: Readonly<Record<string, Answer>>,
  options: { readonly unknown?: Answer; readonly delayMs?: number } = {}
): Promise<FakeUpstream> => {
  let requests = 0
  const methods: Array<string> = []
  const answer = (chainId: number | undefined) => (item: { id?: unknown; method: string }) => {
    methods.push(item.method)
    const found = chainId !== undefined && item.method === "eth_chainId"
      ? { result: `0x${chainId.toString(16)}` }
      : answers[item.method] ?? options.unknown ?? { error: { code: -32601, message: "Method not found" } }
    return { jsonrpc: "2.0", id: item.id ?? null, ...found }
  }
  const server = Http.createServer((request, response) => {
    requests++
    const chunks: Array<Buffer> = []
    const chainId = Networks.findNetwork((request.url ?? "/").slice(1))?.chainId
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown
      const reply = Array.isArray(body) ? body.map(answer(chainId)).reverse() : answer(chainId)(body as { method: string })
      setTimeout(() => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify(reply))
      }, options.delayMs ?? 0)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    methods: () => methods,
    stop: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

/** nano-USD of a number of credits at the default price (625 nano-USD per credit). */
export const nanoOf = (credits: number) => credits * 625

/**
 * A JSON-RPC node over `node:http` whose reply is the given text for the request's raw text: for
 * answers a well-behaved node would not give (ids reordered, null-id errors, an empty array).
 */
export const scriptedUpstream = async (reply: (request: string) => string): Promise<FakeUpstream> => {
  let requests = 0
  const server = Http.createServer((request, response) => {
    requests++
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(reply(Buffer.concat(chunks).toString("utf8")))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    methods: () => [],
    stop: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

/** A node in front of anvil that can lag, answer slowly or report another chain (`@tollgate/testkit`). */
export { type StandIn, start as standIn } from "@tollgate/testkit/RpcStandIn"
