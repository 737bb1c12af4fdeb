/**
 * The limit policy: which rate limits apply to a call.
 *
 * **When to use**
 *
 * `limitsFor(principal, call)` gives the `RateLimiter.Limit`s one call is admitted against; the
 * pipeline reads them through `@tollgate/http`'s `LimitPolicy`, which `policy` builds over the
 * `Overrides` store. `status(principal)` reports a caller's limits; `ConfigSchema` is the config
 * file's `rateLimits` section.
 *
 * **Details**
 *
 * The spec's default tables (text tiers XS/S/M/L in requests and tokens per minute, the partner
 * tier, the image, audio, embedding and video kinds, the RPC caps of 100 requests per minute and
 * 10,000,000 credits per rolling 24 hours, the deprecated billing usage endpoint's 5 per minute)
 * and the overrides per account and per key, from config and at runtime. Every limit of an account
 * uses the account id as its hash tag, so one admission touches one Redis Cluster slot. A per-key
 * override adds an `api_key` limit beside the account's `user` limit; a configured global limit
 * adds a `global` one (hash tag `global`).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"
import type { Principal, Tier } from "./Principal.ts"
import { type DimensionStatus, type Limit, type LimitType, RateLimiter } from "./RateLimiter.ts"
import type * as RateLimitLog from "./RateLimitLog.ts"

/** @category models */
export type ModelTier = "XS" | "S" | "M" | "L"

/**
 * What a call is, as the limits see it. `video` is the queue operation, `video_retrieve` the
 * retrieval; `billing_usage` is the deprecated usage endpoint.
 *
 * @category models
 */
export type Kind = "text" | "image" | "audio" | "embedding" | "video" | "video_retrieve" | "rpc" | "billing_usage"

/**
 * One row of a table: a text tier (`text:M`) or another kind.
 *
 * @category models
 */
export type Category = `text:${ModelTier}` | Exclude<Kind, "text">

/** @category models */
export const categories: ReadonlyArray<Category> = [
  "text:XS",
  "text:S",
  "text:M",
  "text:L",
  "image",
  "audio",
  "embedding",
  "video",
  "video_retrieve",
  "rpc",
  "billing_usage"
]

/**
 * Requests and tokens per minute; credits per rolling 24 hours (RPC only).
 *
 * @category models
 */
export interface Rates {
  readonly requests?: number
  readonly tokens?: number
  readonly credits?: number
}

/** @category models */
export type Table = { readonly [C in Category]: Rates }

/** @category models */
export type Override = { readonly [C in Category]?: Rates }

/** @category constants */
export const MINUTE = 60_000

/** @category constants */
export const DAY = 24 * 60 * MINUTE

const rpc: Rates = { requests: 100, credits: 10_000_000 }

/**
 * The spec's defaults for the default tier.
 *
 * @category tables
 */
export const defaultTable: Table = {
  "text:XS": { requests: 500, tokens: 1_000_000 },
  "text:S": { requests: 75, tokens: 750_000 },
  "text:M": { requests: 50, tokens: 750_000 },
  "text:L": { requests: 20, tokens: 500_000 },
  image: { requests: 20 },
  audio: { requests: 60 },
  embedding: { requests: 500 },
  video: { requests: 40 },
  video_retrieve: { requests: 120 },
  rpc,
  billing_usage: { requests: 5 }
}

/**
 * The partner tier. The spec carries no partner video limits, so video keeps the default ones.
 *
 * @category tables
 */
export const partnerTable: Table = {
  "text:XS": { requests: 500, tokens: 2_000_000 },
  "text:S": { requests: 150, tokens: 1_500_000 },
  "text:M": { requests: 100, tokens: 1_500_000 },
  "text:L": { requests: 60, tokens: 1_000_000 },
  image: { requests: 60 },
  audio: { requests: 120 },
  embedding: { requests: 500 },
  video: { requests: 40 },
  video_retrieve: { requests: 120 },
  rpc,
  billing_usage: { requests: 5 }
}

/** @category tables */
export const tables: { readonly [T in Tier]: Table } = { default: defaultTable, partner: partnerTable }

const RatesSchema = Schema.Struct({
  requests: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  tokens: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  credits: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
})

/**
 * An override as it appears in the config file: any category, any of its rates.
 *
 * @category schemas
 */
export const OverrideSchema = Schema.Struct({
  "text:XS": Schema.optionalKey(RatesSchema),
  "text:S": Schema.optionalKey(RatesSchema),
  "text:M": Schema.optionalKey(RatesSchema),
  "text:L": Schema.optionalKey(RatesSchema),
  image: Schema.optionalKey(RatesSchema),
  audio: Schema.optionalKey(RatesSchema),
  embedding: Schema.optionalKey(RatesSchema),
  video: Schema.optionalKey(RatesSchema),
  video_retrieve: Schema.optionalKey(RatesSchema),
  rpc: Schema.optionalKey(RatesSchema),
  billing_usage: Schema.optionalKey(RatesSchema)
})

