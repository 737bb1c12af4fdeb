/**
 * The service layers of the reference server, chosen by the configuration: every stateful service
 * on memory (one process) or on Redis (several instances sharing state), the pricing and model
 * tables from the config file, and the backends (local in dev, upstreams when configured). This is
 * the one place that knows which implementation backs which service.
 *
 * @since 0.1.0
 */
import {
  ChannelChain,
  ContractWallets,
  ImageBackend,
  ImageEditor,
  PaymentFacilitator,
  PromptEnhancer,
  RpcUpstream,
  StakeChain
} from "@tollgate/backends"
import * as ChatBackend from "@tollgate/backends/ChatBackend"
import * as EmbeddingBackend from "@tollgate/backends/EmbeddingBackend"
import * as SpeechBackend from "@tollgate/backends/SpeechBackend"
import * as TranscriptionBackend from "@tollgate/backends/TranscriptionBackend"
import * as VideoBackend from "@tollgate/backends/VideoBackend"
import * as WebSearch from "@tollgate/backends/WebSearch"
import {
  AbuseGuard,
  Admission,
  AuditLog,
  Auth,
  AuthStore,
  BatchSettlement,
  CreditLedger,
  Generations,
  IdempotencyStore,
  Jwt,
  Models,
  Money,
  PaymentChannels,
  PendingSettlements,
  PricingEngine,
  RateLimiter,
  RateLimitLog,
  RateLimitPolicy,
  RpcCache,
  Staking,
  TopUpTransactions,
  VideoJobs,
  Webhooks,
  X402
} from "@tollgate/core"
import * as ChatOptions from "@tollgate/core/ChatOptions"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { DocumentExtractor } from "@tollgate/documents"
import { ChannelClaims, HoldSweeper, Metered, PortalSession } from "@tollgate/http"
import * as X402Bodies from "@tollgate/http/payment/PaymentRequiredBodies"
import * as PerCallPayment from "@tollgate/http/payment/PerCallPayment"
import {
  AbuseGuardRedis,
  AdmissionStoreRedis,
  AuthStoreRedis,
  CreditLedgerRedis,
  GenerationsRedis,
  IdempotencyStoreRedis,
  PaymentChannelsRedis,
  PendingSettlementsRedis,
  RateLimiterRedis,
  RateLimitLogRedis,
  RedisConnection,
  RpcCacheRedis,
  TopUpTransactionsRedis,
  VideoJobsRedis,
  WebhookStoreRedis
} from "@tollgate/redis"
import bs58 from "bs58"
import { Duration, Effect, Layer, Redacted, Result, Schema } from "effect"
import { FetchHttpClient } from "effect/http"
import { privateKeyToAccount } from "viem/accounts"
import { ConfigError, decodeStrict, describeIssue, isDevMode, type ServerConfig } from "./Config.ts"
import * as RedisReachable from "./RedisReachable.ts"

/**
 * The dev-mode receiver of x402 payments (anvil's second dev account): payments in dev go nowhere
 * real. Its private key is public, so a production server refuses it; production without
 * `x402.payTo` takes no wallet payments at all.
 */
const DEV_PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

/**
 * Whether something settles Base payments: the local relayer with its RPC URL, or a hosted
 * facilitator. Dev mode receives on `DEV_PAY_TO` only then, so its 402s never offer an entry
 * that every payment of would be refused (`unsupported_network`).
 */
const settlesBase = (section: typeof X402Section.Type): boolean =>
  (section.relayerKey !== undefined && section.evmRpcUrl !== undefined) || section.facilitatorUrl !== undefined

/**
 * Whether something settles Solana payments: the local `x402.solana` settlement or a hosted
 * facilitator. Without either, a Solana receiver and fee payer are not offered: every payment on
 * such an entry would be refused.
 */
const settlesSolana = (section: typeof X402Section.Type): boolean => section.solana !== undefined || section.facilitatorUrl !== undefined

