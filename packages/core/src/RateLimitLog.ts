/**
 * The recent requests of each account that hit a rate limit, as `GET /api_keys/rate_limit_logs`
 * lists them: when, which limit, the model or kind, and the key. Retention is bounded twice: at
 * most `maxEntries` per account, none older than `retentionMs`. Recording never fails a request:
 * a log that cannot be written is itself only logged.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/**
 * Which limit applied, as `x-ratelimit-type` says it.
 *
 * @category models
 */
export type LimitType = "user" | "api_key" | "global"

/**
 * Who was limited and for what, attached to a limit when it is built.
 *
 * @category models
 */
export interface Subject {
  readonly accountId: string
  readonly keyId?: string
  readonly kind: string
  readonly model?: string
}

/** @category models */
export interface Entry extends Subject {
  /** Epoch milliseconds. */
  readonly timestamp: number
  readonly limitType: LimitType
  /** Which limit tripped, e.g. `50 requests per minute`. */
  readonly limit: string
}

/** @category options */
export interface Options {
  readonly maxEntries?: number
  readonly retentionMs?: number
}

/** @category defaults */
export const defaultMaxEntries = 200

/** @category defaults */
export const defaultRetentionMs = 7 * 24 * 3_600_000

/** @category services */
export class RateLimitLog extends Context.Service<RateLimitLog, {
  readonly record: (entry: Entry) => Effect.Effect<void>
  /** Newest first, at most `limit`. */
  readonly list: (accountId: string, limit?: number) => Effect.Effect<ReadonlyArray<Entry>, ServiceUnavailable>
}>()("@tollgate/core/RateLimitLog") {}

/**
 * The log in process memory.
 *
 * @category constructors
 */
export const makeMemory = (options: Options = {}): RateLimitLog["Service"] => {
  const maxEntries = options.maxEntries ?? defaultMaxEntries
  const retentionMs = options.retentionMs ?? defaultRetentionMs
  const byAccount = new Map<string, Array<Entry>>()
  let records = 0
  const fresh = (entries: ReadonlyArray<Entry>, now: number) => entries.filter((e) => e.timestamp > now - retentionMs)
  return RateLimitLog.of({
    record: (entry) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (++records % 1024 === 0) {
          for (const [account, entries] of byAccount) {
            if (entries.every((e) => e.timestamp <= now - retentionMs)) byAccount.delete(account)
          }
        }
        const entries = [entry, ...fresh(byAccount.get(entry.accountId) ?? [], now)]
        byAccount.set(entry.accountId, entries.slice(0, maxEntries))
      }),
    list: (accountId, limit = maxEntries) =>
      Effect.map(Clock.currentTimeMillis, (now) => fresh(byAccount.get(accountId) ?? [], now).slice(0, limit))
  })
}

/**
 * The in-memory log: one process.
 *
 * @category layers
 */
export const layerMemory = (options: Options = {}): Layer.Layer<RateLimitLog> => Layer.sync(RateLimitLog, () => makeMemory(options))