const KindRatesSchema = Schema.Struct({
  requests: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  tokens: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
})

/**
 * An operator's own kind's rates as the config file sets them, per tier: the same shape as
 * `CustomKind.rates`, each tier optional.
 *
 * @category schemas
 */
export const KindOverrideSchema = Schema.Struct({
  default: Schema.optionalKey(KindRatesSchema),
  partner: Schema.optionalKey(KindRatesSchema)
})

/** @category models */
export type KindOverride = typeof KindOverrideSchema.Type

/**
 * The `rateLimits` section of the config file: tier tables adjusted, per-account and per-key
 * overrides, global limits shared by every caller, and the rates of the operator's own kinds
 * (`CustomKind`) by name.
 *
 * @category schemas
 */
export const ConfigSchema = Schema.Struct({
  tiers: Schema.optionalKey(Schema.Struct({
    default: Schema.optionalKey(OverrideSchema),
    partner: Schema.optionalKey(OverrideSchema)
  })),
  accounts: Schema.optionalKey(Schema.Record(Schema.String, OverrideSchema)),
  keys: Schema.optionalKey(Schema.Record(Schema.String, OverrideSchema)),
  global: Schema.optionalKey(OverrideSchema),
  kinds: Schema.optionalKey(Schema.Record(Schema.String, KindOverrideSchema))
})

/** @category models */
export type Config = typeof ConfigSchema.Type

/**
 * The overrides that bear on one caller.
 *
 * @category models
 */
export interface CallerOverrides {
  readonly tier?: Override | undefined
  readonly account?: Override | undefined
  readonly key?: Override | undefined
  readonly global?: Override | undefined
  /** The configured rates of the operator's own kinds, by name. */
  readonly kinds?: Readonly<Record<string, KindOverride>> | undefined
}

/**
 * Overrides per account and per key: seeded from config, changed at runtime by an operator.
 * Reads are synchronous because the pipeline builds a call's limits on every request.
 *
 * @category services
 */
export class Overrides extends Context.Service<Overrides, {
  readonly forCaller: (principal: Principal) => CallerOverrides
  readonly setAccount: (accountId: string, override: Override | undefined) => Effect.Effect<void>
  readonly setKey: (keyId: string, override: Override | undefined) => Effect.Effect<void>
}>()("@tollgate/core/RateLimitPolicy/Overrides") {}

/**
 * The overrides an operator keeps in the store for an account and for one of its keys, read with
 * the key's standing on each call (`AuthStore.KeyStatus.limits`), so every instance enforces the
 * same numbers from the next call on. They win over the configured and in-process ones.
 *
 * @category models
 */
export interface StoredOverrides {
  readonly account?: Override | undefined
  readonly key?: Override | undefined
}

/**
 * Overrides in process memory, seeded from config.
 *
 * @category layers
 */
export const layerOverridesMemory = (config: Config = {}): Layer.Layer<Overrides> =>
  Layer.sync(Overrides, () => {
    const accounts = new Map<string, Override>(Object.entries(config.accounts ?? {}))
    const keys = new Map<string, Override>(Object.entries(config.keys ?? {}))
    const set = (map: Map<string, Override>, id: string, override: Override | undefined) =>
      Effect.sync(() => {
        if (override === undefined) map.delete(id)
        else map.set(id, override)
      })
    return Overrides.of({
      forCaller: (principal) => {
        const tier = principal._tag === "ApiKey" ? principal.tier : "default"
        return {
          tier: config.tiers?.[tier],
          account: accounts.get(principal.accountId),
          key: principal._tag === "ApiKey" ? keys.get(principal.keyId) : undefined,
          global: config.global,
          kinds: config.kinds
        }
      },
      setAccount: (accountId, override) => set(accounts, accountId, override),
      setKey: (keyId, override) => set(keys, keyId, override)
    })
  })

/**
 * A kind of an operator's own endpoints (`OwnEndpoint`): its name, and its requests (and tokens)
 * per minute for each tier, `default` for a tier it does not name. Its limit is the account's, under
 * its own key, beside the built-in kinds'. The config file's `rateLimits.kinds.<name>` sets its
 * rates over these, tier by tier.
 *
 * @category models
 */
export interface CustomKind {
  readonly name: string
  readonly rates: { readonly default: Rates } & { readonly [T in Tier]?: Rates }
}

/**
 * What the limits need to know of a call (the metered pipeline's `MeteredCall` is one).
 *
 * @category models
 */
