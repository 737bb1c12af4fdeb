/**
 * Portal sign-ins ended before their time: the id of a sign-in that signed out, kept until the
 * sign-in would have ended on its own. Every portal request asks here, so a sign-out on one
 * instance ends the sign-in on all of them that share the store.
 *
 * **Details**
 *
 * The portal's sign-in is a sealed cookie that nothing stores, so signing out alone clears only the
 * browser's copy; a copy taken earlier (from a shared machine, a proxy's log) would stay signed in
 * until its end. `layerMemory` serves one process; `@tollgate/redis` has the shared layer
 * (`SessionRevocationsRedis`). Both sit beside the key store (`AuthStore.layerMemory`,
 * `AuthStoreRedis.layerRedis`): wherever an ADMIN key's revocation ends its sign-in, a sign-out
 * does.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { ServiceUnavailable } from "./Errors.ts"

/** @category services */
export class SessionRevocations extends Context.Service<SessionRevocations, {
  /** Ends the sign-in `id`, which would have ended at `expiresAt` (ms since the epoch). */
  readonly revoke: (id: string, expiresAt: number) => Effect.Effect<void, ServiceUnavailable>
  readonly isRevoked: (id: string) => Effect.Effect<boolean, ServiceUnavailable>
}>()("@tollgate/core/SessionRevocations") {}

/**
 * One process's revocations, each dropped once its sign-in would have ended.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<SessionRevocations> = Layer.sync(SessionRevocations, () => {
  const until = new Map<string, number>()
  const sweep = (now: number) => {
    for (const [id, expiresAt] of until) if (expiresAt <= now) until.delete(id)
  }
  return SessionRevocations.of({
    revoke: (id, expiresAt) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        sweep(now)
        if (expiresAt > now) until.set(id, expiresAt)
      }),
    isRevoked: (id) => Effect.map(Clock.currentTimeMillis, (now) => (until.get(id) ?? 0) > now)
  })
})
