/**
 * What every portal route behind the sign-in shares: the sign-in check (the sealed cookie, not
 * ended nor signed out, an ADMIN key still standing, and the CSRF token for a change), the route
 * constructor that runs it first, and the answers' common parts.
 *
 * @since 0.1.0
 */
import { Errors, SessionRevocations } from "@tollgate/core"
import { AuthStore } from "@tollgate/core/AuthStore"
import { Clock, Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import * as Route from "../Route.ts"
import * as PortalSession from "./Session.ts"

/** The prefix of the portal's API routes. */
export const API = "/api/v1/portal"

export const noStore = { "cache-control": "no-store, private" }

export const unauthenticated = new Errors.Unauthenticated({ message: "Sign in to the portal first (the session may have ended)" })

/**
 * The sign-in check of a route behind the sign-in, built with the route (the stores and the
 * sealing key are read once): the sign-in of the request, sealed by this server, not ended nor
 * signed out, and for an ADMIN key, the key still standing. A state change must also carry the
 * sign-in's CSRF token.
 */
export const sessionCheck = Effect.gen(function*() {
  const store = yield* AuthStore
  const revocations = yield* SessionRevocations.SessionRevocations
  const key = yield* PortalSession.SessionKey
  return (change: boolean) =>
    Effect.gen(function*() {
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
 * A route behind the sign-in: `handler`, built once with the route like any route's, answers a
 * request whose sign-in passed `sessionCheck` (with the CSRF token when the route `changes` state).
 */
export const sessionRoute = <R>(
  method: Route.Method,
  path: `/${string}`,
  changes: boolean,
  handler: Effect.Effect<(session: PortalSession.Session) => Route.Handler, never, R>,
  docs: Route.Docs
) =>
  Route.make(
    method,
    path,
    Effect.gen(function*() {
      const requireSession = yield* sessionCheck
      const handle = yield* handler
      return Effect.flatMap(requireSession(changes), handle)
    }),
    docs
  )

export const sessionView = (session: PortalSession.Session) => ({
  accountId: session.accountId,
  via: session.via,
  wallet: session.wallet ?? null,
  csrfToken: session.csrfToken,
  expiresAt: new Date(session.expiresAt).toISOString()
})

export const sessionDocs = (summary: string, description: string, responses: Route.Docs["responses"]): Route.Docs => ({
  summary,
  description: `Portal session cookie${description}`,
  tags: ["Portal"],
  security: "public",
  responses: { ...responses, 401: { description: "No portal session, or it ended", schema: Errors.StandardError } }
})

export const CHANGE = ` and the session's CSRF token in \`${PortalSession.csrfHeader}\`.`
