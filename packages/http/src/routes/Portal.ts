/**
 * The self-service portal: `GET /api-keys`, the page every 402 links to as `getKey`, where a
 * customer signs in with a wallet (sign-in-with-x: an injected EIP-1193 wallet on Base, a Solana
 * Wallet Standard wallet) or an ADMIN key, sees the balance, the staked-token allowance and the
 * top-ups, tops up through x402 from the browser, makes and revokes INFERENCE keys, sets or removes
 * each key's spend cap and restrictions and watches the spend of the last 30 days.
 *
 * The page is hand-written HTML, CSS and JavaScript in `src/portal/`, served as they are (no build
 * step, nothing from another host) under a Content-Security-Policy that allows only this server's
 * own scripts and styles. It reads and changes the account through the `/api/v1/portal/*` routes
 * here, behind the session cookie of `PortalSession`; every state change also needs the session's
 * CSRF token. They call the same services as the key and billing endpoints (`Auth`, `KeyCaps`, the
 * `CreditLedger` journal and usage entries) and answer keys as `/api_keys` does; the top-up itself
 * is the x402 endpoint's.
 *
 * @since 0.1.0
 */
import {
  AuditLog,
  CreditLedger,
  Errors,
  KeyCaps,
  KeyRestrictions,
  Money,
  Principal,
  SessionRevocations,
  Siwx,
  Staking,
  Usage,
  UsageAnalytics,
  X402
} from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { AuthStore } from "@tollgate/core/AuthStore"
import { Clock, Effect, Option, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Fs from "node:fs"
import * as Pages from "../Pages.ts"
import * as PortalSession from "../PortalSession.ts"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"
import { ServiceInfo } from "../ServiceInfo.ts"
import * as ApiKeys from "./ApiKeys.ts"

const API = "/api/v1/portal"

/** How far back the usage chart and the transactions reach. @category constants */
export const WINDOW_DAYS = 30

/** Calls listed in the usage table, newest first. @category constants */
export const RECENT_CALLS = 50

/** Top-ups, grants and refunds listed, newest first. @category constants */
export const RECENT_TRANSACTIONS = 20

/** The most entries read for one answer: the ledger's default memory cap per account. */
const MAX_ENTRIES = CreditLedger.DEFAULT_MAX_ENTRIES

/**
 * What the page and its assets may do: scripts and styles of this server only, requests to it
 * only, no frames, no plugins, no inline anything.
 *
 * @category constants
 */
export const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const pageHeaders = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

const noStore = { "cache-control": "no-store, private" }

/** The assets, from `src/portal/` (shipped in the package beside `dist/`, so both find it). */
const asset = (name: string) => Fs.readFileSync(new URL(`../../src/portal/${name}`, import.meta.url), "utf8")

const unauthenticated = new Errors.Unauthenticated({ message: "Sign in to the portal first (the session may have ended)" })

const assetRoute = (name: string, contentType: string) =>
  Route.make("GET", `/portal/${name}`, Effect.sync(() => {
    const body = asset(name)
    return Effect.sync(() => HttpServerResponse.text(body, { contentType, headers: pageHeaders }))
  }), {
    summary: `Portal asset ${name}`,
    tags: ["Portal"],
    security: "public",
    responses: { 200: { description: "The asset", contentType, schema: Schema.String } }
  })

/**
 * `GET /api-keys`: the portal page, with this server's origin in its terminal example.
 *
 * @category routes
 */
export const page = Route.make(
  "GET",
  Pages.apiKeysPath,
  Effect.map(ServiceInfo, (info) => {
    const html = asset("index.html").replaceAll("{{origin}}", Pages.escape(info.publicOrigin))
    return Effect.sync(() => HttpServerResponse.html(html).pipe(HttpServerResponse.setHeaders(pageHeaders)))
  }),
  {
    summary: "Get an API key: the self-service portal",
    description: "Sign in with a wallet or an ADMIN key; see the balance, top up, make keys, watch usage.",
    tags: ["Portal"],
    security: "public",
    responses: { 200: { description: "HTML page", contentType: "text/html", schema: Schema.String } }
  }
)

/** @category routes */
export const script = assetRoute("portal.js", "text/javascript; charset=utf-8")

/** @category routes */
export const stylesheet = assetRoute("portal.css", "text/css; charset=utf-8")

/**
 * The session check of a route behind the session, built with the route (the stores and the
 * session key are read once): the session of the request, sealed by this server, not ended nor
 * signed out, and for an ADMIN key, the key still standing. A state change must also carry the
 * session's CSRF token.
 */
const sessionCheck = Effect.gen(function*() {
  const store = yield* AuthStore
  const revocations = yield* SessionRevocations.SessionRevocations
  const key = yield* PortalSession.SessionKey
  return (change: boolean) => Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const now = yield* Clock.currentTimeMillis
    const cookie = PortalSession.fromCookieHeader(request.headers["cookie"])
    const session = cookie === undefined ? undefined : PortalSession.open(key, cookie, now)
    if (session === undefined || (yield* revocations.isRevoked(session.id))) return yield* unauthenticated
    if (session.keyId !== undefined) {
      const status = yield* store.keyStatus(session.accountId, session.keyId)
      if (!status.accountExists || status.revoked) return yield* unauthenticated
    }
    if (change && !PortalSession.csrfMatches(session, request.headers[PortalSession.csrfHeader])) {
      return yield* new Errors.Forbidden({ message: `A change needs the session's CSRF token in ${PortalSession.csrfHeader}` })
    }
    return session
  })
})

