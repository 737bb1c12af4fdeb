/**
 * Usage analytics: the usage entries of a time range added up by UTC day, by sku, by model and by
 * API key, in the published reference's shape (`GET /billing/usage-analytics`). The totals are sums
 * of the very entries `usage-history` pages through, in nano-USD until they are written, so a total
 * here equals the sum of the history's amounts for the same range to the nano. The portal's chart
 * is drawn from the same `tally`.
 *
 * @since 0.1.0
 */
import type * as CreditLedger from "./CreditLedger.ts"
import * as Money from "./Money.ts"

/** How many models and keys the daily charts name. @category constants */
export const TOP = 8

/** What a key is called in the report when it has no description, or when no key paid (a wallet). @category constants */
export const NO_KEY = "No API key"

/**
 * What a group of usage entries adds up to: nano-USD charged in each currency, and units.
 *
 * @category models
 */
export interface Total {
  usd: number
  diem: number
  units: number
}

const add = (totals: Map<string, Total>, name: string, entry: CreditLedger.UsageEntry) => {
  let total = totals.get(name)
  if (total === undefined) {
    total = { usd: 0, diem: 0, units: 0 }
    totals.set(name, total)
  }
  if (entry.currency === "USD") total.usd += entry.amount
  else total.diem += entry.amount
  total.units += entry.units
}

const usd = (nano: number) => Money.toUsdNumber(Money.unsafeNano(nano))

const MODEL_TYPES: Readonly<Record<string, { readonly modelType: string; readonly unitType: string }>> = {
  chat: { modelType: "LLM", unitType: "tokens" },
  embedding: { modelType: "EMBEDDING", unitType: "tokens" },
  image: { modelType: "IMAGE", unitType: "images" },
  tts: { modelType: "TTS", unitType: "chars" },
  asr: { modelType: "ASR", unitType: "seconds" },
  video: { modelType: "VIDEO", unitType: "seconds" }
}

const dayOf = (timestamp: number) => new Date(timestamp).toISOString().slice(0, 10)

const ranked = (totals: ReadonlyMap<string, Total>) => [...totals].sort(([, a], [, b]) => b.usd + b.diem - (a.usd + a.diem))

/** Per day (newest first), the named totals of the top names, for a chart. */
const daily = (byDay: ReadonlyMap<string, ReadonlyMap<string, Total>>, top: ReadonlyArray<string>) =>
  [...byDay].sort(([a], [b]) => b.localeCompare(a)).map(([day, totals]) => {
    const row: Record<string, number> = { date: Date.parse(`${day}T00:00:00Z`) }
    for (const name of top) {
      const total = totals.get(name)
      if (total !== undefined) row[name] = usd(total.usd + total.diem)
    }
    return row
  })

/**
 * Usage entries added up in one pass, by UTC day (`YYYY-MM-DD`), sku, model and API key (`""`
 * for none), and per day by sku, model and key.
 *
 * @category models
 */
export interface Tally {
  readonly byDate: ReadonlyMap<string, Total>
  readonly bySku: ReadonlyMap<string, Total>
  readonly byModel: ReadonlyMap<string, Total & { readonly kind: string }>
  readonly byKey: ReadonlyMap<string, Total>
  readonly skuDays: ReadonlyMap<string, ReadonlyMap<string, Total>>
  readonly modelDays: ReadonlyMap<string, ReadonlyMap<string, Total>>
  readonly keyDays: ReadonlyMap<string, ReadonlyMap<string, Total>>
}

/**
 * Adds up `entries`: the one pass every usage chart is drawn from, so the portal's chart and the
 * analytics report agree to the nano-USD.
 *
 * @category reports
 */
export const tally = (entries: Iterable<CreditLedger.UsageEntry>): Tally => {
  const byDate = new Map<string, Total>()
  const bySku = new Map<string, Total>()
  const byModel = new Map<string, Total & { readonly kind: string }>()
  const byKey = new Map<string, Total>()
  const skuDays = new Map<string, Map<string, Total>>()
  const modelDays = new Map<string, Map<string, Total>>()
  const keyDays = new Map<string, Map<string, Total>>()
  const dayMap = (days: Map<string, Map<string, Total>>, day: string) => {
    let map = days.get(day)
    if (map === undefined) {
      map = new Map()
      days.set(day, map)
    }
    return map
  }
  for (const entry of entries) {
    const day = dayOf(entry.timestamp)
    add(byDate, day, entry)
    add(bySku, entry.sku, entry)
    add(dayMap(skuDays, day), entry.sku, entry)
    const colon = entry.sku.indexOf(":")
    if (colon > 0 && MODEL_TYPES[entry.sku.slice(0, colon)] !== undefined) {
      const model = entry.sku.slice(colon + 1)
      if (!byModel.has(model)) byModel.set(model, { usd: 0, diem: 0, units: 0, kind: entry.sku.slice(0, colon) })
      add(byModel as Map<string, Total>, model, entry)
      add(dayMap(modelDays, day), model, entry)
    }
    const key = entry.keyId ?? ""
    add(byKey, key, entry)
    add(dayMap(keyDays, day), key, entry)
  }
  return { byDate, bySku, byModel, byKey, skuDays, modelDays, keyDays }
}

/**
 * The report of `entries`; `keys` names the API keys by id (their descriptions). `lookback` is
 * echoed as the reference does (`7d`, or `startDate:endDate`).
 *
 * @category reports
 */
export const report = (
  lookback: string,
  entries: Iterable<CreditLedger.UsageEntry>,
  keys: ReadonlyMap<string, string>
) => {
  const { byDate, byKey, byModel, bySku, keyDays, modelDays } = tally(entries)
  const nameOf = (keyId: string) => keyId === "" ? NO_KEY : keys.get(keyId) || keyId
  const models = ranked(byModel)
  const keyTotals = ranked(byKey)
  const topModels = models.slice(0, TOP).map(([model]) => model)
  const topKeys = keyTotals.slice(0, TOP).map(([keyId]) => keyId)
  const keyDaily = daily(keyDays, topKeys).map((row) =>
    Object.fromEntries(Object.entries(row).map(([name, value]) => [name === "date" ? name : nameOf(name), value]))
  )
  return {
    lookback,
    byDate: [...byDate].sort(([a], [b]) => b.localeCompare(a)).map(([date, total]) => ({
      date,
      USD: usd(total.usd),
      DIEM: usd(total.diem)
    })),
    bySku: ranked(bySku).map(([sku, total]) => ({ sku, totalUsd: usd(total.usd), totalDiem: usd(total.diem), totalUnits: total.units })),
    byModel: models.map(([model, total]) => {
      const kind = MODEL_TYPES[byModel.get(model)!.kind]!
      return {
        modelName: model,
        unitType: kind.unitType,
        modelType: kind.modelType,
        totalUsd: usd(total.usd),
        totalDiem: usd(total.diem),
        totalUnits: total.units
      }
    }),
    byModelDaily: daily(modelDays, topModels),
    topModels,
    byKey: keyTotals.map(([keyId, total]) => ({
      apiKeyId: keyId === "" ? null : keyId,
      description: nameOf(keyId),
      totalUsd: usd(total.usd),
      totalDiem: usd(total.diem),
      totalUnits: total.units
    })),
    byKeyDaily: keyDaily,
    topKeyNames: topKeys.map(nameOf)
  }
}
