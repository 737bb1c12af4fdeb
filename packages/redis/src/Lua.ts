/**
 * The stores' Lua, kept in `.lua` files beside the sources (`src/lua`, shipped in the package) and
 * read once when a module that runs it is loaded, as the portal reads its assets. A constant the
 * Lua shares with TypeScript is not written in a `.lua` file: `header` generates its `local`
 * definition from the TypeScript constant, and the ledger's library starts with it, so the two
 * cannot disagree.
 *
 * @since 0.1.0
 */
import { CreditLedger, Money } from "@tollgate/core"
import * as Fs from "node:fs"

/**
 * The text of `src/lua/<name>.lua`. Resolved from this module's own place, so the same path
 * serves `src` in the repository and `dist` in an installed package (both beside `src`).
 *
 * @category constructors
 */
export const read = (name: string): string => Fs.readFileSync(new URL(`../src/lua/${name}.lua`, import.meta.url), "utf8")

/**
 * The `local` definitions of the constants the ledger's Lua shares with TypeScript: how long
 * journal and usage entries are kept (`retentionMs`, the ledger's option), how long a closed hold
 * is remembered (`CreditLedger.CLOSED_HOLD_RETENTION_MS`), the largest amount (`Money.MAX`) and the
 * reference prefix of a funded hold (`CreditLedger.FUNDED_HOLD_PREFIX`).
 *
 * @category constructors
 */
export const header = (retentionMs: number): string =>
  locals({
    RETAIN_MS: retentionMs,
    FORGET_MS: CreditLedger.CLOSED_HOLD_RETENTION_MS,
    MAX_NANO: Money.MAX,
    FUNDED_HOLD_PREFIX: CreditLedger.FUNDED_HOLD_PREFIX,
    FUNDED_HOLD_PREFIX_LENGTH: CreditLedger.FUNDED_HOLD_PREFIX.length
  })

/**
 * The `local` definitions of TypeScript constants a script shares, generated so the two cannot
 * disagree (the ledger's are `header`; the limiter's take marks an unchecked take with one).
 *
 * @category constructors
 */
export const locals = (constants: Readonly<Record<string, number | string>>): string =>
  [
    "-- Generated from the TypeScript constants (@tollgate/redis Lua.locals).",
    ...Object.entries(constants).map(([name, value]) => `local ${name} = ${typeof value === "string" ? JSON.stringify(value) : value}`),
    ""
  ].join("\n")
