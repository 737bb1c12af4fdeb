import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import * as Money from "../src/Money.ts"
import * as PricingEngine from "../src/PricingEngine.ts"

const tables = PricingEngine.defaults
const quote = <A>(value: A | PricingEngine.Unpriced): A => {
  if (typeof value === "object" && value !== null && "_tag" in value && value._tag === "Unpriced") throw new Error(value.message)
  return value as A
}

describe("Pricing: the text parser costs 0.01 USD per request", () => {
  it("quotes 10,000,000 nano-USD with the tables' version", () => {
    expect(PricingEngine.textParser(tables)).toEqual({
      amount: 10_000_000,
      version: tables.version,
      sku: "text-parser",
      units: 1,
      pricePerUnit: 10_000_000
    })
  })
})

describe("Pricing: RPC credits = baseCredits[chain] x tier multiplier; an error item 5 credits; 6.25e-7 USD per credit", () => {
  it.each(
    [
      ["ethereum-mainnet", ["S"], 20],
      ["base-mainnet", ["A"], 40],
      ["arbitrum-mainnet", ["L"], 80],
      ["zksync-mainnet", ["S"], 30],
      ["solana-mainnet", ["L"], 120],
      ["ethereum-mainnet", ["S", "A", "error"], 65]
    ] as const
  )("%s %j -> %d credits", (network, items, credits) => {
    const price = quote(PricingEngine.rpc(tables, network, items))
    expect(price.credits).toBe(credits)
    expect(price.amount).toBe(credits * 625)
    expect(price.sku).toBe(`rpc:${network}`)
  })

  it("an unknown network is unpriced, naming the field", () => {
    expect(PricingEngine.rpc(tables, "nope", ["S"])).toMatchObject({ _tag: "Unpriced", field: "network" })
  })

  it("the price per credit and base credits come from config", () => {
    const custom = { ...tables, rpc: { ...tables.rpc, nanoPerCredit: Money.unsafeNano(700), baseCredits: { "base-mainnet": 25 } } }
    expect(quote(PricingEngine.rpc(custom, "base-mainnet", ["S"])).amount).toBe(25 * 700)
  })
})

describe("Pricing: images per model, quality and variants, plus enhancement", () => {
  it("quality tiers, variants and extras add up; the default quality applies when none is asked", () => {
    const low = quote(PricingEngine.image(tables, { model: "gpt-image-1", quality: "low", variants: 3 }))
    expect(low.amount).toBe(3 * 20_000_000)
    const enhanced = quote(PricingEngine.image(tables, { model: "gpt-image-1", enhancePrompt: true }))
    expect(enhanced.amount).toBe(190_000_000 + tables.image.enhancePrompt)
    expect(PricingEngine.image(tables, { model: "nope" })).toMatchObject({ _tag: "Unpriced", field: "model" })
  })
})

describe("Pricing: chat per million input and output tokens, rounded up to the nano, plus search and scraping", () => {
  it("prices tokens and extras", () => {
    const price = quote(
      PricingEngine.chat(tables, { model: "llama-3.3-70b", inputTokens: 1_000_000, outputTokens: 1, webSearch: true, scrapedUrls: 2 })
    )
    expect(price.amount).toBe(700_000_000 + 2_800 + tables.chat.webSearch + 2 * tables.chat.webScrapingPerUrl)
    expect(quote(PricingEngine.chat(tables, { model: "qwen3-4b", inputTokens: 1, outputTokens: 0 })).amount).toBe(50)
  })

  it("is pure: the same request always gets the same price", () => {
    const request = { model: "qwen3-4b", inputTokens: 12_345, outputTokens: 678 }
    expect(PricingEngine.chat(tables, request)).toEqual(PricingEngine.chat(tables, request))
  })
})

