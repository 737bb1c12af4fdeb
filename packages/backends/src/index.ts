/**
 * @tollgate/backends: the adapters tollgate calls upstream (RPC nodes, chat and image models,
 * payment facilitators).
 *
 * @since 0.1.0
 */
export * as ChannelChain from "./ChannelChain.ts"
export * as ChatBackend from "./ChatBackend.ts"
export * as ContractWallets from "./ContractWallets.ts"
export * as EmbeddingBackend from "./EmbeddingBackend.ts"
export * as ImageBackend from "./ImageBackend.ts"
export * as ImageEditor from "./ImageEditor.ts"
export * as OpenAiCompatible from "./OpenAiCompatible.ts"
export * as PaymentFacilitator from "./payment/PaymentFacilitator.ts"
export * as PromptEnhancer from "./PromptEnhancer.ts"
export * as RpcHealth from "./RpcHealth.ts"
export * as RpcHedge from "./RpcHedge.ts"
export * as RpcMetrics from "./RpcMetrics.ts"
export * as RpcReads from "./RpcReads.ts"
export * as RpcUpstream from "./RpcUpstream.ts"
export * as SpeechBackend from "./SpeechBackend.ts"
export * as StakeChain from "./StakeChain.ts"
export * as TranscriptionBackend from "./TranscriptionBackend.ts"
export * as VideoBackend from "./VideoBackend.ts"
export * as Wav from "./Wav.ts"
export * as WebSearch from "./WebSearch.ts"
