/**
 * JSON-RPC 2.0 as the proxy accepts it: one request object or a batch of 1 to 100, every item
 * checked on its own, and the whole request refused when any item is malformed or names a method
 * the network's family does not admit. What passes comes out with each item's tier (the worst case
 * to hold); after the upstream answers, `outcomes` says what each item is billed as: its tier, or
 * `"error"` when it was answered with a JSON-RPC error. `PricingEngine` turns both into credits.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import { InvalidRequest } from "./Errors.ts"
import type { Network } from "./Networks.ts"
import * as RpcAllowlist from "./RpcAllowlist.ts"

/** @category constants */
export const MAX_BATCH = 100

/**
 * One checked request item. `id` is absent for a notification.
 *
 * @category models
 */
export interface Item {
  readonly method: string
  readonly hasId: boolean
  readonly id: unknown
  readonly tier: RpcAllowlist.Tier
}

/**
 * A checked request: a single object or a batch.
 *
 * @category models
 */
export interface Request {
  readonly batch: boolean
  readonly items: ReadonlyArray<Item>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const itemProblem = (item: unknown): string | undefined => {
  if (!isRecord(item)) return "is not a JSON-RPC request object"
  if (!("jsonrpc" in item)) return "is missing \"jsonrpc\""
  if (item["jsonrpc"] !== "2.0") return "has a \"jsonrpc\" other than \"2.0\""
  if (typeof item["method"] !== "string") return "has no string \"method\""
  if ("params" in item && (typeof item["params"] !== "object" || item["params"] === null)) {
    return "has \"params\" that is neither an array nor an object"
  }
  const id = item["id"]
  if ("id" in item && id !== null && typeof id !== "string" && typeof id !== "number") {
    return "has an \"id\" that is not a string, a number or null"
  }
  return undefined
}

/**
 * Checks a parsed body against the network's method table. A refusal names every
 * malformed item by position, or every offending method with why it is refused.
 *
 * @category parsing
 */
export const check = (network: Network, body: unknown): Result.Result<Request, InvalidRequest> => {
  const batch = Array.isArray(body)
  const raw: ReadonlyArray<unknown> = batch ? body : [body]
  if (batch && raw.length === 0) {
    return Result.fail(new InvalidRequest({ message: "Invalid JSON-RPC request: an empty batch" }))
  }
  if (raw.length > MAX_BATCH) {
    return Result.fail(new InvalidRequest({
      message: `Invalid JSON-RPC request: a batch of ${raw.length} items (at most ${MAX_BATCH})`
    }))
  }
  const malformed: Array<string> = []
  raw.forEach((item, index) => {
    const problem = itemProblem(item)
    if (problem !== undefined) malformed.push(batch ? `item ${index} ${problem}` : `the request ${problem}`)
  })
  if (malformed.length > 0) {
    return Result.fail(new InvalidRequest({ message: `Invalid JSON-RPC request: ${malformed.join("; ")}` }))
  }
  const items: Array<Item> = []
  const offending = new Map<string, string>()
  for (const item of raw as ReadonlyArray<Record<string, unknown>>) {
    const method = item["method"] as string
    const classification = RpcAllowlist.classify(network.family, method)
    if (classification._tag !== "Tiered") {
      offending.set(method, RpcAllowlist.refusal(classification) ?? "")
      continue
    }
    items.push({ method, hasId: "id" in item, id: item["id"], tier: classification.tier })
  }
  if (offending.size > 0) {
    const named = [...offending].map(([method, why]) => `${JSON.stringify(method)} (${why})`)
    return Result.fail(new InvalidRequest({
      message: `Methods not allowed on ${network.slug}: ${named.join(", ")}`
    }))
  }
  return Result.succeed({ batch, items })
}

/**
 * The methods named in a refusal of `check`, in order (the inverse of its message).
 *
 * @category parsing
 */
export const refusedMethods = (message: string): ReadonlyArray<string> => {
  const list = message.slice(message.indexOf(": ") + 2)
  return [...list.matchAll(/("(?:[^"\\]|\\.)*") \(/g)].map((match) => JSON.parse(match[1] ?? "\"\"") as string)
}

const hasError = (u: unknown): boolean => isRecord(u) && "error" in u && u["error"] !== undefined && u["error"] !== null

/**
 * What each item is billed as once the upstream answered: `"error"` for an item answered with a
 * JSON-RPC error (matched by id; an id-less error answers an id-less or null-id item), its tier
 * otherwise, including a notification, which gets no answer. An error item costs less than any
 * tier, so the actual price never exceeds the hold.
 *
 * @category pricing
 */
export const outcomes = (request: Request, response: unknown): ReadonlyArray<RpcAllowlist.Tier | "error"> => {
  const answers: ReadonlyArray<unknown> = Array.isArray(response) ? response : response === undefined ? [] : [response]
  const errorIds = new Map<string, number>()
  let anonymousErrors = 0
  for (const answer of answers) {
    if (!hasError(answer)) continue
    const id = isRecord(answer) ? answer["id"] : undefined
    if (id === undefined || id === null) anonymousErrors++
    else errorIds.set(JSON.stringify(id), (errorIds.get(JSON.stringify(id)) ?? 0) + 1)
  }
  return request.items.map((item) => {
    const key = JSON.stringify(item.id)
    const errors = item.hasId ? errorIds.get(key) ?? 0 : 0
    if (errors > 0) {
      errorIds.set(key, errors - 1)
      return "error"
    }
    if (anonymousErrors > 0 && (!item.hasId || item.id === null)) {
      anonymousErrors--
      return "error"
    }
    return item.tier
  })
}