const UsdAmount = Schema.String.check(
  Schema.makeFilter((text: string) => Result.isSuccess(Money.parseUsd(text)) ? true : "must be a decimal amount of USD such as \"0.5\"")
)

/**
 * The `x402.batchSettlement` section: the channels offered (the withdrawal delay asked of them,
 * the shortest accepted, the most served on one channel before it is claimed, the deposit
 * announced) and when claims run (every `claimIntervalSeconds`, and as soon as a channel's
 * unclaimed charge reaches `claimThresholdUsd`), and how long a channel may sit idle before its
 * unclaimed escrow is refunded.
 *
 * @category schemas
 */
export const BatchSettlementSection = Schema.Struct({
  withdrawDelaySeconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: BatchSettlement.CONTRACT_MIN_WITHDRAW_DELAY_SECONDS, maximum: 2_592_000 }))
  ),
  minimumWithdrawDelaySeconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: BatchSettlement.CONTRACT_MIN_WITHDRAW_DELAY_SECONDS, maximum: 2_592_000 }))
  ),
  exposureCapUsd: Schema.optionalKey(UsdAmount),
  minDepositUsd: Schema.optionalKey(UsdAmount),
  claimIntervalSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 86_400 }))),
  claimThresholdUsd: Schema.optionalKey(UsdAmount),
  idleRefundSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 2_592_000 })))
})

/**
 * The `x402` section. Without `payTo`, a production server takes no wallet payments: its 402s
 * offer no `accepts` and the top-up answers 503.
 *
 * @category schemas
 */
export const X402Section = Schema.Struct({
  payTo: Schema.optionalKey(Schema.Struct({ evm: Schema.String, solana: Schema.optionalKey(Schema.String) })),
  solanaFeePayer: Schema.optionalKey(Schema.String),
  /** Relayer private key (hex) that submits EIP-3009 authorizations on Base. */
  relayerKey: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{64}$/u, {
    message: "must be a 32-byte hex private key"
  })) as unknown as Schema.Codec<`0x${string}`, string>),
  /** JSON-RPC URL of Base, for settlement and smart-wallet signatures. */
  evmRpcUrl: Schema.optionalKey(Schema.String),
  /**
   * How long a top-up waits for its settlement's receipt before answering 503 (the client sends the
   * same payment again and collects the transaction); default 120.
   */
  receiptTimeoutSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 600 }))),
  /**
   * The cheapest call a 402 offers to be paid on its own, in USD (a decimal string); default
   * 0.001. Cheaper calls (RPC) are paid from credit: top up, then SIWX.
   */
  minimumPerCallUsd: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^\d+(\.\d{1,9})?$/u, {
    message: "must be a decimal amount of USD such as \"0.001\""
  }))),
  /**
   * Whether calls priced by their outcome (chat, embeddings, speech, transcription) are offered
   * `upto`, settled after the call (docs/wallets.md says what the operator risks); default true.
   * Needs `relayerKey` and `evmRpcUrl`: the local facilitator settles it.
   */
  upto: Schema.optionalKey(Schema.Boolean),
  /**
   * Calls priced below `minimumPerCallUsd` (RPC) offered a voucher on an x402 `batch-settlement`
   * payment channel, claimed in batches (docs/wallets.md, "Batch settlement"); on by default with
   * `relayerKey` and `evmRpcUrl`, `false` turns it off.
   */
  batchSettlement: Schema.optionalKey(Schema.Union([Schema.Literal(false), BatchSettlementSection])),
  /** Factories trusted to deploy EIP-6492 counterfactual wallets before their top-up settles. */
  eip6492AllowedFactories: Schema.optionalKey(Schema.Array(
    Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/u, { message: "must be a 0x address" }))
  )),
  /** URL of a hosted x402 facilitator (Solana or EVM, for networks not settled here). */
  facilitatorUrl: Schema.optionalKey(Schema.String),
  /** Solana top-ups settled by tollgate itself (`@x402/svm`), co-signed by this fee payer. */
  solana: Schema.optionalKey(Schema.Struct({
    rpcUrl: Schema.String.check(Schema.isPattern(/^https?:\/\/.+/u, { message: "must be an http(s) URL" })),
    /** The fee payer's 64-byte key pair: base58, or the JSON array of bytes `solana-keygen` writes. */
    feePayerKey: Schema.Union([
      Schema.String,
      Schema.Array(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 255 })))
    ]),
    /** CAIP-2; default Solana mainnet. */
    network: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^solana:[1-9A-HJ-NP-Za-km-z]+$/u, {
      message: "must be a CAIP-2 Solana network such as solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
    }))),
    /** The USDC mint; default USDC of the network (mainnet's). */
    asset: Schema.optionalKey(Schema.String)
  })),
  /** Staked-token credits: each whole token held (or staked) gives 1 USD of credit per UTC day. */
  staking: Schema.optionalKey(Schema.Struct({
    /** CAIP-2 EVM chain; default Base mainnet. */
    chain: Schema.optionalKey(
      Schema.String.check(Schema.isPattern(/^eip155:\d+$/u, { message: "must be a CAIP-2 EVM chain such as eip155:8453" }))
    ),
    /** The ERC-20 staking token, or a staking contract with the same `balanceOf(address)` view. */
    token: Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/u, { message: "must be a 0x address" })),
    rpcUrl: Schema.String.check(Schema.isPattern(/^https?:\/\/.+/u, { message: "must be an http(s) URL" })),
    /** How long a wallet's stake read stays current (within a UTC day); default 300. */
    refreshSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 86_400 })))
  }))
})

