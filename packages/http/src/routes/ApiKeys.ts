/**
 * Key management for ADMIN keys: `POST /api_keys` mints a key for the caller's account (the secret
 * is in this response and nowhere else, ever), `GET /api_keys` lists the account's keys as
 * metadata, `GET /api_keys/:id` shows one, `PATCH /api_keys` changes a key's description, expiry,
 * spend cap and restrictions, `POST /api_keys/:id/reroll` issues a new secret for a key (the old
 * one valid for the grace period asked), `DELETE /api_keys?id=...` revokes one, effective at once
 * on every instance sharing the store. No credentials or bad ones are a 401; a wallet or an
 * INFERENCE key is a 403; a key of another account is a 404. A key never mints a tier above its
 * own, so an account cannot raise its own limits.
 *
 * **Details**
 *
 * A key's spend cap (`KeyCaps`) has the published reference's shapes: `consumptionLimit: {usd}` and
 * `limitPeriod` (`EPOCH`, a UTC day, the default; `MONTH`; `LIFETIME`) in requests,
 * `consumptionLimits`, `limitPeriod` and, for a capped key, `currentPeriodUsage: {usd}` in the
 * metadata.
 *
 * @since 0.1.0
 */
import { AuditLog, type Auth as AuthModels, Errors, KeyCaps, KeyRestrictions, Money, type Principal } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Clock, Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

const PATH = "/api/v1/api_keys"

const IsoTimestamp = Schema.String.check(
  Schema.makeFilter((text: string) =>
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text))
      ? true
      : "must be an ISO 8601 timestamp with a time zone"
  )
)

/** The largest cap: nano-USD are safe integers. */
const MAX_CAP_USD = Math.floor(Money.MAX / Money.NANO_PER_USD)

/** @category schemas */
export const ConsumptionLimit = Schema.Struct({
  usd: Schema.optionalKey(Schema.NullOr(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(MAX_CAP_USD))))
})

/** @category schemas */
export const LimitPeriod = Schema.Literals(KeyCaps.LIMIT_PERIODS)

/** @category schemas */
export const CreateRequest = Schema.Struct({
  apiKeyType: Schema.Literals(["INFERENCE", "ADMIN"]),
  description: Schema.String.check(Schema.isMaxLength(256)),
  tier: Schema.optionalKey(Schema.Literals(["default", "partner"])),
  expiresAt: Schema.optionalKey(IsoTimestamp),
  consumptionLimit: Schema.optionalKey(ConsumptionLimit),
  limitPeriod: Schema.optionalKey(LimitPeriod),
  restrictions: Schema.optionalKey(KeyRestrictions.Restrictions)
})

const IsoDate = Schema.String.check(
  Schema.makeFilter((text: string) =>
    /^\d{4}-\d{2}-\d{2}$/.test(text) && !Number.isNaN(Date.parse(text)) ? true : "must be a date, YYYY-MM-DD"
  )
)

/** @category schemas */
export const UpdateRequest = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)),
  description: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(256))),
  /** A timestamp, or a date (its 00:00 UTC); `""` or `null` removes the expiry. */
  expiresAt: Schema.optionalKey(Schema.NullOr(Schema.Union([Schema.Literal(""), IsoTimestamp, IsoDate]))),
  consumptionLimit: Schema.optionalKey(ConsumptionLimit),
  limitPeriod: Schema.optionalKey(LimitPeriod),
  /** Replaces the key's restrictions; `null` or `{}` lifts them. */
  restrictions: Schema.optionalKey(Schema.NullOr(KeyRestrictions.Restrictions))
})

/** The longest grace period a reroll may give the secrets it replaces: 30 days. */
const MAX_GRACE_SECONDS = 30 * 24 * 3600

/** @category schemas */
export const RerollRequest = Schema.Struct({
  /** How long the key's earlier secrets stay valid, in seconds; 0 (the default): not at all. */
  graceSeconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_GRACE_SECONDS })))
})

/** @category schemas */
export const RevokeQuery = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
})

/**
 * A key's metadata as the key endpoints (and the portal's) answer it, with its spend cap.
 *
 * @category views
 */
