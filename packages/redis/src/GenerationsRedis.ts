/**
 * The Redis layer of `Generations`: one string per record (its JSON), under the account id as hash
 * tag, expiring after `Generations.RETENTION_MS`. A record is written once and never changed, so
 * a plain `SET ... PX` is all it takes.
 *
 * @since 0.1.0
 */
import { Errors, Generations } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { Redis } from "effect/persistence"

const unavailable = (error: unknown) => new Errors.ServiceUnavailable({ message: `Generation store unavailable: ${String(error)}` })

/**
 * A store over the `Redis` service, its keys under `prefix`.
 *
 * @category constructors
 */
export const make = (options: { readonly prefix?: string } = {}) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const prefix = options.prefix ?? "tollgate:generation"
    const name = (accountId: string, id: string) => `${prefix}:{${accountId}}:${id}`
    return Generations.Generations.of({
      record: (generation) =>
        redis.send("SET", name(generation.accountId, generation.id), JSON.stringify(generation), "PX", String(Generations.RETENTION_MS))
          .pipe(
            Effect.asVoid,
            Effect.mapError(unavailable)
          ),
      get: (accountId, id) =>
        redis.send<string | null>("GET", name(accountId, id)).pipe(
          Effect.map((json) =>
            json === null || json === undefined ? Option.none() : Option.some(JSON.parse(json) as Generations.Generation)
          ),
          Effect.mapError(unavailable)
        )
    })
  })

/**
 * The Redis layer, shared by every instance pointed at the same Redis.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<Generations.Generations, never, Redis.Redis> = Layer.effect(Generations.Generations, make())
