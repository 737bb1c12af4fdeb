/**
 * The service layers of the reference server, chosen by the configuration: every stateful service
 * on memory (one process) or on Redis (several instances sharing state), the pricing and model
 * tables from the config file, and the backends (local in dev, upstreams when configured). This is
 * the one place that knows which implementation backs which service.
 *
 * @since 0.1.0
 */
import { NodeRedis } from "@effect/platform-node"
import { ImageBackend, PaymentFacilitator, PromptEnhancer, RpcUpstream } from "@tollgate/backends"
import * as ChatBackend from "@tollgate/backends/ChatBackend"
import * as WebSearch from "@tollgate/backends/WebSearch"
import { AbuseGuard, Auth, AuthStore, CreditLedger, IdempotencyStore, Jwt, Models, PricingEngine, RateLimiter, RateLimitLog, RateLimits, X402 } from "@tollgate/core"
import * as ChatOptions from "@tollgate/core/ChatOptions"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { DocumentExtractor } from "@tollgate/documents"
import { Metered } from "@tollgate/http"
import * as X402Route from "@tollgate/http/routes/X402"
import { AbuseGuardRedis, AuthStoreRedis, CreditLedgerRedis, IdempotencyStoreRedis, RateLimiterRedis, RateLimitLogRedis } from "@tollgate/redis"
import { Effect, Layer, Redacted, Schema } from "effect"
import { FetchHttpClient } from "effect/http"
import { ConfigError, describeIssue, type ServerConfig } from "./Config.ts"

/**
 * A dev-mode receiver of x402 payments (anvil's second dev account): payments in dev go nowhere
 * real. Production sets `x402.payTo` in the config file.
 */
const DEV_PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

/** @category schemas */
export const X402Section = Schema.Struct({
  payTo: Schema.Struct({ evm: Schema.String, solana: Schema.optionalKey(Schema.String) }),
  solanaFeePayer: Schema.optionalKey(Schema.String),
  /** Relayer private key (hex) that submits EIP-3009 authorizations on Base. */
  relayerKey: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{64}$/u, {
    message: "must be a 32-byte hex private key"
  })) as unknown as Schema.Codec<`0x${string}`, string>),
  /** JSON-RPC URL of Base, for settlement and smart-wallet signatures. */
  evmRpcUrl: Schema.optionalKey(Schema.String),
  /** URL of a hosted x402 facilitator (Solana, or EVM when no relayer is configured). */
  facilitatorUrl: Schema.optionalKey(Schema.String)
})

/**
 * The `chat` section: the service's default system prompt, characters callers pick with
 * `character_slug`, and the search provider (a SearXNG instance) behind web search.
 *
 * @category schemas
 */
export const ChatSection = Schema.Struct({
  systemPrompt: Schema.optionalKey(Schema.String),
  characters: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ name: Schema.String, systemPrompt: Schema.String }))),
  searxngUrl: Schema.optionalKey(Schema.String),
  scraping: Schema.optionalKey(Schema.Boolean)
})

const sectionError = (section: string) => (error: Schema.SchemaError) =>
  new ConfigError({ message: describeIssue(error.issue, `TOLLGATE_CONFIG.${section}`) })

const decodeSection = <A, I>(schema: Schema.Codec<A, I>, section: string, input: unknown) =>
  Schema.decodeUnknownEffect(schema)(input).pipe(Effect.mapError(sectionError(section)))

const stores = (config: ServerConfig) =>
  config.store === "redis"
    ? Layer.mergeAll(
      AuthStoreRedis.layerRedis,
      AbuseGuardRedis.layerRedis,
      RateLimiterRedis.layerRedis({ timeoutMs: 2000 }).pipe(Layer.provideMerge(RateLimitLogRedis.layerRedis())),
      CreditLedgerRedis.layerRedis(),
      IdempotencyStoreRedis.layerRedis
    ).pipe(Layer.provide(NodeRedis.layer({ url: config.redisUrl, disableOfflineQueue: true })))
    : Layer.mergeAll(
      AuthStore.layerMemory,
      AbuseGuard.layerMemory,
      RateLimiter.layerMemory().pipe(Layer.provideMerge(RateLimitLog.layerMemory())),
      CreditLedger.layerMemory,
      IdempotencyStore.layerMemory
    )

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
 * Every service the routes need, for a configuration.
 *
 * @category layers
 */
export const layer = (config: ServerConfig) =>
  Layer.unwrap(Effect.gen(function*() {
    const key = yield* signingKey(config)
    const x402 = config.file.x402 === undefined
      ? { payTo: { evm: DEV_PAY_TO } }
      : yield* decodeSection(X402Section, "x402", config.file.x402)
    const chat = config.file.chat === undefined ? {} : yield* decodeSection(ChatSection, "chat", config.file.chat)
    const rateLimits = config.file.rateLimits === undefined
      ? {}
      : yield* decodeSection(RateLimits.ConfigSchema, "rateLimits", config.file.rateLimits)
    const evmRpcUrl = x402.evmRpcUrl
    const models = Models.layerConfig(config.file.models).pipe(
      Layer.catchTag("SchemaError", (error) => Layer.effect(Models.ModelList, Effect.fail(sectionError("models")(error))))
    )
    const prices = PricingEngine.layerConfig(config.file.prices).pipe(
      Layer.catchTag("SchemaError", (error) => Layer.effect(PricingEngine.PricingEngine, Effect.fail(sectionError("prices")(error))))
    )
    const rpc = RpcUpstream.layerFromUnknown(config.file.rpc ?? { upstreams: {} }).pipe(
      Layer.catchTag("SchemaError", (error) => Layer.effect(RpcUpstream.RpcUpstream, Effect.fail(sectionError("rpc")(error))))
    )
    const auth = Auth.layer({
      signingKey: key,
      publicOrigin: config.publicOrigin,
      ...(evmRpcUrl === undefined ? {} : { evmRpcUrl })
    })
    const x402Config = X402.layer(X402.makeConfig({
      publicOrigin: config.publicOrigin,
      payTo: x402.payTo,
      ...(x402.solanaFeePayer === undefined ? {} : { solanaFeePayer: x402.solanaFeePayer })
    }))
    const facilitator = PaymentFacilitator.layer({
      ...(x402.relayerKey !== undefined && evmRpcUrl !== undefined
        ? { local: { chains: { [X402.BASE_MAINNET]: { rpcUrl: evmRpcUrl } }, relayerKey: Redacted.make(x402.relayerKey) } }
        : {}),
      ...(x402.facilitatorUrl === undefined ? {} : { http: { url: x402.facilitatorUrl } })
    })
    const base = Layer.mergeAll(
      stores(config),
      prices,
      RateLimits.layerOverridesMemory(rateLimits),
      models,
      rpc,
      x402Config,
      facilitator,
      ImageBackend.layerLocal,
      PromptEnhancer.layerLocal,
      ChatBackend.layer().pipe(Layer.provide(FetchHttpClient.layer)),
      ChatOptions.layerPrompts({ systemPrompt: chat.systemPrompt, characters: chat.characters }),
      SearchProvider.layer({
        ...(chat.searxngUrl === undefined ? {} : { web: WebSearch.searxng(chat.searxngUrl) }),
        ...(chat.scraping === true ? { scrape: WebSearch.scraper() } : {})
      }),
      DocumentExtractor.layer()
    )
    const withAuth = Layer.provideMerge(auth, base)
    const policies = Layer.mergeAll(Metered.layerLimits, X402Route.layerPaymentRequiredBodies).pipe(
      Layer.provideMerge(withAuth)
    )
    return Metered.layer().pipe(Layer.provideMerge(policies))
  }))