/**
 * The Solana fee payer's 64 key bytes (seed, then public key) from the config's base58 or
 * byte-array form, and its address (base58 of the public key).
 */
const solanaFeePayer = (key: string | ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const bytes = yield* Effect.try({
      try: () => typeof key === "string" ? bs58.decode(key) : Uint8Array.from(key),
      catch: () => new ConfigError({ message: "TOLLGATE_CONFIG.x402.solana.feePayerKey: must be base58 or an array of bytes" })
    })
    if (bytes.length !== 64) {
      return yield* new ConfigError({
        message: "TOLLGATE_CONFIG.x402.solana.feePayerKey: must be a 64-byte key pair (seed and public key)"
      })
    }
    return { bytes, address: bs58.encode(bytes.subarray(32)) }
  })

/**
 * The `batch-settlement` offer and claim schedule of the `x402.batchSettlement` section, with its
 * defaults: channels asked for a one-day withdrawal delay and refused under one hour, 1 USD
 * served per channel before a claim, 0.10 USD announced as the deposit; claims every hour and at
 * 0.50 USD unclaimed on a channel; idle channels refunded after a day.
 */
const batchSettlementOf = (relayerKey: `0x${string}`, section: typeof BatchSettlementSection.Type) =>
  Effect.gen(function*() {
    const units = (usd: string | undefined, fallback: string, field: string) =>
      Effect.fromResult(Money.parseUsd(usd ?? fallback)).pipe(
        Effect.map((nano) => BigInt(Money.toUsdcUnits(nano))),
        Effect.mapError(() => new ConfigError({ message: `TOLLGATE_CONFIG.x402.batchSettlement.${field}: is out of range` }))
      )
    const withdrawDelaySeconds = section.withdrawDelaySeconds ?? 86_400
    const minimumWithdrawDelaySeconds = section.minimumWithdrawDelaySeconds ?? 3_600
    if (withdrawDelaySeconds < minimumWithdrawDelaySeconds) {
      return yield* new ConfigError({
        message:
          "TOLLGATE_CONFIG.x402.batchSettlement.withdrawDelaySeconds: is under minimumWithdrawDelaySeconds, so the channels offered would be refused"
      })
    }
    const offer: BatchSettlement.Offer = {
      receiverAuthorizer: privateKeyToAccount(relayerKey).address,
      withdrawDelaySeconds,
      minimumWithdrawDelaySeconds,
      exposureCap: yield* units(section.exposureCapUsd, "1", "exposureCapUsd"),
      minDeposit: yield* units(section.minDepositUsd, "0.1", "minDepositUsd")
    }
    return {
      offer,
      claims: {
        claimIntervalMs: (section.claimIntervalSeconds ?? 3_600) * 1000,
        claimThreshold: yield* units(section.claimThresholdUsd, "0.5", "claimThresholdUsd"),
        idleRefundMs: (section.idleRefundSeconds ?? 86_400) * 1000
      }
    }
  })

