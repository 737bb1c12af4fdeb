/**
 * Key management for ADMIN keys: `POST /api_keys` mints a key for the caller's account (the secret
 * is in this response and nowhere else, ever), `GET /api_keys` lists the account's keys as
 * metadata, `DELETE /api_keys?id=...` revokes one, effective at once on every instance sharing the
 * store. No credentials or bad ones are a 401; a wallet or an INFERENCE key is a 403. A key never
 * mints a tier above its own, so an account cannot raise its own limits.
 *
 * @since 0.1.0
 */
import { type Auth as AuthModels, Errors } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

const PATH = "/api/v1/api_keys"

const IsoTimestamp = Schema.String.check(Schema.makeFilter((text: string) =>
  /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text))
    ? true
    : "must be an ISO 8601 timestamp with a time zone"))

/** @category schemas */
export const CreateRequest = Schema.Struct({
  apiKeyType: Schema.Literals(["INFERENCE", "ADMIN"]),
  description: Schema.String.check(Schema.isMaxLength(256)),
  tier: Schema.optionalKey(Schema.Literals(["default", "partner"])),
  expiresAt: Schema.optionalKey(IsoTimestamp)
})

/** @category schemas */
export const RevokeQuery = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
})

const metadata = (record: AuthModels.ApiKeyRecord) => ({
  id: record.id,
  apiKeyType: record.type,
  description: record.description,
  tier: record.tier,
  createdAt: record.createdAt.toISOString(),
  expiresAt: record.expiresAt?.toISOString() ?? null,
  revokedAt: record.revokedAt?.toISOString() ?? null
})

/** @category routes */
export const create = Route.make(
  "POST",
  PATH,
  Effect.gen(function*() {
    const auth = yield* Auth
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const body = yield* RequestBody.schema(CreateRequest)
      if (body.tier === "partner" && principal.tier !== "partner") {
        return yield* new Errors.Forbidden({ message: "A key cannot mint a tier above its own" })
      }
      const { key, record } = yield* auth.createKey({
        accountId: principal.accountId,
        type: body.apiKeyType,
        tier: body.tier ?? principal.tier,
        description: body.description,
        ...(body.expiresAt === undefined ? {} : { expiresAt: new Date(body.expiresAt) })
      })
      return HttpServerResponse.jsonUnsafe({ ...metadata(record), apiKey: key }, {
        status: 201,
        headers: { "cache-control": "no-store" }
      })
    })
  }),
  {
    summary: "Create an API key",
    description: "ADMIN key. The key is returned once, in this response, and never again.",
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
export const list = Route.make(
  "GET",
  PATH,
  Effect.gen(function*() {
    const auth = yield* Auth
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const keys = yield* auth.listKeys(principal.accountId)
      return HttpServerResponse.jsonUnsafe({ data: keys.map(metadata) })
    })
  }),
  {
    summary: "List the account's API keys",
    description: "ADMIN key. Metadata only: the secret of a key is never shown again.",
    tags: ["API keys"],
    security: "admin",
    responses: { 200: { description: "The keys of the caller's account" } }
  }
)

/** @category routes */
export const revoke = Route.make(
  "DELETE",
  PATH,
  Effect.gen(function*() {
    const auth = yield* Auth
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireAdmin(auth)
      const query = yield* RequestQuery.schema(RevokeQuery)
      yield* auth.revokeKey(principal.accountId, query.id)
      return HttpServerResponse.jsonUnsafe({ id: query.id, revoked: true })
    })
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
export const routes = [create, list, revoke] as const
