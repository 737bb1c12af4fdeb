/**
 * The process-wide budget of request-body bytes held in memory at once. Uploads are read whole
 * into memory (the text parser's file, a large chat conversation), so without a bound a burst of
 * concurrent uploads grows the server's RSS without limit; with it, a request first holds its
 * declared size (or its route's cap when it declares none) against the budget until it ends. A
 * request that finds the budget spent waits briefly for earlier uploads to finish, then gets a
 * 503 with `Retry-After` and nothing is read. A request larger than the whole budget holds all of
 * it, so it still runs, alone.
 *
 * The bytes are the permits of one Effect `Semaphore`, taken in the request's scope, so they come
 * back however the request ends (answered, failed, or its client gone).
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import * as DocumentExtractor from "@tollgate/documents/DocumentExtractor"
import { Context, Effect, Option, Semaphore } from "effect"
import type { Scope } from "effect"
import { HttpServerRequest } from "effect/http"

/** @category models */
export interface Options {
  /** Bytes of upload bodies held at once. */
  readonly maxBytes: number
  /** How long a request waits for room before its 503; default 5 seconds (a 25 MB document's extraction). */
  readonly waitMs?: number
}

/**
 * Four uploads at the text parser's 25 MB cap: what a small machine (2 cores, a few GB) carries
 * next to its document workers.
 *
 * @category constants
 */
export const DEFAULT_MAX_BYTES = 4 * DocumentExtractor.MAX_BYTES

/** @category models */
export interface Budget {
  readonly maxBytes: number
  /**
   * Holds room for the current request's body, at most `capBytes` (the route's cap), until the
   * request's scope closes; a 503 when there is none within the wait.
   */
  readonly hold: (capBytes: number) => Effect.Effect<void, Errors.ServiceUnavailable, HttpServerRequest.HttpServerRequest | Scope.Scope>
}

/**
 * A budget of `options.maxBytes`.
 *
 * @category constructors
 */
export const make = (options: Options): Budget => {
  const semaphore = Semaphore.makeUnsafe(options.maxBytes)
  const wait = options.waitMs ?? 5_000
  const full = new Errors.ServiceUnavailable({
    message: "The server is busy with other uploads; retry shortly",
    retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000))
  })
  return {
    maxBytes: options.maxBytes,
    hold: (capBytes) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const declared = Number(request.headers["content-length"])
        const bytes = Math.min(Number.isFinite(declared) && declared >= 0 ? declared : capBytes, capBytes, options.maxBytes)
        if (bytes === 0) return Effect.void
        return Effect.flatMap(
          Effect.timeoutOption(semaphore.takeScoped(bytes), wait),
          (taken) => Option.isSome(taken) ? Effect.void : Effect.fail(full)
        )
      })
  }
}

/**
 * The budget routes hold upload bytes against: the server provides one sized by its
 * configuration; without it, one process-wide budget of `DEFAULT_MAX_BYTES`.
 *
 * @category references
 */
export const UploadBudget = Context.Reference<Budget>("@tollgate/http/UploadBudget", {
  defaultValue: () => make({ maxBytes: DEFAULT_MAX_BYTES })
})