export interface Call {
  readonly kind: Kind
  /** An operator's own kind: its rates, not `kind`'s table, limit the call. */
  readonly custom?: CustomKind | undefined
  readonly modelTier?: ModelTier | undefined
  readonly reserveTokens?: number | undefined
  readonly reserveCredits?: number | undefined
  /** `chat:<model>`, `image:<model>`, `rpc:<network>`: the part after `:` is logged as the model. */
  readonly sku?: string | undefined
}

/**
 * A text call without a tier counts against `M`, the middle of the table.
 *
 * @category accessors
 */
export const categoryOf = (call: Pick<Call, "kind" | "modelTier">): Category =>
  call.kind === "text" ? `text:${call.modelTier ?? "M"}` : call.kind

const modelOf = (sku: string | undefined) => {
  const colon = sku?.indexOf(":") ?? -1
  return sku !== undefined && colon >= 0 ? sku.slice(colon + 1) : undefined
}

const build = (
  type: LimitType,
  key: string,
  hashTag: string,
  rates: Rates,
  call: Call,
  subject: RateLimitLog.Subject
): Array<Limit> => {
  const requests = rates.requests === undefined ? undefined : { limit: rates.requests, windowMs: MINUTE }
  if (call.kind === "rpc") {
    return [
      ...(requests === undefined ? [] : [{
        type,
        key: `${key}:minute`,
        hashTag,
        requests,
        subject,
        customMessage: `RPC per-minute request cap exceeded (${rates.requests} requests per minute)`
      }]),
      ...(rates.credits === undefined ? [] : [{
        type,
        key: `${key}:day`,
        hashTag,
        credits: { limit: rates.credits, windowMs: DAY, reserve: call.reserveCredits ?? 0 },
        subject,
        customMessage: `RPC daily credit cap exceeded (${rates.credits} credits per rolling 24 hours)`
      }])
    ]
  }
  const tokens = rates.tokens === undefined ? undefined : { limit: rates.tokens, windowMs: MINUTE, reserve: call.reserveTokens ?? 0 }
  if (requests === undefined && tokens === undefined) return []
  return [{
    type,
    key,
    hashTag,
    subject,
    ...(requests === undefined ? {} : { requests }),
    ...(tokens === undefined ? {} : { tokens })
  }]
}

/**
 * The limits of one call: the account's (`user`) from its tier's table with the tier, account
 * overrides applied; an `api_key` limit when the key has its own override for this category; a
 * `global` limit when config sets one.
 *
 * @category constructors
 */
export const limitsFor = (principal: Principal, call: Call, overrides: CallerOverrides = {}): Array<Limit> => {
  const tier = principal._tag === "ApiKey" ? principal.tier : "default"
  if (call.custom !== undefined) return customLimits(principal, tier, call.custom, call, overrides.kinds?.[call.custom.name])
  const category = categoryOf(call)
  const account = principal.accountId
  const model = modelOf(call.sku)
  const subject: RateLimitLog.Subject = {
    accountId: account,
    kind: call.kind,
    ...(principal._tag === "ApiKey" ? { keyId: principal.keyId } : {}),
    ...(model === undefined ? {} : { model })
  }
  const user = { ...tables[tier][category], ...overrides.tier?.[category], ...overrides.account?.[category] }
  const limits = build("user", `${account}:${category}`, account, user, call, subject)
  const key = overrides.key?.[category]
  if (key !== undefined && principal._tag === "ApiKey") {
    for (const limit of build("api_key", `${account}:key:${principal.keyId}:${category}`, account, { ...user, ...key }, call, subject))
      limits.push(limit)
  }
  const global = overrides.global?.[category]
  if (global !== undefined) {
    for (const limit of build("global", `global:${category}`, "global", global, call, subject))
      limits.push(
        limit
      )
  }
  return limits
}

const customLimits = (
  principal: Principal,
  tier: Tier,
  custom: CustomKind,
  call: Call,
  configured: KindOverride | undefined
): Array<Limit> => {
  // The configured rates over the declared ones, tier by tier; a tier neither names has the default's.
  const ratesOf = (named: Tier): Rates | undefined =>
    custom.rates[named] === undefined && configured?.[named] === undefined ? undefined : { ...custom.rates[named], ...configured?.[named] }
  const rates = ratesOf(tier) ?? { ...custom.rates.default, ...configured?.default }
  const account = principal.accountId
  const subject: RateLimitLog.Subject = {
    accountId: account,
    kind: custom.name,
    ...(principal._tag === "ApiKey" ? { keyId: principal.keyId } : {})
  }
  return build("user", `${account}:custom:${custom.name}`, account, rates, call, subject)
}

const sameOverrides = (a: CallerOverrides, b: CallerOverrides) =>
  a.tier === b.tier && a.account === b.account && a.key === b.key && a.global === b.global && a.kinds === b.kinds

