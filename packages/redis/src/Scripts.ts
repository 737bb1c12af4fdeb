/**
 * Lua scripts sent straight on the client of `RedisConnection` (one server or a Redis Cluster,
 * routed by the script's first key). A store that uses them recovers by itself from a Redis that
 * lost its scripts, and two releases of tollgate on one Redis each call their own
 * (docs/operations.md, "Upgrading and rolling deploys").
 *
 * **When to use**
 *
 * For the stores on the paid path (`RateLimiterRedis`, `AdmissionStoreRedis`), instead of
 * `Redis.eval` of `effect/persistence`: its script-cache lookup and a fiber racing a timeout on
 * every call halved the rate limiter's admissions per second (see `bench/ratelimit.ts`). One
 * watchdog timer for every call in flight enforces the timeout.
 *
 * **Details**
 *
 * A script is its Lua definitions and the call that enters them, and runs one of two ways, chosen
 * once when the first store starts and logged:
 *
 * - as a Redis Function (Redis 7 and later): its definitions are a library, `FUNCTION LOAD`ed on
 *   every primary at start and called with `FCALL`, so they are compiled and defined once instead
 *   of on every call (for the admission script, about 8 us of Redis's time per call). The library
 *   and its function are named `tollgate_<name>_<hash of the source>`, and a node that lost the
 *   library (a new primary, a `FUNCTION FLUSH`) gets it again on its first `Function not found`;
 * - as `EVALSHA` with the SHA computed once, and `EVAL` after a `NOSCRIPT` (a restarted or flushed
 *   Redis): where `FUNCTION LOAD` is refused (Redis 6, a managed Redis or an ACL without the
 *   `function` commands), or where `RedisConnection.layer({ functions: false })` switches it off.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { ErrorReply } from "redis"
import { RedisConnection } from "./RedisConnection.ts"

/** @category models */
export interface Script {
  /** What `EVAL` runs: the definitions, then the entry called on `KEYS` and `ARGV`. */
  readonly source: string
  readonly sha: string
  /** The library `FUNCTION LOAD` takes, registering one function named `name`. */
  readonly library: string
  /** The library's name and its function's: `tollgate_<name>_<hash>`. */
  readonly name: string
}

const hash = (text: string) => createHash("sha1").update(text).digest("hex")

/**
 * A script named `name` (letters, digits, `_`): `definitions` (Lua locals and functions, run once
 * when loaded as a library) and `entry`, a Lua expression of `keys` and `args` whose value is the
 * reply.
 *
 * @category constructors
 */
export const make = (name: string, definitions: string, entry: string): Script => {
  const versioned = `tollgate_${name}_${hash(definitions + entry).slice(0, 12)}`
  const source = `${definitions}\nlocal keys, args = KEYS, ARGV\nreturn ${entry}\n`
  return {
    source,
    sha: hash(source),
    library: `#!lua name=${versioned}\n${definitions}\nredis.register_function('${versioned}', function(keys, args) return ${entry} end)\n`,
    name: versioned
  }
}

/**
 * Sends a prepared `command` (`["", "", numkeys, ...keys, ...args]`; the first two are filled in
 * here). Exactly one of `onReply` and `onError` is called, once.
 *
 * @category models
 */
export type Send = (
  script: Script,
  command: Array<string>,
  onReply: (reply: unknown) => void,
  onError: (cause: unknown) => void
) => void

/**
 * How scripts run on a connection: as Functions, or as `EVALSHA` and why.
 *
 * @category models
 */
export type Mode =
  | { readonly _tag: "Functions" }
  | { readonly _tag: "Evalsha"; readonly reason: string }

/** Whether Redis answered that it does not run Functions here (an unknown command, an ACL refusal). */
const refusesFunctions = (error: unknown) => error instanceof ErrorReply && /unknown command|NOPERM|no permissions/i.test(error.message)

// One choice per connection, made by the first sender and logged once; a later sender loads its own
// libraries and falls back on its own (logged) only if that fails. A Redis that does not answer at
// start leaves Functions chosen: the first call then loads the library, or falls back if refused.
const modes = new WeakMap<RedisConnection["Service"], Promise<Mode>>()

const loadAll = (connection: RedisConnection["Service"], scripts: ReadonlyArray<Script>): Promise<Mode> =>
  scripts.reduce<Promise<void>>((loaded, script) => loaded.then(() => connection.loadLibrary(script.library, undefined)), Promise.resolve())
    .then(
      (): Mode => ({ _tag: "Functions" }),
      (error: unknown): Mode => error instanceof ErrorReply ? { _tag: "Evalsha", reason: error.message } : { _tag: "Functions" }
    )