export const metadata = (record: AuthModels.ApiKeyRecord, spend: KeyCaps.KeySpend | undefined) => ({
  id: record.id,
  apiKeyType: record.type,
  description: record.description,
  tier: record.tier,
  createdAt: record.createdAt.toISOString(),
  expiresAt: record.expiresAt?.toISOString() ?? null,
  revokedAt: record.revokedAt?.toISOString() ?? null,
  consumptionLimits: { usd: spend === undefined ? null : Money.toUsdNumber(spend.cap.usd) },
  limitPeriod: spend?.cap.period ?? "EPOCH",
  restrictions: record.restrictions ?? null,
  ...(spend === undefined ? {} : { currentPeriodUsage: { usd: Money.formatUsd(spend.spent) } })
})

/** One key's cap and its spend in the period of `now`; `undefined` for a key without a cap. */
const spendOf = (caps: KeyCaps.KeyCaps["Service"], accountId: string, keyId: string, now: number) =>
  Effect.map(caps.read(accountId, [keyId], now), (spend) => spend.get(keyId))

/**
 * The cap a request asks for: `undefined` to leave it, `null` to remove it. A period alone changes
 * the period of the key's cap, which must exist.
 */
const requestedCap = (
  body: { readonly consumptionLimit?: typeof ConsumptionLimit.Type; readonly limitPeriod?: KeyCaps.LimitPeriod },
  current: KeyCaps.SpendCap | undefined
): Effect.Effect<KeyCaps.SpendCap | null | undefined, Errors.InvalidRequest> => {
  const usd = body.consumptionLimit?.usd
  if (usd === null) return Effect.succeed(null)
  const period = body.limitPeriod ?? current?.period ?? "EPOCH"
  if (usd !== undefined) return Effect.succeed({ usd: Money.unsafeNano(Math.round(usd * Money.NANO_PER_USD)), period })
  if (body.limitPeriod === undefined) return Effect.succeed(undefined)
  if (current === undefined) {
    return Effect.fail(
      new Errors.InvalidRequest({
        message: "limitPeriod applies to a consumption limit: set consumptionLimit.usd too",
        details: Errors.fieldErrors([{ path: ["limitPeriod"], message: "needs consumptionLimit.usd on a key without one" }])
      })
    )
  }
  return Effect.succeed({ usd: current.usd, period })
}

/**
 * The spend-cap change of a request that makes or updates a key (`consumptionLimit`,
 * `limitPeriod`), checked before anything is written: a refused change leaves the key as it was,
 * and a key is not made at all. It answers the effect that stores the change on the key (for a
 * key being made, once it exists, so no call of it is ever uncapped) and reads the key's spend
 * after it: kept when the amount changes, afresh when the period does. `keyId` is the key updated;
 * absent, a key being made, which has no cap yet.
 *
 * @category caps
 */
export const capChange = (
  caps: KeyCaps.KeyCaps["Service"],
  accountId: string,
  keyId: string | undefined,
  body: { readonly consumptionLimit?: typeof ConsumptionLimit.Type; readonly limitPeriod?: KeyCaps.LimitPeriod },
  now: number
) =>
  Effect.gen(function*() {
    const current = keyId === undefined ? undefined : (yield* spendOf(caps, accountId, keyId, now))?.cap
    const cap = yield* requestedCap(body, current)
    return (id: string) =>
      Effect.gen(function*() {
        if (cap !== undefined) yield* caps.set(accountId, id, cap ?? undefined)
        return yield* spendOf(caps, accountId, id, now)
      })
  })

/**
 * A key route: `handler` answers a request made with an ADMIN key (its principal), with the key
 * and cap stores and the audit log, read once with the route.
 */
const adminRoute = (
  method: Route.Method,
  path: `/${string}`,
  handler: (
    principal: Principal.ApiKeyPrincipal,
    stores: {
      readonly auth: Auth["Service"]
      readonly caps: KeyCaps.KeyCaps["Service"]
      /** Records an entry in the audit log, where the server keeps one. */
      readonly log: (entry: AuditLog.NewEntry) => Effect.Effect<void, Errors.ServiceUnavailable>
    }
  ) => Route.Handler,
  docs: Route.Docs
) =>
  Route.make(
    method,
    path,
    Effect.gen(function*() {
      const audit = Option.getOrUndefined(yield* Effect.serviceOption(AuditLog.AuditLog))
      const stores = { auth: yield* Auth, caps: yield* KeyCaps.KeyCaps, log: audit?.append ?? (() => Effect.void) }
      return Effect.flatMap(Authenticate.requireAdmin(stores.auth), (principal) => handler(principal, stores))
    }),
    docs
  )

/** The audit log's name for the ADMIN key that acts. */
const actorOf = (principal: Principal.ApiKeyPrincipal): AuditLog.Actor => `key:${principal.keyId}`