const WebhookSecret = Schema.String.check(
  Schema.makeFilter((text: string) =>
    /^whsec_[A-Za-z0-9+/]+={0,2}$/.test(text) ? true : "must be a Standard Webhooks secret: whsec_ and base64"
  )
)

/**
 * The `webhooks` section: the endpoints events are sent to (each with its `whsec_` secret and,
 * optionally, the event types it takes), the balance under which `balance.below_threshold` fires
 * (USD), the share of a key's cap at which `key.cap_share_reached` fires, and the first retry's
 * delay.
 *
 * @category schemas
 */
export const WebhooksSection = Schema.Struct({
  endpoints: Schema.Array(Schema.Struct({
    url: Schema.String.check(
      Schema.makeFilter((text: string) => /^https?:\/\//.test(text) && URL.canParse(text) ? true : "must be an http(s) URL")
    ),
    secret: WebhookSecret,
    events: Schema.optionalKey(Schema.Array(Schema.Literals(Webhooks.EVENT_TYPES)))
  })),
  balanceBelowUsd: Schema.optionalKey(
    Schema.String.check(
      Schema.makeFilter((text: string) => Result.isSuccess(Money.parseUsd(text)) ? true : "must be a decimal amount of USD")
    )
  ),
  capShare: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(1))),
  retryBaseMs: Schema.optionalKey(Schema.Finite.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(10)))
})

/**
 * The `chat` section: the service's default system prompt, characters callers pick with
 * `character_slug`, and the search provider (a SearXNG instance) behind web search.
 *
 * @category schemas
 */
export const ChatSection = Schema.Struct({
  systemPrompt: Schema.optionalKey(Schema.String),
  characters: Schema.optionalKey(Schema.Record(
    Schema.String.check(
      Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,199}$/u, { message: "must be a slug: lowercase letters, digits and dashes" })
    ),
    Schema.Struct({
      name: Schema.String,
      systemPrompt: Schema.String,
      description: Schema.optionalKey(Schema.String),
      tags: Schema.optionalKey(Schema.Array(Schema.String)),
      modelId: Schema.optionalKey(Schema.String),
      adult: Schema.optionalKey(Schema.Boolean)
    })
  )),
  searxngUrl: Schema.optionalKey(Schema.String),
  scraping: Schema.optionalKey(Schema.Boolean)
})

const sectionError = (section: string) => (error: Schema.SchemaError) =>
  new ConfigError({ message: describeIssue(error.issue, `TOLLGATE_CONFIG.${section}`) })

const decodeSection = <A, I>(schema: Schema.Codec<A, I>, section: string, input: unknown) =>
  decodeStrict(schema, input, `TOLLGATE_CONFIG.${section}`)

/**
 * The first model of the list that has no price, as the field an operator must add: a model
 * without one would be listed and then refused at every request.
 */
const unpricedModel = (models: ReadonlyArray<Models.Model>, tables: PricingEngine.Tables): string | undefined => {
  const priceTables = {
    text: ["chat", tables.chat.models],
    image: ["image", tables.image.models],
    embedding: ["embedding", tables.media.embedding],
    tts: ["speech", tables.media.speech],
    asr: ["transcription", tables.media.transcription],
    video: ["video", tables.media.video]
  } as const
  for (const [index, model] of models.entries()) {
    const [table, prices] = priceTables[model.type]
    if (prices[model.id] === undefined) {
      return `TOLLGATE_CONFIG.prices.${table}.${model.id}: required, models.${index} (${model.type} model ${model.id}) has no price`
    }
  }
  return undefined
}

