/**
 * JSON-RPC 2.0 as the proxy accepts it: one request object or a batch of 1 to 100, every item
 * checked on its own, and the whole request refused when any item is malformed or names a method
 * the network's family does not admit. What passes comes out with each item's tier (the worst case
 * to hold); after the upstream answers, `outcomes` says what each item is billed as: its tier when
 * the node answered it with a result, `"error"` otherwise. `PricingEngine` turns both into credits.
 *
 * **Details**
 *
 * Ids are compared as JSON text, never as JS numbers: `parse` keeps an id such as
 * `12345678901234567890`, which a double cannot hold, as its source text, so two such ids stay apart
 * and come back as they were sent.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import { InvalidRequest } from "./Errors.ts"
import * as JsonText from "./JsonText.ts"
import type { Network } from "./Networks.ts"
import * as RpcAllowlist from "./RpcAllowlist.ts"

/** @category constants */
export const MAX_BATCH = 100

/**
 * One checked request item. `id` is its id as JSON text (`"abc"`, `7`, `12345678901234567890`,
 * `null`), undefined for a notification.
 *
 * @category models
 */
export interface Item {
  readonly method: string
  readonly id: string | undefined
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

/**
 * An id of `parse`'s output as JSON text, the form answers are matched on; undefined when the value
 * is not an id.
 *
 * @category parsing
 */
export const idText = (id: unknown): string | undefined => {
  switch (typeof id) {
    case "string":
      return JSON.stringify(id)
    case "number":
      return String(id)
    case "object":
      return id === null ? "null" : JsonText.isRawNumber(id) ? id.rawJSON : undefined
    default:
      return undefined
  }
}

/**
 * The indexes of a batch answer's elements by the text of their ids (`idText`), each id's in the
 * order they came; elements with no id or a null one are left out. Answers are matched to requests
 * by this, never by position: a node may reorder a batch's answers.
 *
 * @category parsing
 */
export const answerIndexes = (answers: ReadonlyArray<unknown>): Map<string, Array<number>> => {
  const byId = new Map<string, Array<number>>()
  answers.forEach((answer, index) => {
    const id = isRecord(answer) ? idText(answer["id"]) : undefined
    if (id === undefined || id === "null") return
    const queue = byId.get(id)
    if (queue === undefined) byId.set(id, [index])
    else queue.push(index)
  })
  return byId
}

const inexactId = (u: unknown) => isRecord(u) && typeof u["id"] === "number" && !Number.isSafeInteger(u["id"])

/**
 * A JSON-RPC request or response body, parsed. It is read again losslessly (`JsonText.parse`) only
 * when an id is a number beyond 2^53 or a fraction, whose source a double may not keep. Throws as
 * `JSON.parse` does.
 *
 * @category parsing
 */
export const parse = (text: string): unknown => {
  const parsed: unknown = JSON.parse(text)
  const inexact = Array.isArray(parsed) ? parsed.some(inexactId) : inexactId(parsed)
  return inexact ? JsonText.parse(text) : parsed
}

const itemProblem = (item: unknown): string | undefined => {
  if (!isRecord(item)) return "is not a JSON-RPC request object"
  if (!("jsonrpc" in item)) return "is missing \"jsonrpc\""
  if (item["jsonrpc"] !== "2.0") return "has a \"jsonrpc\" other than \"2.0\""
  if (typeof item["method"] !== "string") return "has no string \"method\""
  if ("params" in item && (typeof item["params"] !== "object" || item["params"] === null)) {
    return "has \"params\" that is neither an array nor an object"
  }
  if ("id" in item && idText(item["id"]) === undefined) {
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
    return Result.fail(
      new InvalidRequest({
        message: `Invalid JSON-RPC request: a batch of ${raw.length} items (at most ${MAX_BATCH})`
      })
    )
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
    items.push({ method, id: "id" in item ? idText(item["id"]) : undefined, tier: classification.tier })
  }
  if (offending.size > 0) {
    const named = [...offending].map(([method, why]) => `${JSON.stringify(method)} (${why})`)
    return Result.fail(
      new InvalidRequest({
        message: `Methods not allowed on ${network.slug}: ${named.join(", ")}`
      })
    )
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

const isResult = (u: unknown): boolean =>
  isRecord(u) && "result" in u && (!("error" in u) || u["error"] === undefined || u["error"] === null)

/**
 * What each item is billed as once the upstream answered (`response` as `parse` read it, undefined
 * when the body was empty). An item is billed at its tier only when the node answered it: an item
 * with an id needs an answer with that id carrying a `result`; a notification gets no answer and
 * costs its tier unless an error without an id (or with a null one) is left for it. Everything else
 * is `"error"`: an item answered with an error, one the node left out, every item when one object
 * answers a whole batch with an error (or with a lone result), and every item of an empty or
 * malformed array. An error costs less than any tier, so the actual price never exceeds the hold.
 *
 * @category pricing
 */
export const outcomes = (request: Request, response: unknown): ReadonlyArray<RpcAllowlist.Tier | "error"> => {
  const items = request.items
  if (response === undefined) return items.map((item) => item.tier)
  if (!Array.isArray(response)) {
    return items.length === 1 && !request.batch && isResult(response) ? [items[0]!.tier] : items.map(() => "error")
  }
  if (response.length === 0 || !response.every(isRecord)) return items.map(() => "error")
  const byId = new Map<string, Array<boolean>>()
  let anonymous = 0
  for (const answer of response as ReadonlyArray<Record<string, unknown>>) {
    const id = idText(answer["id"])
    const result = isResult(answer)
    if (id === undefined) {
      if (!result) anonymous++
      continue
    }
    const queue = byId.get(id)
    if (queue === undefined) byId.set(id, [result])
    else queue.push(result)
  }
  const matched = items.map((item) => item.id === undefined ? undefined : byId.get(item.id)?.shift())
  for (const result of byId.get("null") ?? []) if (!result) anonymous++
  // An error without an id first stands for an item the node left out, then for a notification.
  anonymous -= items.filter((item, index) => item.id !== undefined && matched[index] === undefined).length
  return items.map((item, index) => {
    if (item.id !== undefined) return matched[index] === true ? item.tier : "error"
    if (anonymous > 0) {
      anonymous--
      return "error"
    }
    return item.tier
  })
}