/** What the audit log records of a cap: its amount in USD and period, or `null` when removed. */
const capDetails = (spend: KeyCaps.KeySpend | undefined) =>
  spend === undefined ? null : { usd: Money.formatUsd(spend.cap.usd), period: spend.cap.period }

/** @category routes */
export const create = adminRoute(
  "POST",
  PATH,
  (principal, { auth, caps, log }) =>
    Effect.gen(function*() {
      const body = yield* RequestBody.schema(CreateRequest)
      if (body.tier === "partner" && principal.tier !== "partner") {
        return yield* new Errors.Forbidden({ message: "A key cannot mint a tier above its own" })
      }
      const storeCap = yield* capChange(caps, principal.accountId, undefined, body, yield* Clock.currentTimeMillis)
      const { key, record } = yield* auth.createKey({
        accountId: principal.accountId,
        type: body.apiKeyType,
        tier: body.tier ?? principal.tier,
        description: body.description,
        ...(body.expiresAt === undefined ? {} : { expiresAt: new Date(body.expiresAt) }),
        ...(body.restrictions === undefined ? {} : { restrictions: body.restrictions })
      })
      const spend = yield* storeCap(record.id)
      yield* log({
        actor: actorOf(principal),
        action: "key.minted",
        accountId: record.accountId,
        details: {
          keyId: record.id,
          type: record.type,
          tier: record.tier,
          cap: capDetails(spend),
          restrictions: record.restrictions ?? null
        }
      })
      return HttpServerResponse.jsonUnsafe({ ...metadata(record, spend), apiKey: key }, {
        status: 201,
        headers: { "cache-control": "no-store" }
      })
    }),
  {
    summary: "Create an API key",
    description:
      "ADMIN key. The key is returned once, in this response, and never again. `consumptionLimit.usd` caps what the key may spend per `limitPeriod` (`EPOCH`: UTC day, the default; `MONTH`; `LIFETIME`); a call the cap cannot fit is refused with 402 `SPEND_CAP_REACHED`. `restrictions` limits what the key may call (`models`, `networks`, `methods`, `operations`, `ips`): a call outside them is a 403 naming the restriction.",
    tags: ["API keys"],
    security: "admin",
    request: { contentType: "application/json", schema: CreateRequest },
    responses: {
      201: { description: "The new key (`apiKey`) and its metadata" },
      400: { description: "Invalid body", schema: Errors.DetailedError }
    }
  }
)

/** @category routes */
export const list = adminRoute(
  "GET",
  PATH,
  (principal, { auth, caps }) =>
    Effect.gen(function*() {
      const keys = yield* auth.listKeys(principal.accountId)
      const spend = yield* caps.read(principal.accountId, keys.map((key) => key.id), yield* Clock.currentTimeMillis)
      return HttpServerResponse.jsonUnsafe({ data: keys.map((key) => metadata(key, spend.get(key.id))) })
    }),
  {
    summary: "List the account's API keys",
    description:
      "ADMIN key. Metadata only: the secret of a key is never shown again. A capped key shows its spend in the current period (`currentPeriodUsage`).",
    tags: ["API keys"],
    security: "admin",
    responses: { 200: { description: "The keys of the caller's account" } }
  }
)