/**
 * The rules of production (a signing key set) that dev mode relaxes: the models are listed (the
 * dev models answer locally and would charge real money for it), the receiver of wallet payments
 * is the operator's own (never the dev account, whose private key is public), and something settles
 * the payments sent to it (else every 402 would offer entries whose payments are all refused).
 */
const checkProduction = (config: ServerConfig, section: typeof X402Section.Type) => {
  const payTo = section.payTo?.evm
  if (isDevMode(config)) return Effect.void
  if (config.file.models === undefined) {
    return Effect.fail(
      new ConfigError({
        message: "TOLLGATE_CONFIG.models: required when TOLLGATE_SIGNING_KEY is set (the dev models answer locally)"
      })
    )
  }
  if (payTo?.toLowerCase() === DEV_PAY_TO.toLowerCase()) {
    return Effect.fail(
      new ConfigError({
        message: "TOLLGATE_CONFIG.x402.payTo.evm: is anvil's dev account, whose private key is public; set your own address"
      })
    )
  }
  if (section.payTo !== undefined && !settlesBase(section) && section.solana === undefined) {
    return Effect.fail(
      new ConfigError({
        message:
          "TOLLGATE_CONFIG.x402.payTo: nothing settles the payments sent to it; set x402.relayerKey and x402.evmRpcUrl (Base, settled here), x402.solana (Solana, settled here) or x402.facilitatorUrl (a hosted facilitator)"
      })
    )
  }
  return Effect.void
}

const stores = (config: ServerConfig, rpcCache: RpcCache.Config | undefined) =>
  config.store === "redis"
    ? Layer.mergeAll(
      RpcCacheRedis.layerRedis(rpcCache),
      AuthStoreRedis.layerRedis,
      AbuseGuardRedis.layerRedis,
      RateLimiterRedis.layerRedis({ timeoutMs: 2000 }).pipe(Layer.provideMerge(RateLimitLogRedis.layerRedis())),
      CreditLedgerRedis.layerRedis({ retentionMs: config.retention.retentionMs, replicaAcknowledgment: config.redisReplicaAcknowledgment }),
      IdempotencyStoreRedis.layerRedis,
      AdmissionStoreRedis.layerRedis({
        timeoutMs: 2000,
        retentionMs: config.retention.retentionMs,
        admissionGroupMs: config.admissionGroupMs,
        settlementGroupMs: config.settlementGroupMs
      }),
      VideoJobsRedis.layerRedis,
      GenerationsRedis.layerRedis,
      WebhookStoreRedis.layerRedis,
      TopUpTransactionsRedis.layerRedis,
      PaymentChannelsRedis.layerRedis,
      PendingSettlementsRedis.layerRedis({ replicaAcknowledgment: config.redisReplicaAcknowledgment })
    ).pipe(Layer.provide(Layer.unwrap(Effect.as(
      RedisReachable.check(config),
      RedisConnection.layer(
        config.redisCluster === undefined
          ? { url: config.redisUrl, functions: config.redisFunctions ?? true }
          : { cluster: config.redisCluster, functions: config.redisFunctions ?? true }
      )
    ))))
    : Admission.layerMemory.pipe(Layer.provideMerge(Layer.mergeAll(
      AuthStore.layerMemory,
      AbuseGuard.layerMemory,
      RateLimiter.layerMemory().pipe(Layer.provideMerge(RateLimitLog.layerMemory())),
      CreditLedger.layerMemoryWith(config.retention),
      IdempotencyStore.layerMemory
    ))).pipe(Layer.merge(Layer.mergeAll(
      VideoJobs.layerMemory,
      Generations.layerMemory,
      PendingSettlements.layerMemory,
      PaymentChannels.layerMemory,
      Webhooks.layerStoreMemory,
      TopUpTransactions.layerMemory,
      RpcCache.layerMemory(rpcCache)
    )))

/**
 * The stores with the webhooks over them: with an endpoint configured, the admission store and
 * the ledger are watched for the events they cross (`Webhooks.layerObserve`).
 */
