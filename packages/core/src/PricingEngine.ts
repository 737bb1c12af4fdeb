/**
 * Prices. Pure functions over price tables: the same input always gives the same price, and every
 * price carries the version of the tables it came from, so a credit hold pins the price it was
 * quoted at even if the tables change while the request runs. The tables come from config; the
 * defaults are the spec's values (text parser $0.01 flat, RPC credits at 6.25e-7 USD each) plus
 * image, chat, embedding, speech, transcription and video prices and the flat prices of image
 * upscaling, background removal, web search and scraping, which an operator is expected to
 * override.
 *
 * Amounts are integer nano-USD. Token prices are per million tokens and round up to the nano, so
 * a price is never below its exact value.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Result, Schema } from "effect"
import * as Money from "./Money.ts"
import * as Networks from "./Networks.ts"

/**
 * A price: what is held at admission (the worst case for the request) and what the usage entry
 * says per unit.
 *
 * @category models
 */
export interface Quote {
  readonly amount: Money.Nano
  /** The version of the price tables this quote came from. */
  readonly version: string
  readonly sku: string
  /** Units priced (requests, images, credits, tokens), for the usage entry. */
  readonly units: number
  readonly pricePerUnit: Money.Nano
  /** RPC credits, when the sku is an RPC call. */
  readonly credits?: number
}

/** @category models */
export type ImageQuality = "low" | "medium" | "high"

/** @category models */
export interface ImagePrice {
  /** Price of one image at each quality; models without quality tiers list one price under `high`. */
  readonly perImage: { readonly [Q in ImageQuality]?: Money.Nano }
  readonly defaultQuality: ImageQuality
}

/** @category models */
export interface ChatPrice {
  readonly inputPerMillion: Money.Nano
  readonly outputPerMillion: Money.Nano
  /** The price of prompt tokens the upstream read from its prompt cache; absent: `inputPerMillion`. */
  readonly cachedInputPerMillion?: Money.Nano | undefined
}

/**
 * Per-unit prices of the other kinds: embeddings per million input tokens, speech per million input
 * characters, transcription per second of audio, video per second of video.
 *
 * @category models
 */
export interface MediaPrices {
  readonly embedding: Readonly<Record<string, { readonly perMillionTokens: Money.Nano }>>
  readonly speech: Readonly<Record<string, { readonly perMillionCharacters: Money.Nano }>>
  readonly transcription: Readonly<Record<string, { readonly perSecond: Money.Nano }>>
  readonly video: Readonly<Record<string, { readonly perSecond: Money.Nano }>>
}

/**
 * RPC method tiers and their multipliers (Standard 1, Advanced 2, Large 4).
 *
 * @category models
 */
export type RpcTier = "S" | "A" | "L"

/** @category models */
export interface Tables {
  readonly version: string
  readonly textParser: { readonly perRequest: Money.Nano }
  readonly rpc: {
    readonly nanoPerCredit: Money.Nano
    /** Overrides of the base credits of `Networks` by slug. */
    readonly baseCredits: Readonly<Record<string, number>>
    readonly multipliers: { readonly [T in RpcTier]: number }
    readonly errorItemCredits: number
  }
  readonly image: {
    readonly models: Readonly<Record<string, ImagePrice>>
    readonly enhancePrompt: Money.Nano
    readonly webSearch: Money.Nano
  }
  readonly chat: {
    readonly models: Readonly<Record<string, ChatPrice>>
    /** Per request that searched the web (`enable_web_search` on, or auto and the model searched). */
    readonly webSearch: Money.Nano
    /** Per URL successfully scraped (`enable_web_scraping`, at most 5 per message). */
    readonly webScrapingPerUrl: Money.Nano
    /** Per request that used a provider's native search (`enable_x_search`). */
    readonly xSearch: Money.Nano
  }
  readonly media: MediaPrices
  readonly operations: OperationPrices
}

/**
 * Flat prices of the operations that take no model: image upscaling (by scale) and background
 * removal, and the web search and scraping of `/augment`.
 *
 * @category models
 */
export interface OperationPrices {
  readonly imageUpscale: { readonly 2: Money.Nano; readonly 4: Money.Nano }
  readonly imageBackgroundRemove: Money.Nano
  readonly augmentSearch: Money.Nano
  /** Per URL scraped. */
  readonly augmentScrape: Money.Nano
}

/**
 * The operations `operation` prices.
 *
 * @category models
 */
export type Operation = "image-upscale-2" | "image-upscale-4" | "image-background-remove" | "augment-search" | "augment-scrape"

const usd = (text: string): Money.Nano => Result.getOrThrow(Money.parseUsd(text))

