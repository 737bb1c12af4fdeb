/**
 * Per-key spend caps: an API key may spend at most `usd` per UTC day (`EPOCH`), per UTC calendar
 * month (`MONTH`) or over its life (`LIFETIME`), the periods of the published reference's
 * `limitPeriod`. Concurrent calls can never push a key past its cap: while a call's hold is open
 * its whole quote counts against the cap, and once it settles only what was captured does.
 *
 * **Details**
 *
 * The cap is checked and reserved inside the admission's one store step (`Admission`). A capped
 * key's state is its cap, the period its spend was counted in, that spend (settled captures plus
 * the quotes of open holds) and, per open hold, the quote it reserved. A hold closed outside the
 * admission store (expired, or captured later by a deferred job) is reconciled with the ledger the
 * next time the key's spend would refuse a call, or when a new period starts. Spend is counted only
 * while a key is capped: a key without a cap costs the admission one read.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import { type ServiceUnavailable, SpendCapReached } from "./Errors.ts"
import * as Money from "./Money.ts"

/** @category models */
export const LIMIT_PERIODS = ["EPOCH", "MONTH", "LIFETIME"] as const

/** @category models */
export type LimitPeriod = typeof LIMIT_PERIODS[number]

/** @category models */
export interface SpendCap {
  readonly usd: Money.Nano
  readonly period: LimitPeriod
}

/**
 * A capped key's spend in the current period: settled captures plus the quotes of open holds.
 *
 * @category models
 */
export interface KeySpend {
  readonly cap: SpendCap
  readonly spent: Money.Nano
}

const DAY_MS = 86_400_000

/**
 * The period `now` falls in, as the id spend is counted under: `D<days since 1970>`,
 * `M<year>-<month>` (UTC) or `L`. Periods of different kinds never share an id, so changing a
 * key's period starts its count afresh.
 *
 * @category periods
 */
export const periodId = (period: LimitPeriod, now: number): string => {
  switch (period) {
    case "EPOCH":
      return `D${Math.floor(now / DAY_MS)}`
    case "MONTH": {
      const date = new Date(now)
      return `M${date.getUTCFullYear()}-${date.getUTCMonth() + 1}`
    }
    case "LIFETIME":
      return "L"
  }
}

const PER: Record<LimitPeriod, string> = { EPOCH: "per UTC day", MONTH: "per UTC month", LIFETIME: "for its lifetime" }

/**
 * The 402 of a call the key's cap refused, naming the cap and what the period has spent.
 *
 * @category errors
 */
export const refusal = (cap: SpendCap, spent: Money.Nano): SpendCapReached =>
  new SpendCapReached({
    message: `This API key's spend cap of ${Money.formatUsd(cap.usd)} USD ${PER[cap.period]} leaves no room for this request (${
      Money.formatUsd(spent)
    } USD spent)`
  })

/**
 * What the ledger says of a hold the cap still counts as open: captured (and for how much), or
 * closed without a capture. `undefined` for an open one.
 *
 * @category models
 */
export type ClosedHold = { readonly captured: Money.Nano } | "released" | "forgotten"

/** @category services */
export class KeyCaps extends Context.Service<KeyCaps, {
  /** Sets the key's cap, keeping the spend of the current period; `undefined` removes it. */
  readonly set: (accountId: string, keyId: string, cap: SpendCap | undefined) => Effect.Effect<void, ServiceUnavailable>
  /** The capped keys among `keyIds`, with their spend in the period `now` falls in. */
  readonly read: (
    accountId: string,
    keyIds: ReadonlyArray<string>,
    now: number
  ) => Effect.Effect<ReadonlyMap<string, KeySpend>, ServiceUnavailable>
}>()("@tollgate/core/KeyCaps") {}

/**
 * The memory store's primitives, for `Admission.layerMemory`'s synchronous step. `closed` asks the
 * ledger about a hold the cap counts as open (`undefined` while it is open). Their twin on Redis is
 * `@tollgate/redis` `src/lua/cap.lua`.
 *
 * @category store
 */
