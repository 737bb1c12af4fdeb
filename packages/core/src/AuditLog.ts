/**
 * The audit log of management actions: keys minted, rerolled, revoked, capped or restricted,
 * credits granted, rate limits changed, and the signing keys a server started with. Each entry
 * says who did it (`key:<key id>` of the ADMIN key that called the API, `wallet:…` for a wallet
 * signed in to the portal, `cli` for the operator's CLI, `server` for a server's start), when, on
 * which account, and what changed.
 *
 * The log is append-only: the service offers no way to change or remove an entry. It is read newest
 * first, a page at a time: an account's own entries (what its ADMIN keys see) or every entry (what
 * operators see). The memory layer keeps the log of one process; the Redis layer (in
 * `@tollgate/redis`) keeps one stream per account in the account's slot and one for the deployment.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/**
 * What was done.
 *
 * @category models
 */
export type Action =
  | "key.minted"
  | "key.rerolled"
  | "key.revoked"
  | "key.capped"
  | "key.restricted"
  | "credits.granted"
  | "limits.changed"
  | "signing_keys.in_use"

/**
 * Who did it: the ADMIN key that called the API or signed in to the portal (`key:<key id>`), a
 * wallet signed in to the portal (its account id, `wallet:<family>:<address>`), the operator's
 * CLI, or a server.
 *
 * @category models
 */
export type Actor = `key:${string}` | `wallet:${string}` | "cli" | "server"

/** @category models */
export interface Entry {
  /** Orders the log; the cursor of the page that ends with it. */
  readonly id: string
  readonly at: Date
  readonly actor: Actor
  readonly action: Action
  /** The account acted on; absent for what concerns the whole deployment (its signing keys). */
  readonly accountId?: string | undefined
  /** What changed: the key id and the new values, never a secret. */
  readonly details: Readonly<Record<string, unknown>>
}

/** @category models */
export type NewEntry = Omit<Entry, "id" | "at">

/** @category models */
export interface Page {
  /** Newest first. */
  readonly entries: ReadonlyArray<Entry>
  /** Pass as `before` for the next page; absent on the last. */
  readonly next?: string | undefined
}

/** @category models */
export interface Query {
  /** One account's entries; absent: every entry (operators). */
  readonly accountId?: string | undefined
  /** The entries older than this cursor (`Page.next`); absent: from the newest. */
  readonly before?: string | undefined
  readonly limit: number
}

/** The most entries a page holds. @category constants */
export const MAX_PAGE = 100

/** @category services */
export class AuditLog extends Context.Service<AuditLog, {
  readonly append: (entry: NewEntry) => Effect.Effect<void, ServiceUnavailable>
  readonly list: (query: Query) => Effect.Effect<Page, ServiceUnavailable>
}>()("@tollgate/core/AuditLog") {}

/**
 * Appends an entry when the log is configured; does nothing otherwise (a library user who did not
 * provide one).
 *
 * @category recording
 */
export const record = (entry: NewEntry): Effect.Effect<void, ServiceUnavailable> =>
  Effect.flatMap(Effect.serviceOption(AuditLog), (log) => log._tag === "Some" ? log.value.append(entry) : Effect.void)

/**
 * A page of `limit` entries from those found (newest first, one more than `limit` when there are
 * more), with the cursor of the next.
 *
 * @category paging
 */
export const page = (entries: ReadonlyArray<Entry>, limit: number): Page => {
  const taken = entries.slice(0, limit)
  return entries.length > limit ? { entries: taken, next: taken.at(-1)!.id } : { entries: taken }
}

/**
 * A process-local log (dev mode, tests, single-instance deployments). Ids are the time in
 * milliseconds and a sequence number, like a Redis stream's.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<AuditLog> = Layer.sync(AuditLog, () => {
  const entries: Array<Entry> = []
  let last = 0
  let sequence = 0
  const order = (id: string) => id.split("-").map(Number) as [number, number]
  const older = (id: string, than: string) => {
    const [ms, seq] = order(id)
    const [thanMs, thanSeq] = order(than)
    return ms < thanMs || (ms === thanMs && seq < thanSeq)
  }
  return AuditLog.of({
    append: (entry) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const ms = Math.max(now, last)
        sequence = ms === last ? sequence + 1 : 0
        last = ms
        entries.push({ ...entry, id: `${ms}-${sequence}`, at: new Date(now) })
      }),
    list: ({ accountId, before, limit }) =>
      Effect.sync(() => {
        const found: Array<Entry> = []
        for (let i = entries.length - 1; i >= 0 && found.length <= limit; i--) {
          const entry = entries[i]!
          if (accountId !== undefined && entry.accountId !== accountId) continue
          if (before !== undefined && !older(entry.id, before)) continue
          found.push(entry)
        }
        return page(found, limit)
      })
  })
})
