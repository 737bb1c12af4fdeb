/**
 * The Redis layer of `AuditLog`: Redis streams, which only grow (`XADD`) and are read in order by
 * id (`XREVRANGE`, newest first). Each entry goes to its account's stream, under the account id as
 * hash tag (the account's Cluster slot), and to the deployment's stream, which operators read; an
 * entry of no account (the signing keys a server started with) goes to the deployment's only. The
 * cursor of a page is the stream id of its last entry; the next page starts after it.
 *
 * @since 0.1.0
 */
import { AuditLog, Errors } from "@tollgate/core"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"

const accountStream = (accountId: string) => `tollgate:audit:{${accountId}}`

/** The deployment's stream: every entry. @category internals */
export const deploymentStream = "tollgate:audit:{deployment}"

const unavailable = () => Errors.storeUnavailable("The audit log")

interface EntryJson {
  readonly at: string
  readonly actor: AuditLog.Actor
  readonly action: AuditLog.Action
  readonly accountId?: string
  readonly details: Readonly<Record<string, unknown>>
}

const decode = ([id, fields]: readonly [string, ReadonlyArray<string>]): AuditLog.Entry => {
  const { at, ...rest } = JSON.parse(fields[1] ?? "{}") as EntryJson
  return { id, at: new Date(at), ...rest }
}

/**
 * `AuditLog` over the `Redis` service in context.
 *
 * @category layers
 */
export const layerRedis: Layer.Layer<AuditLog.AuditLog, never, Redis.Redis> = Layer.effect(
  AuditLog.AuditLog,
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const send = <A>(command: string, ...args: ReadonlyArray<string>) => redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))
    return AuditLog.AuditLog.of({
      append: (entry) =>
        Effect.flatMap(Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe())), (now) => {
          const json = JSON.stringify({ ...entry, at: new Date(now).toISOString() })
          const own = entry.accountId === undefined ? Effect.void : send("XADD", accountStream(entry.accountId), "*", "e", json)
          return Effect.asVoid(Effect.all([own, send("XADD", deploymentStream, "*", "e", json)], { concurrency: 2 }))
        }),
      list: ({ accountId, before, limit }) =>
        Effect.map(
          send<ReadonlyArray<readonly [string, ReadonlyArray<string>]>>(
            "XREVRANGE",
            accountId === undefined ? deploymentStream : accountStream(accountId),
            before === undefined ? "+" : `(${before}`,
            "-",
            "COUNT",
            String(limit + 1)
          ),
          (found) => AuditLog.page(found.map(decode), limit)
        )
    })
  })
)