/**
 * A route behind the session: `handler`, built once with the route like any route's, answers a
 * request whose session passed `sessionCheck` (with the CSRF token when the route `changes` state).
 */
const sessionRoute = <R>(
  method: Route.Method,
  path: `/${string}`,
  changes: boolean,
  handler: Effect.Effect<(session: PortalSession.Session) => Route.Handler, never, R>,
  docs: Route.Docs
) =>
  Route.make(method, path, Effect.gen(function*() {
    const requireSession = yield* sessionCheck
    const handle = yield* handler
    return Effect.flatMap(requireSession(changes), handle)
  }), docs)

const sessionView = (session: PortalSession.Session) => ({
  accountId: session.accountId,
  via: session.via,
  wallet: session.wallet ?? null,
  csrfToken: session.csrfToken,
  expiresAt: new Date(session.expiresAt).toISOString()
})

/** @category schemas */
export const ChallengeQuery = Schema.Struct({
  family: Schema.Literals(["evm", "solana"]),
  address: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64))
})

/**
 * `GET /api/v1/portal/challenge`: the sign-in message for a wallet to sign, formatted here from a
 * fresh challenge so the page needs no EIP-55 or SIWS formatting of its own.
 *
 * @category routes
 */
export const challenge = Route.make(
  "GET",
  `${API}/challenge`,
  Effect.gen(function*() {
    const auth = yield* Auth
    return Effect.gen(function*() {
      const query = yield* RequestQuery.schema(ChallengeQuery)
      const wallet = X402.parseWalletAddress(query.address)
      if (Option.isNone(wallet) || wallet.value.family !== query.family) {
        return yield* Errors.invalidField("address", `Not ${query.family === "evm" ? "an EVM" : "a Solana"} address`)
      }
      const fresh = yield* auth.siwxChallenge
      const chain = fresh.supportedChains.find((candidate) => X402.familyOf(candidate.chainId) === query.family)
      if (chain === undefined) return yield* new Errors.InvalidRequest({ message: `This server accepts no ${query.family} sign-in` })
      const message = yield* Effect.fromResult(Siwx.format(query.family, { ...fresh.info, address: wallet.value.address, chainId: chain.chainId })).pipe(
        Effect.mapError((error) => new Errors.InvalidRequest({ message: error.reason }))
      )
      return HttpServerResponse.jsonUnsafe({ message, chainId: chain.chainId, expiresAt: fresh.info.expirationTime }, { headers: noStore })
    })
  }),
  {
    summary: "A sign-in message for a wallet",
    description: "The SIWX text (EIP-4361 for EVM, SIWS for Solana) the wallet signs to open a portal session.",
    tags: ["Portal"],
    security: "public",
    query: ChallengeQuery,
    responses: {
      200: { description: "`message` to sign, its `chainId` and when it expires" },
      400: { description: "Not an address of the family", schema: Errors.DetailedError }
    }
  }
)

