/**
 * Which JSON-RPC methods the proxy forwards, per chain family, and at which price tier. Every
 * method name is exactly one of: a tiered method (Standard 1x, Advanced 2x, Large 4x), an
 * unsupported method (stateful filters, key-holding, miner and node-control calls, cheat-code
 * namespaces), a WebSocket-only method (subscriptions: the proxy speaks HTTP only), or unknown.
 * Only the tier tables admit a method, and they are explicit lists: no prefix admits `debug_*` or
 * `trace_*` as a whole, because those namespaces also hold calls that control the node.
 *
 * @since 0.1.0
 */
import type { RpcFamily } from "./Networks.ts"

/**
 * Standard, Advanced and Large, as in the spec's credit table; `PricingEngine` holds their
 * multipliers (1, 2, 4).
 *
 * @category models
 */
export type Tier = "S" | "A" | "L"

/**
 * Where a method stands for one family.
 *
 * @category models
 */
export type Classification =
  | { readonly _tag: "Tiered"; readonly tier: Tier }
  | { readonly _tag: "Unsupported" }
  | { readonly _tag: "WebSocketOnly" }
  | { readonly _tag: "Unknown" }

const words = (text: string): ReadonlyArray<string> => text.split(/\s+/).filter((word) => word !== "")

const table = (tiers: { readonly [T in Tier]?: string }): ReadonlyMap<string, Tier> => {
  const entries: Array<[string, Tier]> = []
  for (const tier of ["S", "A", "L"] as const) {
    for (const method of words(tiers[tier] ?? "")) entries.push([method, tier])
  }
  return new Map(entries)
}

const evmStandard = `
  eth_getBlockByHash eth_getBlockByNumber eth_getBlockTransactionCountByHash
  eth_getBlockTransactionCountByNumber eth_getBlockReceipts eth_getBlockAccessList
  eth_chainId eth_syncing eth_blockNumber eth_config net_version eth_capabilities
  eth_call eth_estimateGas eth_createAccessList eth_simulateV1 eth_fillTransaction
  eth_gasPrice eth_baseFee eth_blobBaseFee eth_maxPriorityFeePerGas eth_feeHistory
  eth_getBalance eth_getStorageAt eth_getStorageValues eth_getTransactionCount eth_getCode eth_getProof
  eth_getTransactionByHash eth_getTransactionByBlockHashAndIndex eth_getTransactionByBlockNumberAndIndex
  eth_getTransactionReceipt eth_getLogs eth_sendRawTransaction eth_sendRawTransactionSync
  web3_clientVersion web3_sha3 net_listening net_peerCount eth_protocolVersion
  eth_getUncleByBlockHashAndIndex eth_getUncleByBlockNumberAndIndex eth_getUncleCountByBlockHash
  eth_getUncleCountByBlockNumber eth_getAccount
  eth_sendUserOperation eth_estimateUserOperationGas eth_getUserOperationByHash
  eth_getUserOperationReceipt eth_supportedEntryPoints`

const evmDebug = `
  debug_traceTransaction debug_traceBlockByNumber debug_traceBlockByHash debug_traceCall debug_traceBlock
  debug_getRawHeader debug_getRawBlock debug_getRawTransaction debug_getRawReceipts debug_getBadBlocks
  debug_getRawBlockAccessList debug_storageRangeAt debug_getModifiedAccountsByNumber
  debug_getModifiedAccountsByHash debug_accountRange debug_dumpBlock debug_getAccessibleState
  debug_intermediateRoots debug_getTrieFlushInterval`

const evmTraceAdvanced = `
  trace_block trace_call trace_callMany trace_filter trace_get trace_rawTransaction trace_transaction
  txpool_status txpool_inspect txpool_contentFrom`

const evmLarge = "trace_replayTransaction trace_replayBlockTransactions txpool_content"

const evm = (extra: { readonly [T in Tier]?: string } = {}) =>
  table({
    S: `${evmStandard} ${extra.S ?? ""}`,
    A: `${evmDebug} ${evmTraceAdvanced} ${extra.A ?? ""}`,
    L: `${evmLarge} ${extra.L ?? ""}`
  })