/**
 * The spec's prices where it gives them; image and chat prices are placeholders for an operator
 * to replace with their own (they are in the same range as public price lists).
 *
 * @category constants
 */
export const defaults: Tables = {
  version: "2026-11-01",
  textParser: { perRequest: usd("0.01") },
  rpc: {
    nanoPerCredit: Money.unsafeNano(625),
    baseCredits: {},
    multipliers: { S: 1, A: 2, L: 4 },
    errorItemCredits: 5
  },
  image: {
    models: {
      "flux-dev": { perImage: { high: usd("0.01") }, defaultQuality: "high" },
      "gpt-image-1": {
        perImage: { low: usd("0.02"), medium: usd("0.07"), high: usd("0.19") },
        defaultQuality: "high"
      },
      "local-renderer": { perImage: { high: usd("0.001") }, defaultQuality: "high" },
      "nano-banana-pro": { perImage: { high: usd("0.18") }, defaultQuality: "high" },
      "sd-3.5": { perImage: { high: usd("0.01") }, defaultQuality: "high" }
    },
    enhancePrompt: usd("0.005"),
    webSearch: usd("0.01")
  },
  chat: {
    models: {
      "llama-3.3-70b": { inputPerMillion: usd("0.7"), outputPerMillion: usd("2.8") },
      "qwen3-4b": { inputPerMillion: usd("0.05"), outputPerMillion: usd("0.15") },
      "local-echo": { inputPerMillion: usd("0.1"), outputPerMillion: usd("0.2") }
    },
    webSearch: usd("0.01"),
    webScrapingPerUrl: usd("0.01"),
    xSearch: usd("0.025")
  },
  media: {
    embedding: { "dev-embedding": { perMillionTokens: usd("0.02") } },
    speech: { "dev-tts": { perMillionCharacters: usd("15") } },
    transcription: { "dev-asr": { perSecond: usd("0.0001") } },
    video: { "dev-video": { perSecond: usd("0.05") } }
  },
  operations: {
    imageUpscale: { 2: usd("0.02"), 4: usd("0.08") },
    imageBackgroundRemove: usd("0.01"),
    augmentSearch: usd("0.01"),
    augmentScrape: usd("0.01")
  }
}

/**
 * Why a price could not be given. Routes turn it into a 400 naming the field.
 *
 * @category errors
 */
export interface Unpriced {
  readonly _tag: "Unpriced"
  readonly field: string
  readonly message: string
}

const unpriced = (field: string, message: string): Unpriced => ({ _tag: "Unpriced", field, message })

/** @category pricing */
export const textParser = (tables: Tables): Quote => ({
  amount: tables.textParser.perRequest,
  version: tables.version,
  sku: "text-parser",
  units: 1,
  pricePerUnit: tables.textParser.perRequest
})

/**
 * One item of an RPC call as priced: a method of a tier, or a JSON-RPC error item.
 *
 * @category models
 */
export type RpcItem = RpcTier | "error"

/**
 * Base credits of a network: the configured override, else the network table's.
 *
 * @category pricing
 */
export const baseCredits = (tables: Tables, network: string): number | undefined =>
  tables.rpc.baseCredits[network] ?? Networks.findNetwork(network)?.baseCredits

/**
 * Credits of an RPC call (single or batch): baseCredits x tier multiplier per item, 5 per error item.
 *
 * @category pricing
 */
export const rpcCredits = (tables: Tables, network: string, items: ReadonlyArray<RpcItem>): number | Unpriced => {
  const base = baseCredits(tables, network)
  if (base === undefined) return unpriced("network", `Unsupported network ${network}`)
  let credits = 0
  for (const item of items) {
    credits += item === "error" ? tables.rpc.errorItemCredits : base * tables.rpc.multipliers[item]
  }
  return credits
}

/**
 * The price of a number of RPC credits on a network.
 *
 * @category pricing
 */
export const rpcFromCredits = (tables: Tables, network: string, credits: number): Quote => ({
  amount: Money.unsafeNano(credits * tables.rpc.nanoPerCredit),
  version: tables.version,
  sku: `rpc:${network}`,
  units: credits,
  pricePerUnit: tables.rpc.nanoPerCredit,
  credits
})

/**
 * The price of an RPC call. The worst case of a call is every item at its own tier: an item that
 * comes back as an error costs 5 credits, never more than its tier.
 *
 * @category pricing
 */
export const rpc = (tables: Tables, network: string, items: ReadonlyArray<RpcItem>): Quote | Unpriced => {
  const credits = rpcCredits(tables, network, items)
  return typeof credits === "number" ? rpcFromCredits(tables, network, credits) : credits
}