const storesWithWebhooks = (config: ServerConfig, options: Webhooks.Options, rpcCache: RpcCache.Config | undefined) => {
  const withWebhooks = Layer.provideMerge(Webhooks.layer(options), stores(config, rpcCache))
  return options.endpoints.length === 0 ? withWebhooks : Layer.provideMerge(Webhooks.layerObserve, withWebhooks)
}

/**
 * The signing key of API keys: the configured one, or a fresh one in dev mode (keys minted by a
 * dev server die with it).
 *
 * @category constructors
 */
export const signingKey = (config: ServerConfig) =>
  config.signingKey === undefined
    ? Jwt.generateSigningKey
    : Jwt.importSigningKey(config.signingKey).pipe(
      Effect.mapError(() => new ConfigError({ message: "TOLLGATE_SIGNING_KEY: must be an Ed25519 private key (PKCS#8 PEM or JWK)" }))
    )

/**
 * The keys of earlier signing keys that still verify the API keys they signed
 * (`TOLLGATE_PREVIOUS_SIGNING_KEYS`); none when it is not set.
 *
 * @category constructors
 */
export const previousSigningKeys = (config: Pick<ServerConfig, "previousSigningKeys">) =>
  config.previousSigningKeys === undefined
    ? Effect.succeed<ReadonlyArray<Jwt.VerifyingKey>>([])
    : Jwt.importVerifyingKeys(config.previousSigningKeys).pipe(
      Effect.mapError((error) => new ConfigError({ message: `TOLLGATE_PREVIOUS_SIGNING_KEYS: ${error.message}` }))
    )

/**
 * The audit log's entry of the signing keys a server starts with: the one that signs, and those
 * that still verify. A store that cannot take it is logged, and does not stop the start.
 */
const signingKeysInUse = Layer.effectDiscard(Effect.gen(function*() {
  const [signing, ...verifying] = (yield* Auth.Auth).signingKeyIds
  yield* AuditLog.record({ actor: "server", action: "signing_keys.in_use", details: { signing, verifying } }).pipe(
    Effect.catch((error) => Effect.logWarning("the audit log did not take the signing keys in use", error.message))
  )
}))

/**
 * Every service the routes need, for a configuration.
 *
 * @category layers
 */
