/**
 * What the global middleware knows about the request being served, shared with the routes: its id
 * (`x-request-id`), when it started, and the principal once the route has authenticated it (logs,
 * metrics and the abuse guard key on the principal when there is one, else the client address).
 *
 * @since 0.1.0
 */
import { Context } from "effect"

/** @category models */
export interface RequestContext {
  readonly requestId: string
  readonly startedAt: number
  /** Set by the route once authentication succeeded; never a secret. */
  principalId: string | undefined
}

/**
 * The context of the request being served.
 *
 * @category references
 */
export const CurrentRequest = Context.Reference<RequestContext>("@tollgate/http/CurrentRequest", {
  defaultValue: () => ({ requestId: "", startedAt: 0, principalId: undefined })
})