/** @category models */
export interface ImageRequest {
  readonly model: string
  readonly quality?: ImageQuality | undefined
  readonly variants?: number | undefined
  readonly enhancePrompt?: boolean | undefined
  readonly webSearch?: boolean | undefined
}

/**
 * The price of an image request: per image at the model's quality (the default quality when none
 * is asked, the highest priced one when the model has no price for the asked one), times the
 * variants, plus prompt enhancement and web search once per request.
 *
 * @category pricing
 */
export const image = (tables: Tables, request: ImageRequest): Quote | Unpriced => {
  const price = tables.image.models[request.model]
  if (price === undefined) return unpriced("model", `No price for image model ${request.model}`)
  const quality = request.quality ?? price.defaultQuality
  const perImage = price.perImage[quality] ?? price.perImage[price.defaultQuality]
    ?? Money.unsafeNano(Math.max(...Object.values(price.perImage)))
  const variants = request.variants ?? 1
  const extras = (request.enhancePrompt === true ? tables.image.enhancePrompt : 0)
    + (request.webSearch === true ? tables.image.webSearch : 0)
  return {
    amount: Money.unsafeNano(perImage * variants + extras),
    version: tables.version,
    sku: `image:${request.model}`,
    units: variants,
    pricePerUnit: perImage
  }
}

/** @category models */
export interface ChatRequest {
  readonly model: string
  readonly inputTokens: number
  /** Of `inputTokens`, those the upstream read from its prompt cache. */
  readonly cachedInputTokens?: number | undefined
  readonly outputTokens: number
  readonly webSearch?: boolean | undefined
  /** URLs scraped (successfully, when settling; the most that may be, when quoting). */
  readonly scrapedUrls?: number | undefined
  readonly xSearch?: boolean | undefined
}

const perMillion = (tokens: number, price: Money.Nano): number => Number((BigInt(tokens) * BigInt(price) + 999_999n) / 1_000_000n)

/**
 * The price of a chat completion: input and output tokens at the model's price per million (each
 * rounded up to the nano; cached input tokens at the cached-input price when the model has one),
 * plus web search, scraping and native search extras. Quote it with the
 * prompt tokens and the capped `max_tokens` for the hold; price it again with the actual counts.
 *
 * @category pricing
 */
export const chat = (tables: Tables, request: ChatRequest): Quote | Unpriced => {
  const price = tables.chat.models[request.model]
  if (price === undefined) return unpriced("model", `No price for chat model ${request.model}`)
  const cachedPrice = price.cachedInputPerMillion
  const cached = cachedPrice === undefined ? 0 : Math.min(request.cachedInputTokens ?? 0, request.inputTokens)
  const tokens = perMillion(request.inputTokens - cached, price.inputPerMillion)
    + (cachedPrice === undefined ? 0 : perMillion(cached, cachedPrice))
    + perMillion(request.outputTokens, price.outputPerMillion)
  const extras = (request.webSearch === true ? tables.chat.webSearch : 0)
    + (request.scrapedUrls ?? 0) * tables.chat.webScrapingPerUrl
    + (request.xSearch === true ? tables.chat.xSearch : 0)
  const units = request.inputTokens + request.outputTokens
  const amount = Money.unsafeNano(tokens + extras)
  return {
    amount,
    version: tables.version,
    sku: `chat:${request.model}`,
    units,
    pricePerUnit: Money.unsafeNano(units === 0 ? 0 : Math.ceil(amount / units))
  }
}

/** @category models */
export type MediaKind = keyof MediaPrices

const mediaSku: { readonly [K in MediaKind]: string } = {
  embedding: "embedding",
  speech: "tts",
  transcription: "asr",
  video: "video"
}

const perUnitOf = (tables: Tables, kind: MediaKind, model: string): { readonly amount: number; readonly per: number } | undefined => {
  switch (kind) {
    case "embedding": {
      const price = tables.media.embedding[model]
      return price === undefined ? undefined : { amount: price.perMillionTokens, per: 1_000_000 }
    }
    case "speech": {
      const price = tables.media.speech[model]
      return price === undefined ? undefined : { amount: price.perMillionCharacters, per: 1_000_000 }
    }
    case "transcription":
    case "video": {
      const price = tables.media[kind][model]
      return price === undefined ? undefined : { amount: price.perSecond, per: 1 }
    }
  }
}

/**
 * The price of `units` of a media kind: input tokens of an embedding, input characters of speech,
 * seconds of transcribed audio or of rendered video. Prices per million round up to the nano. The
 * sku is `embedding:<model>`, `tts:<model>`, `asr:<model>` or `video:<model>`.
 *
 * @category pricing
 */