export class Memory extends Context.Service<Memory, {
  /** The refusal of a call quoting `amount` on the key, or `undefined` when the cap allows it (or there is none). */
  readonly check: (
    accountId: string,
    keyId: string,
    amount: number,
    now: number,
    closed: (reference: string) => ClosedHold | undefined
  ) => KeySpend | undefined
  /** Counts an admitted hold's quote against the key's cap (nothing when uncapped). */
  readonly reserve: (accountId: string, keyId: string, reference: string, amount: number, expiresAt: number) => void
  /** Replaces the hold's quote with what was captured (0 for a release). */
  readonly close: (accountId: string, keyId: string, reference: string, captured: number) => void
}>()("@tollgate/core/KeyCaps/Memory") {}

interface CapState {
  cap: SpendCap
  period: string
  spent: number
  /** At or before the earliest expiry of `holds`. */
  nextExpiry: number
  readonly holds: Map<string, { readonly period: string; readonly amount: number; readonly expiresAt: number }>
}

/**
 * Caps and spend in process memory, with the admission's primitives as `Memory`.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<KeyCaps | Memory> = Layer.syncContext(() => {
  const states = new Map<string, CapState>()
  const id = (accountId: string, keyId: string) => `${accountId}\u0000${keyId}`

  // Settles into the spend the holds the ledger has closed on its own (a hold of a past period
  // only leaves): when a new period starts, or when the spend would refuse a call and a hold may
  // have expired.
  const reconcile = (state: CapState, closed: (reference: string) => ClosedHold | undefined) => {
    let next = Number.POSITIVE_INFINITY
    for (const [reference, hold] of state.holds) {
      const found = closed(reference)
      if (found === undefined) {
        next = Math.min(next, hold.expiresAt)
        continue
      }
      state.holds.delete(reference)
      if (hold.period !== state.period) continue
      if (found === "released") state.spent -= hold.amount
      else if (found !== "forgotten") state.spent += found.captured - hold.amount
    }
    state.nextExpiry = next
  }

  const memory = Memory.of({
    check: (accountId, keyId, amount, now, closed) => {
      const state = states.get(id(accountId, keyId))
      if (state === undefined) return undefined
      const period = periodId(state.cap.period, now)
      if (period !== state.period) {
        state.period = period
        state.spent = 0
        reconcile(state, closed)
      } else if (state.spent + amount > state.cap.usd && state.nextExpiry <= now) {
        reconcile(state, closed)
      }
      return state.spent + amount <= state.cap.usd ? undefined : { cap: state.cap, spent: Money.unsafeNano(state.spent) }
    },
    reserve: (accountId, keyId, reference, amount, expiresAt) => {
      const state = states.get(id(accountId, keyId))
      if (state === undefined || state.holds.has(reference)) return
      state.spent += amount
      state.holds.set(reference, { period: state.period, amount, expiresAt })
      state.nextExpiry = Math.min(state.nextExpiry, expiresAt)
    },
    close: (accountId, keyId, reference, captured) => {
      const state = states.get(id(accountId, keyId))
      const hold = state?.holds.get(reference)
      if (state === undefined || hold === undefined) return
      state.holds.delete(reference)
      if (hold.period === state.period) state.spent += captured - hold.amount
    }
  })

  const caps = KeyCaps.of({
    set: (accountId, keyId, cap) =>
      Effect.sync(() => {
        const key = id(accountId, keyId)
        if (cap === undefined) return void states.delete(key)
        const state = states.get(key)
        if (state === undefined) states.set(key, { cap, period: "", spent: 0, nextExpiry: Number.POSITIVE_INFINITY, holds: new Map() })
        else state.cap = cap
      }),
    read: (accountId, keyIds, now) =>
      Effect.sync(() => {
        const found = new Map<string, KeySpend>()
        for (const keyId of keyIds) {
          const state = states.get(id(accountId, keyId))
          if (state === undefined) continue
          const spent = periodId(state.cap.period, now) === state.period ? state.spent : 0
          found.set(keyId, { cap: state.cap, spent: Money.unsafeNano(spent) })
        }
        return found
      })
  })
  return Context.make(KeyCaps, caps).pipe(Context.add(Memory, memory))
})
