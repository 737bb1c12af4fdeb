/**
 * What the global middleware knows about the request being served, shared with the routes: its id
 * (`x-request-id`, always the server's own), the id the client sent, when it started, the route
 * pattern it matched and that pattern's path parameters, the MCP tool an in-process request runs,
 * and the principal once the route has authenticated it (logs, metrics and the abuse guard key on
 * the principal when there is one, else the client address).
 *
 * @since 0.1.0
 */
import type { Auth } from "@tollgate/core"
import { Context } from "effect"

/** @category models */
export interface RequestContext {
  /** A fresh UUID per request: usage entries, holds and image ids key on it, so a client never picks it. */
  readonly requestId: string
  /** The client's `x-request-id` when well formed, kept for correlation (log field, `x-client-request-id`). */
  readonly clientRequestId?: string | undefined
  readonly startedAt: number
  /** The route pattern, e.g. `/api/v1/crypto/rpc/:network`; `unmatched` for a 404 or 405. */
  readonly route: string
  /** The bazaar extension of the matched paid route (`Bazaar.extension`), which its 402s carry. */
  readonly bazaar?: Readonly<Record<string, unknown>> | undefined
  /** The MCP tool whose call this in-process request is (`App.Dispatch`); its usage entry names it. */
  readonly tool?: string | undefined
  /** The path parameters of the pattern, decoded. */
  readonly params: Readonly<Record<string, string>>
  /**
   * The client's address as the abuse guard judges it (`ClientAddress.resolve`, with the trusted
   * proxies); what a key's `ips` restriction is checked against.
   */
  readonly clientAddress?: string | undefined
  /** Set by the route once authentication succeeded; never a secret. */
  principalId: string | undefined
  /**
   * The credentials a metered route checked before it read the body (`Authenticate.upFront`), so
   * the pipeline does not check them again: a wallet's sign-in message is accepted once.
   */
  credentials?: Auth.Unconfirmed | undefined
}

/**
 * The context of the request being served.
 *
 * @category references
 */
export const CurrentRequest = Context.Reference<RequestContext>("@tollgate/http/CurrentRequest", {
  defaultValue: () => ({ requestId: "", clientRequestId: undefined, startedAt: 0, route: "unmatched", params: {}, principalId: undefined })
})
