/**
 * Which JSON-RPC answers the proxy may keep, and for how long: the per-method policy of the RPC
 * cache, for a single read or each read of a batch. Only EVM reads are considered; a write, a
 * non-EVM network (Solana's and Starknet's finality is not tracked) and every method not named
 * here are never cached.
 *
 * - `immutable`: the answer cannot change (`eth_chainId`; a block, its transactions or state read
 *   at a block hash; anything at a block number at or below the finalized block, `earliest` too).
 * - `finality`: a transaction or receipt by hash: cached once the answer's `blockNumber` is
 *   finalized (a transaction above finality may move to another block in a reorg).
 * - `head`: the answer follows the head (`eth_blockNumber`, fees, a `latest`, `safe` or
 *   `finalized` tag): cached for the short `headTtlMs`, and only while the head the proxy last
 *   saw is unchanged, so a new block or a reorg of the head starts over.
 * - a block number above the finalized block is `none`: such an answer can change in a reorg,
 *   and nothing short of asking a node tells when it did.
 *
 * A `null`, an empty array, an empty string or an error is never stored.
 *
 * @since 0.1.0
 */
import type { Network } from "./Networks.ts"

/** @category models */
export type Decision =
  | { readonly _tag: "none" }
  | { readonly _tag: "immutable" }
  | { readonly _tag: "finality" }
  | { readonly _tag: "head" }
  | { readonly _tag: "block"; readonly number: number }

const NONE: Decision = { _tag: "none" }
const IMMUTABLE: Decision = { _tag: "immutable" }
const FINALITY: Decision = { _tag: "finality" }
const HEAD: Decision = { _tag: "head" }

/** Methods whose answer is the chain's, fixed for its life. */
const CONSTANT = new Set(["eth_chainId", "net_version"])

/** Methods that follow the head and take no block. */
const HEAD_METHODS = new Set(["eth_blockNumber", "eth_gasPrice", "eth_maxPriorityFeePerGas", "eth_blobBaseFee"])

/** Methods that name their block by hash at position 0: the answer of a hash never changes. */
const BY_BLOCK_HASH = new Set([
  "eth_getBlockByHash",
  "eth_getBlockTransactionCountByHash",
  "eth_getTransactionByBlockHashAndIndex",
  "eth_getUncleCountByBlockHash",
  "eth_getUncleByBlockHashAndIndex"
])

/** Methods that take a block (number, tag, hash or EIP-1898 object) at a position. */
const BLOCK_PARAM: ReadonlyMap<string, number> = new Map([
  ["eth_getBlockByNumber", 0],
  ["eth_getBlockTransactionCountByNumber", 0],
  ["eth_getTransactionByBlockNumberAndIndex", 0],
  ["eth_getUncleCountByBlockNumber", 0],
  ["eth_getUncleByBlockNumberAndIndex", 0],
  ["eth_getBlockReceipts", 0],
  ["eth_getBalance", 1],
  ["eth_getCode", 1],
  ["eth_getTransactionCount", 1],
  ["eth_call", 1],
  ["eth_getStorageAt", 2],
  ["eth_getProof", 2]
])

/** Transactions and receipts by hash: final once their block is. */
const BY_TRANSACTION = new Set(["eth_getTransactionByHash", "eth_getTransactionReceipt"])

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const BLOCK_HASH = /^0x[0-9a-fA-F]{64}$/u
const QUANTITY = /^0x[0-9a-fA-F]{1,16}$/u

/** What a block parameter names: a number, a hash, a head-following tag, or something uncacheable. */
const ofBlock = (block: unknown): Decision => {
  if (block === undefined || block === "latest" || block === "safe" || block === "finalized") return HEAD
  if (block === "earliest") return { _tag: "block", number: 0 }
  if (typeof block === "string") {
    if (BLOCK_HASH.test(block)) return IMMUTABLE
    if (QUANTITY.test(block)) return { _tag: "block", number: Number.parseInt(block, 16) }
    return NONE
  }
  if (isRecord(block)) {
    if (typeof block["blockHash"] === "string" && BLOCK_HASH.test(block["blockHash"])) return IMMUTABLE
    if ("blockNumber" in block) return ofBlock(block["blockNumber"])
  }
  return NONE
}

/** A range of `eth_getLogs`: by block hash, or two block numbers (a tag makes it uncacheable). */
const ofLogs = (filter: unknown): Decision => {
  if (!isRecord(filter)) return NONE
  if (typeof filter["blockHash"] === "string") return BLOCK_HASH.test(filter["blockHash"]) ? IMMUTABLE : NONE
  const from = ofBlock(filter["fromBlock"] ?? "latest")
  const to = ofBlock(filter["toBlock"] ?? "latest")
  return from._tag === "block" && to._tag === "block" && from.number <= to.number ? to : NONE
}

/**
 * The policy of one call, before it is made.
 *
 * @category policy
 */
export const decide = (network: Network, method: string, params: unknown): Decision => {
  if (network.chainId === undefined) return NONE
  const list = Array.isArray(params) ? params : params === undefined ? [] : undefined
  if (list === undefined) return NONE
  if (CONSTANT.has(method)) return IMMUTABLE
  if (HEAD_METHODS.has(method)) return HEAD
  if (BY_BLOCK_HASH.has(method)) return typeof list[0] === "string" && BLOCK_HASH.test(list[0]) ? IMMUTABLE : NONE
  if (BY_TRANSACTION.has(method)) return FINALITY
  if (method === "eth_getLogs") return ofLogs(list[0])
  const position = BLOCK_PARAM.get(method)
  if (position === undefined) return NONE
  // eth_getBlockReceipts takes a hash or a number at the same place.
  return ofBlock(list[position] ?? (position === 0 ? undefined : "latest"))
}

/**
 * Whether a result may be stored at all: never `null`, an empty array or an empty string (a node
 * that has not seen the block yet answers so).
 *
 * @category policy
 */
export const storable = (result: unknown): boolean =>
  result !== null && result !== undefined && result !== "" && !(Array.isArray(result) && result.length === 0)

/**
 * The block a transaction or receipt answer sits in, for the `finality` policy.
 *
 * @category policy
 */
export const answerBlock = (result: unknown): number | undefined => {
  if (!isRecord(result)) return undefined
  const block = result["blockNumber"]
  return typeof block === "string" && QUANTITY.test(block) ? Number.parseInt(block, 16) : undefined
}

/**
 * How long an answer may be kept given what is known of the chain, or `undefined` when it may
 * not: `ttlMs` for a final answer, `headTtlMs` for one that follows the head (0: not kept).
 *
 * @category policy
 */
export const lifetime = (
  decision: Decision,
  result: unknown,
  finalized: number | undefined,
  ttl: { readonly ttlMs: number; readonly headTtlMs: number }
): number | undefined => {
  if (!storable(result)) return undefined
  switch (decision._tag) {
    case "none":
      return undefined
    case "immutable":
      return ttl.ttlMs
    case "head":
      return ttl.headTtlMs > 0 ? ttl.headTtlMs : undefined
    case "block":
      return finalized !== undefined && decision.number <= finalized ? ttl.ttlMs : undefined
    case "finality": {
      const block = answerBlock(result)
      return block !== undefined && finalized !== undefined && block <= finalized ? ttl.ttlMs : undefined
    }
  }
}
