import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Networks from "../src/Networks.ts"
import * as RpcAllowlist from "../src/RpcAllowlist.ts"

const families = [...new Set(Networks.networks.map((network) => network.family))]
const evmFamilies = families.filter((family) => family !== "solana" && family !== "starknet")

describe("RpcAllowlist: every method is exactly one of tier S/A/L, unsupported, WebSocket-only or unknown", () => {
  it("no admitted method of any family is also refused", () => {
    for (const family of families) {
      for (const [method, tier] of RpcAllowlist.methods(family)) {
        expect(RpcAllowlist.classify(family, method), `${family} ${method}`).toEqual({ _tag: "Tiered", tier })
      }
    }
  })

  it("any name classifies to exactly one tag, the same every time", () => {
    fc.assert(fc.property(fc.constantFrom(...families), fc.string(), (family, method) => {
      const first = RpcAllowlist.classify(family, method)
      expect(["Tiered", "Unsupported", "WebSocketOnly", "Unknown"]).toContain(first._tag)
      expect(RpcAllowlist.classify(family, method)).toEqual(first)
    }))
  })
})

describe("RpcAllowlist: the spec's tier table (Standard 1x, Advanced 2x, Large 4x)", () => {
  it.each(
    [
      ["ethereum", "eth_call", "S"],
      ["ethereum", "eth_getBalance", "S"],
      ["ethereum", "eth_blockNumber", "S"],
      ["ethereum", "eth_sendRawTransaction", "S"],
      ["ethereum", "eth_getLogs", "S"],
      ["ethereum", "net_version", "S"],
      ["ethereum", "web3_clientVersion", "S"],
      ["ethereum", "eth_sendUserOperation", "S"],
      ["zksync", "zks_getBlockDetails", "S"],
      ["linea", "linea_estimateGas", "S"],
      ["polygon", "bor_getAuthor", "S"],
      ["starknet", "starknet_call", "S"],
      ["solana", "getAccountInfo", "S"],
      ["solana", "getBalance", "S"],
      ["solana", "getLatestBlockhash", "S"],
      ["solana", "sendTransaction", "S"],
      ["ethereum", "trace_transaction", "A"],
      ["ethereum", "trace_block", "A"],
      ["ethereum", "debug_traceTransaction", "A"],
      ["ethereum", "debug_traceCall", "A"],
      ["ethereum", "txpool_inspect", "A"],
      ["ethereum", "txpool_status", "A"],
      ["ethereum", "txpool_contentFrom", "A"],
      ["arbitrum", "arbtrace_block", "A"],
      ["ethereum", "trace_replayBlockTransactions", "L"],
      ["ethereum", "trace_replayTransaction", "L"],
      ["ethereum", "txpool_content", "L"],
      ["arbitrum", "arbtrace_replayTransaction", "L"],
      ["arbitrum", "arbtrace_replayBlockTransactions", "L"],
      ["solana", "getLargestAccounts", "L"],
      ["solana", "getSupply", "L"]
    ] as const
  )("%s %s is %s", (family, method, tier) => {
    expect(RpcAllowlist.classify(family, method)).toEqual({ _tag: "Tiered", tier })
  })
})

describe("RpcAllowlist: filters, key-holding, miner, node-control and cheat-code methods are unsupported on every EVM family", () => {
  const refused = [
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
    "eth_sign",
    "eth_accounts",
    "eth_mining",
    "eth_hashrate",
    "eth_getWork",
    "eth_submitWork",
    "eth_sendTransaction",
    "eth_signTransaction",
    "eth_coinbase",
    "eth_submitHashrate",
    "personal_sign",
    "admin_peers",
    "miner_start",
    "engine_newPayloadV4",
    "anvil_setBalance",
    "evm_mine",
    "hardhat_impersonateAccount",
    "debug_bundler_clearState",
    "clique_getSigners",
    "testing_buildBlockV1",
    "debug_setHead",
    "debug_setGCPercent",
    "debug_freeOSMemory",
    "debug_startCPUProfile",
    "debug_writeMemProfile",
    "debug_verbosity",
    "debug_chaindbCompact",
    "debug_setTrieFlushInterval"
  ]
  it.each(evmFamilies)("%s", (family) => {
    for (const method of refused) {
      expect(RpcAllowlist.classify(family, method)._tag, `${family} ${method}`).toBe("Unsupported")
    }
  })
})

describe("RpcAllowlist: no wildcard admits debug_* or trace_*", () => {
  it("made-up debug_ and trace_ names are unknown, not admitted", () => {
    fc.assert(fc.property(fc.constantFrom("debug_", "trace_", "arbtrace_"), fc.stringMatching(/^[A-Za-z]{1,12}$/), (prefix, rest) => {
      const method = prefix + rest
      for (const family of families) {
        const classification = RpcAllowlist.classify(family, method)
        if (classification._tag === "Tiered") expect(RpcAllowlist.methods(family).has(method)).toBe(true)
      }
    }))
    expect(RpcAllowlist.classify("ethereum", "debug_somethingNew")._tag).toBe("Unknown")
    expect(RpcAllowlist.classify("ethereum", "trace_somethingNew")._tag).toBe("Unknown")
  })
})

describe("RpcAllowlist: subscriptions are WebSocket-only (the proxy is HTTP-only)", () => {
  it.each(
    [
      ["ethereum", "eth_subscribe"],
      ["optimism", "eth_unsubscribe"],
      ["solana", "accountSubscribe"],
      ["solana", "logsUnsubscribe"],
      ["solana", "slotsUpdatesSubscribe"],
      ["starknet", "starknet_subscribeEvents"],
      ["starknet", "starknet_unsubscribe"],
      ["starknet", "starknet_subscriptionNewHeads"]
    ] as const
  )("%s %s", (family, method) => {
    expect(RpcAllowlist.classify(family, method)._tag).toBe("WebSocketOnly")
  })
})