/** How many call shapes one key's limits are remembered for. */
const SHAPES_PER_KEY = 64

/**
 * The limits of a call with the caller's current overrides.
 *
 * An API key's principal is one object for all its requests (`Auth` remembers it), so the limits
 * of a key and a call's shape are built once and found again, while the overrides that bear on
 * them are the same objects (an override that changes is a new object). The limiter then finds
 * the same limits and keeps their counters (`RateLimiter.plan`), so a paid call builds neither.
 *
 * @category constructors
 */
export const policy = Effect.map(Overrides, (overrides) => {
  const remembered = new WeakMap<Principal, Map<string, { readonly overrides: CallerOverrides; readonly limits: ReadonlyArray<Limit> }>>()
  return {
    limitsFor: (principal: Principal, call: Call, stored?: StoredOverrides): ReadonlyArray<Limit> => {
      const configured = overrides.forCaller(principal)
      const current = stored === undefined
        ? configured
        : { ...configured, account: stored.account ?? configured.account, key: stored.key ?? configured.key }
      // A wallet's principal is made per request: nothing to find again.
      if (principal._tag !== "ApiKey") return limitsFor(principal, call, current)
      let byShape = remembered.get(principal)
      if (byShape === undefined) {
        byShape = new Map()
        remembered.set(principal, byShape)
      }
      const shape = `${call.kind}|${call.custom?.name}|${call.modelTier}|${call.sku}|${call.reserveTokens}|${call.reserveCredits}`
      const found = byShape.get(shape)
      if (found !== undefined && sameOverrides(found.overrides, current)) return found.limits
      const limits = limitsFor(principal, call, current)
      if (byShape.size >= SHAPES_PER_KEY) byShape.clear()
      byShape.set(shape, { overrides: current, limits })
      return limits
    }
  }
})

/**
 * Where one limit of a caller stands: requests with the Unix second their window resets, tokens
 * with the seconds until theirs does, credits with the Unix second the oldest use leaves the
 * rolling window.
 *
 * @category models
 */
export interface CategoryStatus {
  readonly kind: Kind
  readonly modelTier?: ModelTier
  readonly type: LimitType
  readonly requests?: { readonly limit: number; readonly remaining: number; readonly reset: number }
  readonly tokens?: { readonly limit: number; readonly remaining: number; readonly resetSeconds: number }
  readonly credits?: { readonly limit: number; readonly remaining: number; readonly reset: number }
}

const kindOf = (category: Category): Pick<CategoryStatus, "kind" | "modelTier"> =>
  category.startsWith("text:")
    ? { kind: "text", modelTier: category.slice(5) as ModelTier }
    : { kind: category as Exclude<Kind, "text"> }

const unixSeconds = (status: DimensionStatus) => Math.ceil(status.resetAt / 1000)

/**
 * Every current limit of a caller and what remains of it, per model tier and per kind, consuming
 * nothing.
 *
 * @category accessors
 */
export const status = Effect.fn("RateLimitPolicy.status")(function*(principal: Principal, stored?: StoredOverrides) {
  const limiter = yield* RateLimiter
  const configured = (yield* Overrides).forCaller(principal)
  const overrides = stored === undefined
    ? configured
    : { ...configured, account: stored.account ?? configured.account, key: stored.key ?? configured.key }
  const rows = categories.map((category) => {
    const { kind, modelTier } = kindOf(category)
    return { category, limits: limitsFor(principal, { kind, modelTier }, overrides) }
  })
  const inspected = yield* limiter.inspect(rows.flatMap((row) => row.limits))
  const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const merged = new Map<string, { -readonly [K in keyof CategoryStatus]: CategoryStatus[K] }>()
  let i = 0
  for (const row of rows) {
    for (const _ of row.limits) {
      const limit = inspected[i++]!
      const id = `${row.category}|${limit.type}`
      const entry = merged.get(id) ?? { ...kindOf(row.category), type: limit.type }
      if (limit.requests !== undefined) {
        entry.requests = { limit: limit.requests.limit, remaining: limit.requests.remaining, reset: unixSeconds(limit.requests) }
      }
      if (limit.tokens !== undefined) {
        entry.tokens = {
          limit: limit.tokens.limit,
          remaining: limit.tokens.remaining,
          resetSeconds: Math.ceil(Math.max(0, limit.tokens.resetAt - now) / 1000)
        }
      }
      if (limit.credits !== undefined) {
        entry.credits = { limit: limit.credits.limit, remaining: limit.credits.remaining, reset: unixSeconds(limit.credits) }
      }
      merged.set(id, entry)
    }
  }
  return [...merged.values()] as ReadonlyArray<CategoryStatus>
}) satisfies (principal: Principal) => Effect.Effect<ReadonlyArray<CategoryStatus>, ServiceUnavailable, RateLimiter | Overrides>
