/**
 * Signing in to the portal and out of it: the sign-in message a wallet signs, the sign-in made with
 * that signature or an ADMIN key (through `Auth`, as a paid call would authenticate), the sign-in
 * read back, and signing out, which revokes the sign-in on the server.
 *
 * @since 0.1.0
 */
import { Errors, SessionRevocations, Siwx, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Clock, Effect, Option, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"
import { ServiceInfo } from "../ServiceInfo.ts"
import * as PortalSession from "./Session.ts"
import { API, CHANGE, noStore, sessionCheck, sessionDocs, sessionRoute, sessionView, unauthenticated } from "./SessionRoute.ts"

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
      const message = yield* Effect.fromResult(
        Siwx.format(query.family, { ...fresh.info, address: wallet.value.address, chainId: chain.chainId })
      ).pipe(
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
 * as a paid call would (a wallet's nonce is spent), and sets the sign-in cookie.
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

/**
 * `GET /api/v1/portal/session`: the sign-in, or 204 when there is none. Every visit of a signed-out
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
 * `DELETE /api/v1/portal/session`: ends the sign-in on the server (its id is revoked until the
 * sign-in would have ended) and clears the cookie, so a copy of the cookie is refused as well.
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