/** @category schemas */
export const SignInRequest = Schema.Union([
  Schema.Struct({
    wallet: Schema.Struct({
      address: Schema.String.check(Schema.isMaxLength(64)),
      message: Schema.String.check(Schema.isMaxLength(4096)),
      signature: Schema.String.check(Schema.isMaxLength(4096)),
      chainId: Schema.String.check(Schema.isMaxLength(128))
    })
  }),
  Schema.Struct({ apiKey: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096)) })
])

/**
 * `POST /api/v1/portal/session`: signs in with a signed message or an ADMIN key, through `Auth`
 * as a paid call would (a wallet's nonce is spent), and sets the session cookie.
 *
 * @category routes
 */
export const signIn = Route.make(
  "POST",
  `${API}/session`,
  Effect.gen(function*() {
    const auth = yield* Auth
    const info = yield* ServiceInfo
    const secure = info.publicOrigin.startsWith("https:")
    const key = yield* PortalSession.SessionKey
    return Effect.gen(function*() {
      // A cross-site form can post a JSON-looking body as text/plain but never as application/json
      // (that needs a CORS preflight, which nothing here answers): no signing in from another site.
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!/^application\/json\s*(;|$)/iu.test(request.headers["content-type"] ?? "")) {
        return yield* new Errors.InvalidRequest({ message: "Sign-in takes a JSON body (content-type: application/json)" })
      }
      const body = yield* RequestBody.schema(SignInRequest)
      const headers = "wallet" in body
        ? {
          "sign-in-with-x": Buffer.from(JSON.stringify({
            ...body.wallet,
            type: X402.familyOf(body.wallet.chainId) === "solana" ? "ed25519" : "eip191"
          })).toString("base64")
        }
        : { authorization: `Bearer ${body.apiKey}` }
      const principal = yield* auth.authenticate(headers)
      if (Option.isNone(principal)) return yield* unauthenticated
      if (principal.value._tag === "ApiKey") yield* auth.requireAdmin(principal.value)
      const now = yield* Clock.currentTimeMillis
      const session = PortalSession.start(principal.value, now)
      return HttpServerResponse.jsonUnsafe(sessionView(session), {
        headers: {
          ...noStore,
          "set-cookie": PortalSession.setCookie(PortalSession.seal(key, session), { secure })
        }
      })
    })
  }),
  {
    summary: "Sign in to the portal",
    description: "`{wallet: {address, message, signature, chainId}}` (the message of /portal/challenge, signed) or " +
      "`{apiKey}` (an ADMIN key). Sets the session cookie; the answer carries the CSRF token for changes.",
    tags: ["Portal"],
    security: "public",
    request: { contentType: "application/json", schema: SignInRequest },
    responses: {
      200: { description: "The session: account, how it signed in, `csrfToken`, `expiresAt`", headers: ["set-cookie"] },
      400: { description: "Invalid body", schema: Errors.DetailedError },
      401: { description: "The signature or key is not valid", schema: Errors.StandardError },
      403: { description: "Not an ADMIN key", schema: Errors.StandardError }
    }
  }
)

const sessionDocs = (summary: string, description: string, responses: Route.Docs["responses"]): Route.Docs => ({
  summary,
  description: `Portal session cookie${description}`,
  tags: ["Portal"],
  security: "public",
  responses: { ...responses, 401: { description: "No portal session, or it ended", schema: Errors.StandardError } }
})

const CHANGE = ` and the session's CSRF token in \`${PortalSession.csrfHeader}\`.`

/**
 * `GET /api/v1/portal/session`: the session, or 204 when there is none. Every visit of a signed-out
 * browser asks this, so it is no failed attempt for the abuse guard (a 401 would be one).
 *
 * @category routes
 */
export const session = Route.make(
  "GET",
  `${API}/session`,
  Effect.gen(function*() {
    const requireSession = yield* sessionCheck
    return requireSession(false).pipe(
      Effect.map((current) => HttpServerResponse.jsonUnsafe(sessionView(current), { headers: noStore })),
      Effect.catchTag("Unauthenticated", () => Effect.succeed(HttpServerResponse.empty({ status: 204, headers: noStore })))
    )
  }),
  {
    summary: "The portal session",
    description: "Portal session cookie, when there is one.",
    tags: ["Portal"],
    security: "public",
    responses: {
      200: { description: "The session, as sign-in answered it" },
      204: { description: "No session: never signed in, signed out, or ended" }
    }
  }
)