const describe = (mode: Mode, scripts: ReadonlyArray<Script>) =>
  mode._tag === "Functions"
    ? Effect.logInfo(`Redis scripts run as Functions (FCALL): ${scripts.map((script) => script.name).join(", ")}`)
    : Effect.logWarning(`Redis scripts run as EVALSHA, not Functions: ${mode.reason}`)

/**
 * Loads `scripts` as Functions on the connection in context, or chooses `EVALSHA`; logs the choice
 * the first time it is made on the connection.
 *
 * @category constructors
 */
export const prepare = (scripts: ReadonlyArray<Script>) =>
  Effect.gen(function*() {
    const connection = yield* RedisConnection
    const first = modes.get(connection)
    if (first === undefined) {
      const choice = connection.functions
        ? loadAll(connection, scripts)
        : Promise.resolve<Mode>({ _tag: "Evalsha", reason: "Functions are switched off" })
      modes.set(connection, choice)
      const mode = yield* Effect.promise(() => choice)
      yield* describe(mode, scripts)
      return mode
    }
    const chosen = yield* Effect.promise(() => first)
    if (chosen._tag === "Evalsha") return chosen
    const mode = yield* Effect.promise(() => loadAll(connection, scripts))
    if (mode._tag === "Evalsha") yield* describe(mode, scripts)
    return mode
  })

interface Call {
  readonly deadline: number
  readonly expire: () => void
}

/**
 * The sender of the `RedisConnection` in context for `scripts` (loaded by `prepare`), with a
 * watchdog that fails a call Redis has not answered within `timeoutMs`. The watchdog reads the wall
 * clock, not Effect's: a timeout is about real waiting, also under TestClock. It stops when the
 * scope closes.
 *
 * @category constructors
 */
export const sender = (timeoutMs: number, scripts: ReadonlyArray<Script>) =>
  Effect.gen(function*() {
    const connection = yield* RedisConnection
    const { sendCommand } = connection
    let mode = yield* prepare(scripts)
    const runSync = Effect.runSyncWith(yield* Effect.context<never>())
    const fallBack = (error: ErrorReply) => {
      if (mode._tag === "Evalsha") return
      mode = { _tag: "Evalsha", reason: error.message }
      runSync(describe(mode, scripts))
    }
    const inFlight = new Set<Call>()
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        setInterval(() => {
          const now = Date.now()
          for (const call of inFlight) if (call.deadline <= now) call.expire()
        }, Math.max(10, Math.min(250, Math.floor(timeoutMs / 4)))).unref()
      ),
      (timer) => Effect.sync(() => clearInterval(timer))
    )
    const timedOut = `Redis did not answer within ${timeoutMs} ms`

    const viaEvalsha = (script: Script, command: Array<string>, answered: (reply: unknown) => void, failed: (error: unknown) => void) => {
      const firstKey = command[3]
      command[0] = "EVALSHA"
      command[1] = script.sha
      sendCommand(command, firstKey).then(answered, (error: unknown) => {
        if (!String(error).includes("NOSCRIPT")) return failed(error)
        command[0] = "EVAL"
        command[1] = script.source
        sendCommand(command, firstKey).then(answered, failed)
      })
    }
    // A node without the library (a new primary, a flushed one) gets it and the call is sent again;
    // a Redis that refuses Functions after all turns this sender to EVALSHA.
    const viaFunction = (script: Script, command: Array<string>, answered: (reply: unknown) => void, failed: (error: unknown) => void) => {
      const firstKey = command[3]
      command[0] = "FCALL"
      command[1] = script.name
      const refused = (error: unknown) => {
        if (!refusesFunctions(error)) return failed(error)
        fallBack(error as ErrorReply)
        viaEvalsha(script, command, answered, failed)
      }
      sendCommand(command, firstKey).then(answered, (error: unknown) => {
        if (!String(error).includes("Function not found")) return refused(error)
        connection.loadLibrary(script.library, firstKey).then(() => sendCommand(command, firstKey).then(answered, failed), refused)
      })
    }

    const send: Send = (script, command, onReply, onError) => {
      const call: Call = {
        deadline: Date.now() + timeoutMs,
        expire: () => {
          if (inFlight.delete(call)) onError(timedOut)
        }
      }
      inFlight.add(call)
      const failed = (error: unknown) => {
        if (inFlight.delete(call)) onError(error)
      }
      const answered = (reply: unknown) => {
        if (!inFlight.delete(call)) return
        try {
          onReply(reply)
        } catch (error) {
          onError(error)
        }
      }
      if (mode._tag === "Functions") viaFunction(script, command, answered, failed)
      else viaEvalsha(script, command, answered, failed)
    }
    return send
  })