const zksync = table({
  S: `${evmStandard}
    zks_estimateFee zks_estimateGasL1ToL2 zks_getBridgehubContract zks_getMainContract
    zks_getTestnetPaymaster zks_getBridgeContracts zks_getBaseTokenL1Address zks_L1ChainId
    zks_getL2ToL1MsgProof zks_getL2ToL1LogProof zks_L1BatchNumber zks_getL1BatchBlockRange
    zks_getBlockDetails zks_getTransactionDetails zks_getRawBlockTransactions zks_getL1BatchDetails
    zks_getBytecodeByHash zks_getL1GasPrice zks_getFeeParams zks_getProtocolVersion zks_getProof
    zks_getBatchFeeInput zks_sendRawTransactionWithDetailedOutput zks_getConfirmedTokens
    zks_getAllAccountBalances zks_gasPerPubdata zks_getTimestampAsserter zks_getL2Multicall3`,
  // zkSync Era has debug tracing but no trace_* namespace and no txpool.
  A: evmDebug
})

const solana = table({
  S: `getAccountInfo getBalance getBlock getBlockCommitment getBlockHeight getBlockProduction
    getBlockTime getBlocks getBlocksWithLimit getClusterNodes getEpochInfo getEpochSchedule
    getFeeForMessage getFirstAvailableBlock getGenesisHash getHealth getHighestSnapshotSlot
    getIdentity getInflationGovernor getInflationRate getInflationReward getLatestBlockhash
    getLeaderSchedule getMaxRetransmitSlot getMaxShredInsertSlot getMinimumBalanceForRentExemption
    getMultipleAccounts getProgramAccounts getRecentPerformanceSamples getRecentPrioritizationFees
    getSignatureStatuses getSignaturesForAddress getSlot getSlotLeader getSlotLeaders
    getStakeMinimumDelegation getTokenAccountBalance getTokenAccountsByDelegate
    getTokenAccountsByOwner getTokenLargestAccounts getTokenSupply getTransaction
    getTransactionCount getVersion getVoteAccounts isBlockhashValid minimumLedgerSlot
    requestAirdrop sendTransaction simulateTransaction`,
  L: "getLargestAccounts getSupply"
})

// The spec prices every starknet_* call as Standard, the trace calls included.
const starknet = table({
  S: `starknet_specVersion starknet_getBlockWithTxHashes starknet_getBlockWithTxs
    starknet_getBlockWithReceipts starknet_getStateUpdate starknet_getStorageAt
    starknet_getTransactionStatus starknet_getTransactionByHash starknet_getTransactionByBlockIdAndIndex
    starknet_getTransactionReceipt starknet_getClass starknet_getClassHashAt starknet_getClassAt
    starknet_getBlockTransactionCount starknet_call starknet_estimateFee starknet_estimateMessageFee
    starknet_blockNumber starknet_blockHashAndNumber starknet_chainId starknet_syncing starknet_getEvents
    starknet_getNonce starknet_getMessagesStatus starknet_getStorageProof starknet_getCompiledCasm
    starknet_addInvokeTransaction starknet_addDeclareTransaction starknet_addDeployAccountTransaction
    starknet_traceTransaction starknet_simulateTransactions starknet_traceBlockTransactions`
})

const tables: { readonly [F in RpcFamily]: ReadonlyMap<string, Tier> } = {
  ethereum: evm(),
  arbitrum: evm({
    A: "arbtrace_block arbtrace_call arbtrace_callMany arbtrace_filter arbtrace_get arbtrace_transaction",
    L: "arbtrace_replayTransaction arbtrace_replayBlockTransactions"
  }),
  optimism: evm({ S: "optimism_outputAtBlock optimism_syncStatus optimism_rollupConfig optimism_version" }),
  polygon: evm({
    S: `bor_getAuthor bor_getCurrentProposer bor_getCurrentValidators bor_getRootHash bor_getSignersAtHash
      bor_getSnapshot bor_getSnapshotAtHash bor_getSigners eth_getTransactionReceiptsByBlock eth_getBorBlockReceipt`
  }),
  linea: evm({ S: "linea_estimateGas linea_getProof linea_getTransactionExclusionStatusV1" }),
  avalanche: evm({
    S: "eth_getChainConfig eth_suggestPriceOptions eth_feeConfig eth_getActiveRulesAt eth_getAssetBalance"
  }),
  bsc: evm({
    S: "eth_getFinalizedHeader eth_getFinalizedBlock eth_getBlobSidecars eth_getBlobSidecarByTxHash"
  }),
  zksync,
  solana,
  starknet
}