describe("Pricing: cached prompt tokens at the model's cached-input price, when the price table has one", () => {
  it("the cached share of the prompt at its own price; without one, every prompt token at the input price", async () => {
    const priced = await Effect.runPromise(PricingEngine.decodeConfig({
      chat: { cached: { inputPerMillionUsd: "1", outputPerMillionUsd: "2", cachedInputPerMillionUsd: "0.1" } }
    }))
    const request = { model: "cached", inputTokens: 1_000, cachedInputTokens: 600, outputTokens: 10 }
    expect(quote(PricingEngine.chat(priced, request)).amount).toBe(400_000 + 60_000 + 20_000)
    expect(quote(PricingEngine.chat(tables, { ...request, model: "qwen3-4b" })).amount)
      .toBe(quote(PricingEngine.chat(tables, { model: "qwen3-4b", inputTokens: 1_000, outputTokens: 10 })).amount)
  })
})

describe("Pricing: embeddings per million input tokens, speech per million characters, transcription and video per second", () => {
  it("prices each kind under its own sku, per-million prices rounded up to the nano", () => {
    expect(quote(PricingEngine.media(tables, "embedding", "dev-embedding", 1_000_000))).toMatchObject({
      amount: 20_000_000,
      sku: "embedding:dev-embedding"
    })
    expect(quote(PricingEngine.media(tables, "embedding", "dev-embedding", 1)).amount).toBe(20)
    expect(quote(PricingEngine.media(tables, "speech", "dev-tts", 11))).toMatchObject({ amount: 165_000, sku: "tts:dev-tts", units: 11 })
    expect(quote(PricingEngine.media(tables, "transcription", "dev-asr", 4))).toMatchObject({
      amount: 400_000,
      pricePerUnit: 100_000,
      sku: "asr:dev-asr"
    })
    expect(quote(PricingEngine.media(tables, "video", "dev-video", 2))).toMatchObject({ amount: 100_000_000, sku: "video:dev-video" })
  })

  it("an unpriced model names model", () => {
    expect(PricingEngine.media(tables, "video", "nope", 2)).toMatchObject({ _tag: "Unpriced", field: "model" })
  })

  it("the config file's prices are added to the defaults", async () => {
    const engine = await Effect.runPromise(Effect.provide(
      Effect.gen(function*() {
        return yield* PricingEngine.PricingEngine
      }),
      PricingEngine.layerConfig({
        embedding: { e: { perMillionTokensUsd: "0.13" } },
        speech: { s: { perMillionCharactersUsd: "30" } },
        transcription: { a: { perSecondUsd: "0.0001" } },
        video: { v: { perSecondUsd: "0.5" } }
      })
    ))
    expect(engine.media.embedding["e"]).toEqual({ perMillionTokens: Money.unsafeNano(130_000_000) })
    expect(engine.media.video["v"]).toEqual({ perSecond: Money.unsafeNano(500_000_000) })
    expect(engine.media.video["dev-video"]).toBeDefined()
  })
})

describe("Pricing: image upscaling, background removal, web search and scraping are flat prices of their own", () => {
  it("quotes each under the operation's sku, scraping per URL", () => {
    expect(PricingEngine.operation(tables, "image-upscale-2")).toEqual({
      amount: 20_000_000,
      version: tables.version,
      sku: "image-upscale-2",
      units: 1,
      pricePerUnit: 20_000_000
    })
    expect(PricingEngine.operation(tables, "image-upscale-4").amount).toBe(80_000_000)
    expect(PricingEngine.operation(tables, "image-background-remove").amount).toBe(10_000_000)
    expect(PricingEngine.operation(tables, "augment-search").amount).toBe(10_000_000)
    expect(PricingEngine.operation(tables, "augment-scrape", 3)).toMatchObject({ amount: 30_000_000, units: 3, pricePerUnit: 10_000_000 })
  })

  it("prices.operations overrides the ones it names and keeps the others; a misspelt key is refused", async () => {
    const decoded = await Effect.runPromise(
      PricingEngine.decodeConfig({ operations: { imageUpscale4xUsd: "0.5", augmentSearchUsd: "0.002" } })
    )
    expect(decoded.operations).toEqual({
      imageUpscale: { 2: 20_000_000, 4: 500_000_000 },
      imageBackgroundRemove: 10_000_000,
      augmentSearch: 2_000_000,
      augmentScrape: 10_000_000
    })
    expect(Exit.isFailure(await Effect.runPromiseExit(PricingEngine.decodeConfig({ operations: { upscaleUsd: "1" } })))).toBe(true)
  })
})