/**
 * `DELETE /api/v1/portal/session`: ends the session on the server (its id is revoked until the
 * session would have ended) and clears the cookie, so a copy of the cookie is refused as well.
 *
 * @category routes
 */
export const signOut = sessionRoute(
  "DELETE",
  `${API}/session`,
  true,
  Effect.gen(function*() {
    const revocations = yield* SessionRevocations.SessionRevocations
    const info = yield* ServiceInfo
    const secure = info.publicOrigin.startsWith("https:")
    return (current) =>
      Effect.as(
        revocations.revoke(current.id, current.expiresAt),
        HttpServerResponse.jsonUnsafe({ signedOut: true }, {
          headers: { ...noStore, "set-cookie": PortalSession.setCookie(undefined, { secure }) }
        })
      )
  }),
  sessionDocs("Sign out of the portal", CHANGE, { 200: { description: "The cookie is cleared" } })
)

/** The credits; a stake is shown as the allowance it gives, not as a line. */
const transactionKinds: ReadonlySet<CreditLedger.EntryKind> = new Set(["topup", "grant", "refund"])

/**
 * The journal entries since `since`, oldest first, at most `MAX_ENTRIES`. Journal ids start with
 * their millisecond, so a window starts at an id.
 */
const journalSince = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, since: number) =>
  CreditLedger.journalStream(ledger, accountId, `${since}-0`).pipe(Stream.take(MAX_ENTRIES), Stream.runCollect)

/**
 * The latest credits of the window, newest first. The journal reads forward only and mostly holds
 * the holds and captures of calls, so the last day is read first: a busy account whose 30 days
 * exceed what one read takes still sees today's top-ups; the whole window is read only when the
 * day has too few.
 */
const recentCredits = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, now: number) =>
  Effect.gen(function*() {
    const credits = new Map<string, CreditLedger.JournalEntry>()
    for (const days of [1, WINDOW_DAYS]) {
      for (const entry of yield* journalSince(ledger, accountId, now - days * CreditLedger.DAY_MS)) {
        if (transactionKinds.has(entry.kind)) credits.set(entry.id, entry)
      }
      if (credits.size >= RECENT_TRANSACTIONS) break
    }
    return [...credits.values()].sort((a, b) => CreditLedger.compareIds(b.id, a.id)).slice(0, RECENT_TRANSACTIONS)
  })

/**
 * `GET /api/v1/portal/account`: the balance, today's staked-token allowance (read from chain first
 * for a wallet, as a paid call would) and the credits of the last 30 days.
 *
 * @category routes
 */
export const account = sessionRoute(
  "GET",
  `${API}/account`,
  false,
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    const staking = yield* Staking.Staking
    return (current) => Effect.gen(function*() {
      if (current.wallet !== undefined) {
        yield* staking.refresh(new Principal.WalletPrincipal({ accountId: current.accountId, ...current.wallet }))
      }
      const now = yield* Clock.currentTimeMillis
      const balance = yield* ledger.balance(current.accountId)
      const transactions = yield* recentCredits(ledger, current.accountId, now)
      return HttpServerResponse.jsonUnsafe({
        accountId: current.accountId,
        balanceUsd: Money.formatUsd(balance.usd),
        availableUsd: Money.formatUsd(balance.availableUsd),
        stakedTokens: balance.stakedTokens,
        allowanceUsd: Money.formatUsd(balance.availableAllowance),
        transactions: transactions.map((entry) => ({
          id: entry.id,
          timestamp: new Date(entry.timestamp).toISOString(),
          kind: entry.kind,
          amountUsd: Money.formatUsd(entry.delta),
          currency: entry.currency,
          reference: entry.reference
        }))
      }, { headers: noStore })
    })
  }),
  sessionDocs("The account's balance and credits", ".", { 200: { description: "Balance, allowance and the last credits" } })
)

