/**
 * The Redis layer of `TopUpTransactions`: one hash per account, `tollgate:topups:{accountId}`,
 * credit reference to transaction hash, in the account's Cluster slot. Top-ups are few (5 USD at
 * least each), so the hash is kept for the account's life.
 *
 * @since 0.1.0
 */
import { Errors, TopUpTransactions } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"

const key = (accountId: string) => `tollgate:topups:{${accountId}}`

const unavailable = () => Errors.storeUnavailable("The top-up transactions store")

/**
 * `TopUpTransactions` over the `Redis` service in context.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<TopUpTransactions.TopUpTransactions, never, Redis.Redis> = Layer.effect(
  TopUpTransactions.TopUpTransactions,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    return TopUpTransactions.TopUpTransactions.of({
      record: (accountId, reference, transaction) => Effect.asVoid(send("HSET", key(accountId), reference, transaction)),
      read: (accountId, references) =>
        references.length === 0 ? Effect.succeed(new Map()) : Effect.map(
          send<ReadonlyArray<string | null>>("HMGET", key(accountId), ...references),
          (transactions) =>
            new Map(references.flatMap((reference, i) => transactions[i] == null ? [] : [[reference, transactions[i]!] as const]))
        )
    })
  })
)