const evmUnsupported = new Set(words(`
  eth_newFilter eth_newBlockFilter eth_newPendingTransactionFilter eth_getFilterChanges eth_getFilterLogs
  eth_uninstallFilter eth_sign eth_accounts eth_mining eth_hashrate eth_getWork eth_submitWork
  eth_sendTransaction eth_signTransaction eth_signTypedData eth_signTypedData_v4 eth_coinbase eth_submitHashrate
  debug_setHead debug_setGCPercent debug_freeOSMemory debug_startCPUProfile debug_stopCPUProfile
  debug_cpuProfile debug_writeMemProfile debug_writeBlockProfile debug_writeMutexProfile debug_blockProfile
  debug_mutexProfile debug_goTrace debug_startGoTrace debug_stopGoTrace debug_verbosity debug_vmodule
  debug_backtraceAt debug_chaindbCompact debug_chaindbProperty debug_setTrieFlushInterval debug_setBlockProfileRate
  debug_setMutexProfileFraction debug_stacks debug_memStats debug_gcStats debug_dbGet debug_dbAncient
  debug_dbAncients debug_printBlock debug_seedHash debug_freezeClient debug_setMinerExtra
  en_syncL2Block en_consensusGenesis en_genesisConfig en_whitelistedTokensForAA`))

const evmUnsupportedPrefixes = [
  "personal_",
  "admin_",
  "miner_",
  "engine_",
  "clique_",
  "testing_",
  "anvil_",
  "evm_",
  "hardhat_",
  "ganache_",
  "debug_bundler_",
  "unstable_",
  "snapshots_",
  "en_"
]

const solanaUnsupported = new Set(words(`
  getConfirmedBlock getConfirmedBlocks getConfirmedBlocksWithLimit getConfirmedSignaturesForAddress2
  getConfirmedTransaction getRecentBlockhash getFees getFeeCalculatorForBlockhash getFeeRateGovernor
  getSnapshotSlot getStakeActivation`))

const isEvm = (family: RpcFamily) => family !== "solana" && family !== "starknet"

const isWebSocketOnly = (family: RpcFamily, method: string): boolean => {
  switch (family) {
    case "solana":
      return /^[a-z][A-Za-z]*(Subscribe|Unsubscribe)$/.test(method)
    case "starknet":
      return method.startsWith("starknet_subscribe") || method === "starknet_unsubscribe" ||
        method.startsWith("starknet_subscription")
    default:
      return method === "eth_subscribe" || method === "eth_unsubscribe" || method === "eth_subscription"
  }
}

const isUnsupported = (family: RpcFamily, method: string): boolean => {
  if (family === "solana") return solanaUnsupported.has(method)
  if (!isEvm(family)) return false
  return evmUnsupported.has(method) || evmUnsupportedPrefixes.some((prefix) => method.startsWith(prefix))
}

/** A family's methods that no refusal covers, each with its classification. */
const admittedOf = (family: RpcFamily): ReadonlyMap<string, Classification> => {
  const admitted = new Map<string, Classification>()
  for (const [method, tier] of tables[family]) {
    if (!isWebSocketOnly(family, method) && !isUnsupported(family, method)) admitted.set(method, { _tag: "Tiered", tier })
  }
  return admitted
}

// Every paid RPC call classifies its methods: the admitted ones are decided once, here, instead of
// scanning the refusal lists and prefixes on each call. A table's method that a refusal covers is
// left out, so it is refused.
const admitted = {} as Record<RpcFamily, ReadonlyMap<string, Classification>>
for (const family of Object.keys(tables) as ReadonlyArray<RpcFamily>) admitted[family] = admittedOf(family)

/**
 * Where `method` stands on a family. WebSocket-only and unsupported are decided before the tier
 * table, so no entry of a table can override a refusal.
 *
 * @category lookups
 */
export const classify = (family: RpcFamily, method: string): Classification => {
  const found = admitted[family].get(method)
  if (found !== undefined) return found
  if (isWebSocketOnly(family, method)) return { _tag: "WebSocketOnly" }
  if (isUnsupported(family, method)) return { _tag: "Unsupported" }
  return { _tag: "Unknown" }
}

/**
 * The methods a family admits, with their tier.
 *
 * @category lookups
 */
export const methods = (family: RpcFamily): ReadonlyMap<string, Tier> => tables[family]

/**
 * Why a method is refused, as the 400 message says it.
 *
 * @category formatting
 */
export const refusal = (classification: Classification): string | undefined => {
  switch (classification._tag) {
    case "Tiered":
      return undefined
    case "Unsupported":
      return "unsupported"
    case "WebSocketOnly":
      return "WebSocket-only"
    case "Unknown":
      return "unknown"
  }
}