/** @category routes */
export const listKeys = sessionRoute(
  "GET",
  `${API}/keys`,
  false,
  Effect.gen(function*() {
    const auth = yield* Auth
    const caps = yield* KeyCaps.KeyCaps
    return (current) => Effect.gen(function*() {
      const keys = yield* auth.listKeys(current.accountId)
      const spend = yield* caps.read(current.accountId, keys.map((key) => key.id), yield* Clock.currentTimeMillis)
      return HttpServerResponse.jsonUnsafe({ data: keys.map((key) => ApiKeys.metadata(key, spend.get(key.id))) }, { headers: noStore })
    })
  }),
  sessionDocs("The account's API keys", ".", {
    200: { description: "Metadata of every key of the account, as `GET /api_keys` answers it: a capped key with its spend in the current period" }
  })
)

/** @category schemas */
export const CreateKeyRequest = Schema.Struct({
  description: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))
})

/**
 * `POST /api/v1/portal/keys`: an INFERENCE key for the session's account, shown once.
 *
 * @category routes
 */
export const createKey = sessionRoute(
  "POST",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* CreditLedger.CreditLedger
    return (current) => Effect.gen(function*() {
      const body = yield* RequestBody.schema(CreateKeyRequest)
      // A wallet's account is recorded with its first key (sign-in stores nothing), so only a wallet
      // that holds credit may make one: wallets that cost nothing to create leave no state behind.
      if (Principal.isWalletAccountId(current.accountId) && (yield* ledger.balance(current.accountId)).usd <= 0) {
        return yield* new Errors.InsufficientBalance({ message: "Top up this wallet before creating a key" })
      }
      const created = yield* auth.createKey({
        accountId: current.accountId,
        type: "INFERENCE",
        tier: current.tier ?? "default",
        description: body.description
      })
      return HttpServerResponse.jsonUnsafe({ ...ApiKeys.metadata(created.record, undefined), apiKey: created.key }, { status: 201, headers: noStore })
    })
  }),
  {
    ...sessionDocs("Create an INFERENCE key", CHANGE, {
      201: { description: "The new key (`apiKey`), shown this once, and its metadata" },
      400: { description: "Invalid body", schema: Errors.DetailedError },
      402: { description: "A wallet without credit: top up first", schema: Errors.StandardError },
      403: { description: "No CSRF token", schema: Errors.StandardError }
    }),
    request: { contentType: "application/json", schema: CreateKeyRequest }
  }
)

/** @category schemas */
export const ChangeKeyRequest = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  consumptionLimit: Schema.optionalKey(ApiKeys.ConsumptionLimit),
  limitPeriod: Schema.optionalKey(ApiKeys.LimitPeriod),
  /** Replaces the key's restrictions; `null` or `{}` lifts them. */
  restrictions: Schema.optionalKey(Schema.NullOr(KeyRestrictions.Restrictions))
})

/**
 * Who changed a key through the portal, as the audit log names them: the ADMIN key that signed in,
 * or the wallet, by its account id (`wallet:<family>:<address>`).
 */
const actorOf = (session: PortalSession.Session): AuditLog.Actor =>
  session.keyId !== undefined ? `key:${session.keyId}` : `wallet:${session.accountId.slice("wallet:".length)}`

/**
 * `PATCH /api/v1/portal/keys`: sets or removes a key's spend cap and its restrictions, with the
 * body and the service calls of `PATCH /api_keys` (those fields only): the period's spend is kept
 * when the amount changes and starts afresh when the period does; the restrictions are replaced
 * whole and recorded in the audit log.
 *
 * @category routes
 */
export const changeKey = sessionRoute(
  "PATCH",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    const caps = yield* KeyCaps.KeyCaps
    const audit = Option.getOrUndefined(yield* Effect.serviceOption(AuditLog.AuditLog))
    return (current) => Effect.gen(function*() {
      const { accountId } = current
      const body = yield* RequestBody.schema(ChangeKeyRequest)
      const found = yield* auth.getKey(accountId, body.id)
      const storeCap = yield* ApiKeys.capChange(caps, accountId, found.id, body, yield* Clock.currentTimeMillis)
      const record = body.restrictions === undefined ? found : yield* auth.restrictKey(accountId, found.id, body.restrictions ?? undefined)
      const spend = yield* storeCap(found.id)
      if (body.restrictions !== undefined && audit !== undefined) {
        yield* audit.append({
          actor: actorOf(current),
          action: "key.restricted",
          accountId,
          details: { keyId: found.id, restrictions: record.restrictions ?? null }
        })
      }
      return HttpServerResponse.jsonUnsafe(ApiKeys.metadata(record, spend), { headers: noStore })
    })
  }),
  {
    ...sessionDocs("Set or remove a key's spend cap and restrictions", CHANGE, {
      200: { description: "The key's metadata with its cap (`consumptionLimits`, `limitPeriod`, `currentPeriodUsage`) and `restrictions`" },
      400: { description: "Invalid body, or a period for a key without a cap", schema: Errors.DetailedError },
      403: { description: "No CSRF token", schema: Errors.StandardError },
      404: { description: "No key with this id in the account", schema: Errors.StandardError }
    }),
    request: { contentType: "application/json", schema: ChangeKeyRequest }
  }
)