export const layer = (config: ServerConfig) =>
  Layer.unwrap(Effect.gen(function*() {
    const key = yield* signingKey(config)
    const previousKeys = yield* previousSigningKeys(config)
    const section = config.file.x402 === undefined ? {} : yield* decodeSection(X402Section, "x402", config.file.x402)
    yield* checkProduction(config, section)
    const x402 = section.payTo === undefined && isDevMode(config) && settlesBase(section)
      ? { ...section, payTo: { evm: DEV_PAY_TO } }
      : section
    const chat = config.file.chat === undefined ? {} : yield* decodeSection(ChatSection, "chat", config.file.chat)
    const webhooks = config.file.webhooks === undefined
      ? { endpoints: [] }
      : yield* decodeSection(WebhooksSection, "webhooks", config.file.webhooks)
    const webhookOptions: Webhooks.Options = {
      ...webhooks,
      balanceBelow: webhooks.balanceBelowUsd === undefined ? undefined : Result.getOrThrow(Money.parseUsd(webhooks.balanceBelowUsd))
    }
    const rateLimits = config.file.rateLimits === undefined
      ? {}
      : yield* decodeSection(RateLimitPolicy.ConfigSchema, "rateLimits", config.file.rateLimits)
    const evmRpcUrl = x402.evmRpcUrl
    const modelList = config.file.models === undefined
      ? Models.defaults
      : yield* Models.decodeConfig(config.file.models).pipe(Effect.mapError(sectionError("models")))
    const tables = yield* PricingEngine.decodeConfig(config.file.prices).pipe(Effect.mapError(sectionError("prices")))
    const unpriced = unpricedModel(modelList, tables)
    if (unpriced !== undefined) return yield* new ConfigError({ message: unpriced })
    const models = Models.layer(modelList)
    const prices = Layer.succeed(PricingEngine.PricingEngine, tables)
    const rpcSection = yield* decodeSection(RpcUpstream.Config, "rpc", config.file.rpc ?? { upstreams: {} })
    const rpc = RpcUpstream.layer(rpcSection).pipe(
      Layer.catchTag("RpcChainMismatch", (mismatch) =>
        Layer.effect(
          RpcUpstream.RpcUpstream,
          Effect.fail(new ConfigError({ message: `TOLLGATE_CONFIG.rpc.upstreams.${mismatch.network}: ${mismatch.message}` }))
        ))
    )
    const auth = Auth.layer({
      signingKey: key,
      previousKeys,
      publicOrigin: config.publicOrigin,
      ...(evmRpcUrl === undefined ? {} : { evmVerifier: ContractWallets.verifier(evmRpcUrl) })
    })
    const solana = x402.solana
    const feePayer = solana === undefined ? undefined : yield* solanaFeePayer(solana.feePayerKey)
    if (solana !== undefined && x402.payTo?.solana === undefined) {
      return yield* new ConfigError({ message: "TOLLGATE_CONFIG.x402.payTo.solana: required when x402.solana is set" })
    }
    const solanaNetwork = solana?.network ?? X402.SOLANA_MAINNET
    const solanaFeePayerAddress = feePayer?.address ?? x402.solanaFeePayer
    const minimumPerCall = x402.minimumPerCallUsd === undefined ?
      undefined :
      yield* Effect.fromResult(Money.parseUsd(x402.minimumPerCallUsd)).pipe(
        Effect.mapError(() => new ConfigError({ message: "TOLLGATE_CONFIG.x402.minimumPerCallUsd: is out of range" }))
      )
    // `upto` is settled only by the local EVM backend, whose relayer the payer's permit names.
    const upto = x402.relayerKey !== undefined && evmRpcUrl !== undefined && x402.upto !== false
      ? { extra: yield* PaymentFacilitator.uptoExtra(Redacted.make(x402.relayerKey), X402.BASE_MAINNET) }
      : undefined
    // `batch-settlement` too: the relayer submits the deposits and claims, and is the channels'
    // receiver authorizer.
    const batch = x402.relayerKey !== undefined && evmRpcUrl !== undefined && x402.batchSettlement !== false && settlesBase(x402)
      ? yield* batchSettlementOf(x402.relayerKey, x402.batchSettlement ?? {})
      : undefined
    const x402Config = X402.layer(X402.makeConfig({
      publicOrigin: config.publicOrigin,
      // A network is offered only where something settles it.
      payTo: x402.payTo === undefined ? undefined : {
        evm: settlesBase(x402) ? x402.payTo.evm : undefined,
        solana: settlesSolana(x402) ? x402.payTo.solana : undefined
      },
      ...(upto === undefined && batch === undefined ? {} : {
        evm: { ...(upto === undefined ? {} : { upto }), ...(batch === undefined ? {} : { batchSettlement: batch.offer }) }
      }),
      ...(solanaFeePayerAddress === undefined ? {} : { solanaFeePayer: solanaFeePayerAddress }),
      ...(minimumPerCall === undefined ? {} : { minimumPerCall }),
      ...(solana === undefined
        ? {}
        : { solana: { network: solanaNetwork, ...(solana.asset === undefined ? {} : { asset: solana.asset }) } })
    }))
    // Pending settlements (EVM and Solana) live in the stores: on Redis, a retried top-up that
    // reaches another instance or worker collects the transaction the first one sent.
    const facilitator = Layer.unwrap(Effect.gen(function*() {
      const pendingSettlements = yield* PendingSettlements.PendingSettlements
      return PaymentFacilitator.layer({
        ...(x402.relayerKey !== undefined && evmRpcUrl !== undefined
          ? {
            local: {
              chains: { [X402.BASE_MAINNET]: { rpcUrl: evmRpcUrl } },
              relayerKey: Redacted.make(x402.relayerKey),
              eip6492AllowedFactories: (x402.eip6492AllowedFactories ?? []) as ReadonlyArray<`0x${string}`>,
              ...(x402.receiptTimeoutSeconds === undefined ? {} : { receiptTimeout: Duration.seconds(x402.receiptTimeoutSeconds) }),
              pendingSettlements
            }
          }
          : {}),
        ...(solana === undefined || feePayer === undefined
          ? {}
          : {
            svm: {
              networks: { [solanaNetwork]: { rpcUrl: solana.rpcUrl } },
              feePayerKey: Redacted.make(feePayer.bytes),
              pendingSettlements
            }
          }),
        ...(x402.facilitatorUrl === undefined ? {} : { http: { url: x402.facilitatorUrl } })
      })
    })).pipe(
      Layer.catchTag("ServiceUnavailable", () =>
        Layer.effect(
          PaymentFacilitator.PaymentFacilitator,
          Effect.fail(new ConfigError({ message: "TOLLGATE_CONFIG.x402.solana.feePayerKey: the public half does not match the seed" }))
        ))
    )
    // The chain side of the channels, and the claim rounds over it.
    const channelChain = batch === undefined || x402.relayerKey === undefined || evmRpcUrl === undefined || x402.payTo === undefined
      ? Layer.empty
      : ChannelClaims.layer({ ...batch.claims, payTo: x402.payTo.evm, token: X402.BASE_USDC }).pipe(Layer.provideMerge(ChannelChain.layer({
        network: X402.BASE_MAINNET,
        rpcUrl: evmRpcUrl,
        relayerKey: Redacted.make(x402.relayerKey),
        ...(x402.receiptTimeoutSeconds === undefined ? {} : { receiptTimeout: Duration.seconds(x402.receiptTimeoutSeconds) })
      })))
    const base = Layer.mergeAll(
      prices,
      channelChain,
      RateLimitPolicy.layerOverridesMemory(rateLimits),
      models,
      rpc,
      x402Config,
      facilitator,
      ImageBackend.layerLocal,
      PromptEnhancer.layerLocal,
      ChatBackend.layer(),
      Layer.mergeAll(
        ImageEditor.layer(),
        EmbeddingBackend.layer(),
        SpeechBackend.layer(),
        TranscriptionBackend.layer(),
        VideoBackend.layer()
      ).pipe(Layer.provide(FetchHttpClient.layer)),
      ChatOptions.layerPrompts({ systemPrompt: chat.systemPrompt, characters: chat.characters }),
      SearchProvider.layer({
        ...(chat.searxngUrl === undefined ? {} : { web: WebSearch.searxng(chat.searxngUrl) }),
        ...(chat.scraping === true ? { scrape: WebSearch.scraper() } : {})
      }),
      DocumentExtractor.layer(),
      PortalSession.layerFromSigningKey(key)
    ).pipe(Layer.provideMerge(storesWithWebhooks(config, webhookOptions, rpcSection.cache)))
    const staking = x402.staking
    const withAuth = Layer.provideMerge(auth, base)
    const withStaking = staking === undefined ? withAuth : Layer.provideMerge(
      Staking.layer({
        read: StakeChain.reader({ network: staking.chain ?? X402.BASE_MAINNET, contract: staking.token, rpcUrl: staking.rpcUrl }),
        refreshMs: (staking.refreshSeconds ?? Staking.DEFAULT_REFRESH_MS / 1000) * 1000
      }),
      withAuth
    )
    const policies = Layer.mergeAll(Metered.layerLimits, X402Bodies.layer, PerCallPayment.layer).pipe(
      Layer.provideMerge(withStaking)
    )
    return Layer.mergeAll(Metered.layer({ holdTtlMs: config.holdTtlMs }), HoldSweeper.layer(), Webhooks.layerSender, signingKeysInUse).pipe(
      Layer.provideMerge(policies)
    )
  }))