export const media = (tables: Tables, kind: MediaKind, model: string, units: number): Quote | Unpriced => {
  const price = perUnitOf(tables, kind, model)
  if (price === undefined) return unpriced("model", `No price for ${mediaSku[kind]} model ${model}`)
  const amount = Money.unsafeNano(price.per === 1 ? units * price.amount : perMillion(units, Money.unsafeNano(price.amount)))
  return {
    amount,
    version: tables.version,
    sku: `${mediaSku[kind]}:${model}`,
    units,
    pricePerUnit: Money.unsafeNano(price.per === 1 ? price.amount : units === 0 ? 0 : Math.ceil(amount / units))
  }
}

const operationPrice = (prices: OperationPrices, operation: Operation): Money.Nano => {
  switch (operation) {
    case "image-upscale-2":
      return prices.imageUpscale[2]
    case "image-upscale-4":
      return prices.imageUpscale[4]
    case "image-background-remove":
      return prices.imageBackgroundRemove
    case "augment-search":
      return prices.augmentSearch
    case "augment-scrape":
      return prices.augmentScrape
  }
}

/**
 * The price of `units` of a flat-priced operation (one image, one search, URLs scraped); the sku
 * is the operation's name.
 *
 * @category pricing
 */
export const operation = (tables: Tables, name: Operation, units = 1): Quote => {
  const price = operationPrice(tables.operations, name)
  return { amount: Money.unsafeNano(price * units), version: tables.version, sku: name, units, pricePerUnit: price }
}

/** @category guards */
export const isUnpriced = (u: Quote | Unpriced | number): u is Unpriced => typeof u === "object" && "_tag" in u && u._tag === "Unpriced"

/**
 * The price tables in use. Routes read them once at build time and price with the functions above.
 *
 * @category services
 */
export class PricingEngine extends Context.Service<PricingEngine, Tables>()("@tollgate/core/PricingEngine") {}

/** @category models */
export interface Overrides {
  readonly version?: string
  readonly textParser?: Partial<Tables["textParser"]>
  readonly rpc?: Partial<Tables["rpc"]>
  readonly image?: Partial<Tables["image"]>
  readonly chat?: Partial<Tables["chat"]>
  readonly media?: Partial<MediaPrices>
  readonly operations?: Partial<OperationPrices>
}

/**
 * Tables from config: each section given replaces that part of the defaults.
 *
 * @category constructors
 */
export const make = (overrides: Overrides = {}): Tables => ({
  version: overrides.version ?? defaults.version,
  textParser: { ...defaults.textParser, ...overrides.textParser },
  rpc: { ...defaults.rpc, ...overrides.rpc },
  image: { ...defaults.image, ...overrides.image },
  chat: { ...defaults.chat, ...overrides.chat },
  media: { ...defaults.media, ...overrides.media },
  operations: { ...defaults.operations, ...overrides.operations }
})

/**
 * The engine over `make(overrides)`.
 *
 * @category layers
 */
export const layer = (overrides: Overrides = {}): Layer.Layer<PricingEngine> => Layer.succeed(PricingEngine, make(overrides))

const Usd = Schema.String.check(
  Schema.makeFilter((text: string) =>
    Result.isSuccess(Money.parseUsd(text)) && !text.trim().startsWith("-")
      ? true
      : "must be a non-negative decimal USD amount such as \"0.01\""
  )
)

/**
 * The `prices` section of the config file: amounts as decimal USD strings (never floats), merged
 * over the defaults; a model listed here is added to, or replaces, the default of that model.
 *
 * @category schemas
 */
export const PricesConfig = Schema.Struct({
  version: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  textParserUsd: Schema.optionalKey(Usd),
  rpc: Schema.optionalKey(Schema.Struct({
    usdPerCredit: Schema.optionalKey(Usd),
    baseCredits: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int.check(Schema.isGreaterThan(0))))
  })),
  image: Schema.optionalKey(Schema.Record(
    Schema.String,
    Schema.Struct({
      perImageUsd: Schema.Struct({ low: Schema.optionalKey(Usd), medium: Schema.optionalKey(Usd), high: Schema.optionalKey(Usd) }),
      defaultQuality: Schema.Literals(["low", "medium", "high"])
    })
  )),
  chat: Schema.optionalKey(Schema.Record(
    Schema.String,
    Schema.Struct({
      inputPerMillionUsd: Usd,
      outputPerMillionUsd: Usd,
      cachedInputPerMillionUsd: Schema.optionalKey(Usd)
    })
  )),
  embedding: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ perMillionTokensUsd: Usd }))),
  speech: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ perMillionCharactersUsd: Usd }))),
  transcription: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ perSecondUsd: Usd }))),
  video: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ perSecondUsd: Usd }))),
  operations: Schema.optionalKey(Schema.Struct({
    imageUpscale2xUsd: Schema.optionalKey(Usd),
    imageUpscale4xUsd: Schema.optionalKey(Usd),
    imageBackgroundRemoveUsd: Schema.optionalKey(Usd),
    augmentSearchUsd: Schema.optionalKey(Usd),
    augmentScrapePerUrlUsd: Schema.optionalKey(Usd)
  }))
})