/** @category routes */
export const revokeKey = sessionRoute(
  "DELETE",
  `${API}/keys`,
  true,
  Effect.gen(function*() {
    const auth = yield* Auth
    return (current) => Effect.gen(function*() {
      const query = yield* RequestQuery.schema(Schema.Struct({ id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)) }))
      yield* auth.revokeKey(current.accountId, query.id)
      return HttpServerResponse.jsonUnsafe({ id: query.id, revoked: true }, { headers: noStore })
    })
  }),
  sessionDocs("Revoke a key of the account", CHANGE, {
    200: { description: "The key is revoked" },
    403: { description: "No CSRF token", schema: Errors.StandardError },
    404: { description: "No key with this id in the account", schema: Errors.StandardError }
  })
)

/**
 * The usage of the window, newest first, at most `MAX_ENTRIES`: the entries the billing reports
 * page through.
 */
const usageSince = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, from: number) =>
  CreditLedger.usageStream(ledger, accountId, { from, order: "desc" }).pipe(Stream.take(MAX_ENTRIES), Stream.runCollect)

const dateOf = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/**
 * Spend by UTC day and sku over the window, every day present (an empty one has no skus): the
 * usage analytics' tally of the window's entries.
 *
 * @category aggregation
 */
export const spendByDay = (entries: ReadonlyArray<CreditLedger.UsageEntry>, now: number) => {
  const firstDay = CreditLedger.dayOf(now) - (WINDOW_DAYS - 1)
  const lastDay = CreditLedger.dayOf(now)
  const { byDate, bySku, skuDays } = UsageAnalytics.tally(entries.filter((entry) => {
    const day = CreditLedger.dayOf(entry.timestamp)
    return day >= firstDay && day <= lastDay
  }))
  // The chart shows what a day cost, whichever balance paid it.
  const formatUsd = (total: UsageAnalytics.Total | undefined) => Money.formatUsd(Money.unsafeNano(total === undefined ? 0 : total.usd + total.diem))
  return {
    skus: [...bySku]
      .sort(([a, x], [b, y]) => y.usd + y.diem - (x.usd + x.diem) || a.localeCompare(b))
      .map(([sku, total]) => ({ sku, amountUsd: formatUsd(total) })),
    days: Array.from({ length: WINDOW_DAYS }, (_, index) => {
      const date = dateOf((firstDay + index) * CreditLedger.DAY_MS)
      return {
        date,
        amountUsd: formatUsd(byDate.get(date)),
        skus: [...skuDays.get(date) ?? []].map(([sku, total]) => ({ sku, amountUsd: formatUsd(total) }))
      }
    })
  }
}

/**
 * `GET /api/v1/portal/usage`: spend by day and sku over 30 days, and the latest calls as the
 * billing reports show them.
 *
 * @category routes
 */
export const usage = sessionRoute(
  "GET",
  `${API}/usage`,
  false,
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    return (current) => Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const from = (CreditLedger.dayOf(now) - (WINDOW_DAYS - 1)) * CreditLedger.DAY_MS
      const entries = yield* usageSince(ledger, current.accountId, from)
      return HttpServerResponse.jsonUnsafe({
        ...spendByDay(entries, now),
        recent: entries.slice(0, RECENT_CALLS).map(Usage.toWire)
      }, { headers: noStore })
    })
  }),
  sessionDocs("Spend by day and sku, and the latest calls", ".", {
    200: { description: "`days` (30, oldest first), `skus` by total, `recent` usage entries" }
  })
)

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