/** @category routes */
export const revoke = adminRoute(
  "DELETE",
  PATH,
  (principal, { auth, log }) =>
    Effect.gen(function*() {
      const query = yield* RequestQuery.schema(RevokeQuery)
      yield* auth.revokeKey(principal.accountId, query.id)
      yield* log({ actor: actorOf(principal), action: "key.revoked", accountId: principal.accountId, details: { keyId: query.id } })
      return HttpServerResponse.jsonUnsafe({ id: query.id, revoked: true })
    }),
  {
    summary: "Revoke an API key",
    description: "ADMIN key. Effective at once on every instance.",
    tags: ["API keys"],
    security: "admin",
    query: RevokeQuery,
    responses: {
      200: { description: "The key is revoked" },
      400: { description: "Missing id", schema: Errors.DetailedError },
      404: { description: "No key with this id in the account", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const show = adminRoute(
  "GET",
  `${PATH}/:id`,
  (principal, { auth, caps }) =>
    Effect.gen(function*() {
      const params = yield* Route.params
      const record = yield* auth.getKey(principal.accountId, params["id"] ?? "")
      const spend = yield* spendOf(caps, principal.accountId, record.id, yield* Clock.currentTimeMillis)
      return HttpServerResponse.jsonUnsafe({ data: metadata(record, spend) }, { headers: { "cache-control": "no-store" } })
    }),
  {
    summary: "Show an API key",
    description: "ADMIN key. One key of the caller's account, with its spend cap and, when capped, its spend in the current period.",
    tags: ["API keys"],
    security: "admin",
    responses: {
      200: { description: "The key's metadata (`data`)" },
      404: { description: "No key with this id in the account", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const update = adminRoute(
  "PATCH",
  PATH,
  (principal, { auth, caps, log }) =>
    Effect.gen(function*() {
      const body = yield* RequestBody.schema(UpdateRequest)
      const { accountId } = principal
      const found = yield* auth.getKey(accountId, body.id)
      const storeCap = yield* capChange(caps, accountId, found.id, body, yield* Clock.currentTimeMillis)
      // The expiry first: it is the one change that can still be refused (a past time), before anything is written.
      const expiring = body.expiresAt === undefined
        ? found
        : yield* auth.setKeyExpiry(
          accountId,
          found.id,
          body.expiresAt === null || body.expiresAt === "" ? undefined : new Date(body.expiresAt)
        )
      const described = body.description === undefined ? expiring : yield* auth.describeKey(accountId, found.id, body.description)
      const record = body.restrictions === undefined
        ? described
        : yield* auth.restrictKey(accountId, found.id, body.restrictions ?? undefined)
      const spend = yield* storeCap(found.id)
      const logged = { actor: actorOf(principal), accountId }
      if (body.consumptionLimit !== undefined || body.limitPeriod !== undefined) {
        yield* log({ ...logged, action: "key.capped", details: { keyId: found.id, cap: capDetails(spend) } })
      }
      if (body.restrictions !== undefined) {
        yield* log({ ...logged, action: "key.restricted", details: { keyId: found.id, restrictions: record.restrictions ?? null } })
      }
      return HttpServerResponse.jsonUnsafe({ data: metadata(record, spend), success: true })
    }),
  {
    summary: "Update an API key",
    description:
      "ADMIN key. Changes a key's `description`, `expiresAt` (`\"\"` or `null` removes it; effective on the next request), `consumptionLimit` (`{\"usd\": null}` removes the cap), `limitPeriod` and `restrictions` (replaced whole; `null` lifts them). The spend of the current period is kept when the cap changes, and starts afresh when the period does.",
    tags: ["API keys"],
    security: "admin",
    request: { contentType: "application/json", schema: UpdateRequest },
    responses: {
      200: { description: "The key's metadata (`data`)" },
      400: { description: "Invalid body", schema: Errors.DetailedError },
      404: { description: "No key with this id in the account", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const reroll = adminRoute(
  "POST",
  `${PATH}/:id/reroll`,
  (principal, { auth, caps, log }) =>
    Effect.gen(function*() {
      const params = yield* Route.params
      const body = yield* RequestBody.schema(RerollRequest)
      const graceSeconds = body.graceSeconds ?? 0
      const { key, record } = yield* auth.rerollKey(principal.accountId, params["id"] ?? "", graceSeconds * 1000)
      yield* log({
        actor: actorOf(principal),
        action: "key.rerolled",
        accountId: record.accountId,
        details: { keyId: record.id, graceSeconds, kid: record.kid }
      })
      const spend = yield* spendOf(caps, principal.accountId, record.id, yield* Clock.currentTimeMillis)
      return HttpServerResponse.jsonUnsafe({ ...metadata(record, spend), apiKey: key }, { headers: { "cache-control": "no-store" } })
    }),
  {
    summary: "Reroll an API key",
    description:
      "ADMIN key. Issues a new secret for the key, returned once in this response: the same id, description, type, tier, spend cap and restrictions. The secrets issued before stay valid for `graceSeconds` more (0, the default: refused from now on). Of rerolls of one key sent at the same time, one issues the new secret and the others are 409 and issue nothing.",
    tags: ["API keys"],
    security: "admin",
    request: { contentType: "application/json", schema: RerollRequest },
    responses: {
      200: { description: "The key's new secret (`apiKey`) and its metadata" },
      400: { description: "Invalid body, or a revoked key", schema: Errors.DetailedError },
      404: { description: "No key with this id in the account", schema: Errors.StandardError },
      409: { description: "Another reroll of the key was stored at the same time: its secret stands", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [create, list, show, update, revoke, reroll] as const
