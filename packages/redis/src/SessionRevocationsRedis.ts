/**
 * The Redis layer of `SessionRevocations`: every instance reads a portal sign-out with one
 * `EXISTS`, and nothing is left to clean up.
 *
 * **Details**
 *
 * One key per signed-out sign-in, `tollgate:portal:revoked:<id>`, that expires (`PX`) when the
 * sign-in would have ended.
 *
 * @since 0.1.0
 */
import { Errors, SessionRevocations } from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"

const revokedKey = (id: string) => `tollgate:portal:revoked:${id}`

const unavailable = () => Errors.storeUnavailable("The portal session store")

/** @category layers */
export const layerRedis: Layer.Layer<SessionRevocations.SessionRevocations, never, Redis.Redis> = Layer.effect(
  SessionRevocations.SessionRevocations,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    return SessionRevocations.SessionRevocations.of({
      revoke: (id, expiresAt) =>
        Effect.flatMap(
          Clock.currentTimeMillis,
          (now) =>
            expiresAt <= now ? Effect.void : Effect.asVoid(send("SET", revokedKey(id), "1", "PX", String(Math.ceil(expiresAt - now))))
        ),
      isRevoked: (id) => Effect.map(send<number>("EXISTS", revokedKey(id)), (count) => count > 0)
    })
  })
)
