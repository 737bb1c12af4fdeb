/**
 * The self-service portal: `GET /api-keys`, the page every 402 links to as `getKey`, where a
 * customer signs in with a wallet (sign-in-with-x: an injected EIP-1193 wallet on Base, a Solana
 * Wallet Standard wallet) or an ADMIN key, sees the balance, the staked-token allowance and the
 * top-ups, tops up through x402 from the browser, makes and revokes INFERENCE keys, sets or removes
 * each key's spend cap and restrictions and watches the spend of the last 30 days.
 *
 * **Details**
 *
 * The page is hand-written HTML, CSS and JavaScript in `src/portal/`, served as they are (no build
 * step, nothing from another host) under a Content-Security-Policy that allows only this server's
 * own scripts and styles (`Assets`). It reads and changes the account through the
 * `/api/v1/portal/*` routes: signing in and out (`SignIn`), and the account, its keys and its usage
 * (`Account`), behind the sign-in cookie of `Session` checked by `SessionRoute`; every state change
 * also needs the sign-in's CSRF token. The top-up itself is the x402 endpoint's.
 *
 * @since 0.1.0
 */
import type { CreditLedger, KeyCaps, SessionRevocations } from "@tollgate/core"
import type { Auth } from "@tollgate/core/Auth"
import type { AuthStore } from "@tollgate/core/AuthStore"
import type * as Route from "../Route.ts"
import type { ServiceInfo } from "../ServiceInfo.ts"
import { account, changeKey, createKey, listKeys, revokeKey, usage } from "./Account.ts"
import { page, script, stylesheet } from "./Assets.ts"
import { challenge, session, signIn, signOut } from "./SignIn.ts"

export * from "./Account.ts"
export * from "./Assets.ts"
export * from "./SignIn.ts"

/** @category routes */
export const routes: ReadonlyArray<
  Route.Route<Auth | AuthStore | CreditLedger.CreditLedger | KeyCaps.KeyCaps | SessionRevocations.SessionRevocations | ServiceInfo>
> = [
  page,
  script,
  stylesheet,
  challenge,
  signIn,
  session,
  signOut,
  account,
  listKeys,
  createKey,
  changeKey,
  revokeKey,
  usage
]