const operationsOf = (given: typeof PricesConfig.Type["operations"]): OperationPrices => {
  const { operations } = defaults
  const or = (text: string | undefined, fallback: Money.Nano) => text === undefined ? fallback : usd(text)
  return {
    imageUpscale: {
      2: or(given?.imageUpscale2xUsd, operations.imageUpscale[2]),
      4: or(given?.imageUpscale4xUsd, operations.imageUpscale[4])
    },
    imageBackgroundRemove: or(given?.imageBackgroundRemoveUsd, operations.imageBackgroundRemove),
    augmentSearch: or(given?.augmentSearchUsd, operations.augmentSearch),
    augmentScrape: or(given?.augmentScrapePerUrlUsd, operations.augmentScrape)
  }
}

const priced = <P, A>(defaults: Readonly<Record<string, A>>, given: Readonly<Record<string, P>> | undefined, f: (price: P) => A) => ({
  ...defaults,
  ...Object.fromEntries(Object.entries(given ?? {}).map(([model, price]) => [model, f(price)]))
})

/**
 * The tables of the config file's `prices` section (absent: the defaults). Unknown keys are
 * refused: a misspelt price would otherwise be silently replaced by a default.
 *
 * @category decoding
 */
export const decodeConfig = (input: unknown): Effect.Effect<Tables, Schema.SchemaError> =>
  input === undefined ? Effect.succeed(defaults) : Effect.map(
    Schema.decodeUnknownEffect(PricesConfig)(input, { errors: "all", onExcessProperty: "error" }),
    (prices) =>
      make({
        ...(prices.version === undefined ? {} : { version: prices.version }),
        ...(prices.textParserUsd === undefined ? {} : { textParser: { perRequest: usd(prices.textParserUsd) } }),
        rpc: {
          ...(prices.rpc?.usdPerCredit === undefined ? {} : { nanoPerCredit: usd(prices.rpc.usdPerCredit) }),
          ...(prices.rpc?.baseCredits === undefined ? {} : { baseCredits: prices.rpc.baseCredits })
        },
        image: {
          models: {
            ...defaults.image.models,
            ...Object.fromEntries(
              Object.entries(prices.image ?? {}).map(([model, price]) => [model, {
                defaultQuality: price.defaultQuality,
                perImage: Object.fromEntries(
                  Object.entries(price.perImageUsd).flatMap(([quality, amount]) => amount === undefined ? [] : [[quality, usd(amount)]])
                )
              }])
            )
          }
        },
        chat: {
          models: {
            ...defaults.chat.models,
            ...Object.fromEntries(
              Object.entries(prices.chat ?? {}).map(([model, price]) => [model, {
                inputPerMillion: usd(price.inputPerMillionUsd),
                outputPerMillion: usd(price.outputPerMillionUsd),
                ...(price.cachedInputPerMillionUsd === undefined ? {} : { cachedInputPerMillion: usd(price.cachedInputPerMillionUsd) })
              }])
            )
          }
        },
        media: {
          embedding: priced(defaults.media.embedding, prices.embedding, (price) => ({ perMillionTokens: usd(price.perMillionTokensUsd) })),
          speech: priced(defaults.media.speech, prices.speech, (price) => ({ perMillionCharacters: usd(price.perMillionCharactersUsd) })),
          transcription: priced(defaults.media.transcription, prices.transcription, (price) => ({ perSecond: usd(price.perSecondUsd) })),
          video: priced(defaults.media.video, prices.video, (price) => ({ perSecond: usd(price.perSecondUsd) }))
        },
        operations: operationsOf(prices.operations)
      })
  )

/**
 * The engine from the config file's `prices` section (absent: the defaults).
 *
 * @category layers
 */
export const layerConfig = (input: unknown): Layer.Layer<PricingEngine, Schema.SchemaError> =>
  Layer.effect(PricingEngine, decodeConfig(input))
