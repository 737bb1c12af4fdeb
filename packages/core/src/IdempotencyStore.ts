/**
 * `Idempotency-Key` records: (principal, key) -> the fingerprint of the body, the state of the
 * request, and once done, the stored response, for 24 hours. A replay with the same body gets the
 * stored response byte for byte and is not charged; a different body is refused; concurrent
 * duplicates reach the upstream once.
 *
 * @since 0.1.0
 */
import { Context, type Effect } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/** @category models */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The body, base64. */
  readonly body: string
}

/**
 * The outcome of a claim: this request owns the key (`Claimed`), the key is done and its response
 * is replayed (`Replay`), another request with the same key is still running (`InFlight`), or the
 * key was used with a different body (`Mismatch`).
 *
 * @category models
 */
export type Claim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Replay"; readonly response: StoredResponse }
  | { readonly _tag: "InFlight" }
  | { readonly _tag: "Mismatch" }

/** @category services */
export class IdempotencyStore extends Context.Service<IdempotencyStore, {
  readonly claim: (scope: string, key: string, fingerprint: string) => Effect.Effect<Claim, ServiceUnavailable>
  /** Stores the response of a claimed key for its remaining lifetime. */
  readonly complete: (scope: string, key: string, response: StoredResponse) => Effect.Effect<void, ServiceUnavailable>
  /** Frees a claimed key whose request failed before reaching the upstream (the key is not burnt). */
  readonly abandon: (scope: string, key: string) => Effect.Effect<void, ServiceUnavailable>
}>()("@tollgate/core/IdempotencyStore") {}
