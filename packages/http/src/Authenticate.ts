/**
 * Bearer authentication for the routes outside the metered pipeline (key management, billing, rate
 * limits, metrics), written once: the request's credentials become an API-key principal (or, where
 * a wallet reads its own account, a wallet's), a request without one is a 401, a key without the
 * right is a 403, and the principal is named in `CurrentRequest` for the logs, as `Metered.run`
 * does for the paid routes. `upFront` is the check of a metered route's credentials before its body
 * is read.
 *
 * @since 0.1.0
 */
import { type Auth, Errors, Principal } from "@tollgate/core"
import { Context, Effect, Option } from "effect"
import { HttpServerRequest } from "effect/http"
import { CurrentRequest } from "./RequestContext.ts"

/** @category models */
export type Failure = Errors.Unauthenticated | Errors.Forbidden | Errors.ServiceUnavailable | Errors.RateLimited

const credentials = (auth: Auth.Auth["Service"]) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => auth.authenticate(request.headers))

const identify = <P extends Principal.Principal>(principal: P) =>
  Effect.map(CurrentRequest, (current) => {
    current.principalId = Principal.describe(principal)
    return principal
  })

/**
 * The API key of the request, of any type; no key (or a wallet) is a 401.
 *
 * @category authentication
 */
export const requireKey: (
  auth: Auth.Auth["Service"]
) => Effect.Effect<Principal.ApiKeyPrincipal, Failure, HttpServerRequest.HttpServerRequest> = Effect.fn(
  "Authenticate.requireKey"
)(function*(auth) {
  const found = yield* credentials(auth)
  if (Option.isNone(found) || found.value._tag !== "ApiKey") {
    return yield* new Errors.Unauthenticated({ message: "This operation needs 'Authorization: Bearer <API key>'" })
  }
  return yield* identify(found.value)
})

/**
 * The ADMIN API key of the request: no credentials is a 401, anything but an ADMIN key a 403.
 *
 * @category authentication
 */
export const requireAdmin: (
  auth: Auth.Auth["Service"]
) => Effect.Effect<Principal.ApiKeyPrincipal, Failure, HttpServerRequest.HttpServerRequest> = Effect.fn(
  "Authenticate.requireAdmin"
)(function*(auth) {
  const found = yield* credentials(auth)
  if (Option.isNone(found)) return yield* new Errors.Unauthenticated({ message: "An ADMIN API key is required" })
  const principal = found.value
  yield* auth.requireAdmin(principal)
  // requireAdmin refuses wallets already; this narrows the principal to its key
  if (principal._tag !== "ApiKey") return yield* new Errors.Forbidden({ message: "This operation requires an ADMIN API key" })
  return yield* identify(principal)
})

/**
 * The account of the request's caller: an API key of any type, or a wallet signed in with
 * SIGN-IN-WITH-X, whose account is its own; no credentials is a 401.
 *
 * @category authentication
 */
export const requireAccount: (
  auth: Auth.Auth["Service"]
) => Effect.Effect<Principal.Principal, Failure, HttpServerRequest.HttpServerRequest> = Effect.fn(
  "Authenticate.requireAccount"
)(function*(auth) {
  const found = yield* credentials(auth)
  if (Option.isNone(found)) {
    return yield* new Errors.Unauthenticated({
      message: "This operation needs 'Authorization: Bearer <API key>' or a wallet's SIGN-IN-WITH-X"
    })
  }
  return yield* identify(found.value)
})

/**
 * Whoever may read everything of an account: an ADMIN API key of it, or the wallet that is the
 * account, signed in with SIGN-IN-WITH-X. No credentials is a 401, any other key a 403.
 *
 * @category authentication
 */
export const requireOwner: (
  auth: Auth.Auth["Service"]
) => Effect.Effect<Principal.Principal, Failure, HttpServerRequest.HttpServerRequest> = Effect.fn(
  "Authenticate.requireOwner"
)(function*(auth) {
  const found = yield* credentials(auth)
  if (Option.isNone(found))
    return yield* new Errors.Unauthenticated({ message: "An ADMIN API key or a wallet's SIGN-IN-WITH-X is required" })
  if (found.value._tag === "ApiKey") yield* auth.requireAdmin(found.value)
  return yield* identify(found.value)
})

/**
 * Checks the request's credentials whole (an API key's signature and standing, or a wallet's
 * signature and single-use nonce) before anything of its body is read or any upload memory is
 * held: a caller with bad credentials gets its 401 for the cost of its headers, and a valid one is
 * named from here on, so the abuse guard counts whatever fails next against it, and the upload
 * budget charges its share. The credentials are kept in `CurrentRequest` for `Metered.run`.
 * `None` when the request carries none.
 *
 * @category authentication
 */
export const upFront = (
  auth: Auth.Auth["Service"]
): Effect.Effect<Option.Option<Principal.Principal>, Failure, HttpServerRequest.HttpServerRequest> =>
  // Every paid call runs it: the request's services are read from the fiber, not as Effect steps.
  Effect.withFiber((fiber) =>
    Effect.flatMap(auth.authenticateUnconfirmed(Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest).headers), (found) => {
      if (Option.isNone(found)) return Effect.succeed(Option.none())
      const { confirm, principal } = found.value
      const named = (policy: Auth.KeyPolicy | undefined) => {
        const current = fiber.getRef(CurrentRequest)
        current.principalId = Principal.describe(principal)
        // Kept as confirmed, with the policy read with the key's standing: the pipeline does not
        // confirm the key a second time.
        current.credentials = confirm === undefined ? found.value : { principal, confirm: undefined, policy }
        return Option.some(principal)
      }
      return confirm === undefined ? Effect.sync(() => named(undefined)) : Effect.map(confirm, named)
    })
  )
