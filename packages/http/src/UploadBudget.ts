/**
 * The process-wide budget of request-body bytes held in memory at once, so a burst of concurrent
 * uploads cannot grow the server's RSS without limit, and one caller's uploads always leave room
 * for everyone else's. A request that finds the budget spent waits briefly, then gets a 503 with
 * `Retry-After` and nothing is read.
 *
 * **Details**
 *
 * Uploads are read whole into memory (the text parser's file, a large chat conversation), so a
 * request first holds its declared size (or its route's cap when it declares none) against the
 * budget until it ends. A request larger than the whole budget holds all of it, so it still runs,
 * alone.
 *
 * Each principal (an API key, a wallet) may hold at most its share of the budget (`DEFAULT_SHARE`,
 * half of it by default) at once; past its share a request waits the same way, then gets the 503.
 * Metered routes authenticate the caller before they read a body, so the principal is known here.
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
import { CurrentRequest } from "./RequestContext.ts"

/** @category models */
export interface Options {
  /** Bytes of upload bodies held at once. */
  readonly maxBytes: number
  /** How long a request waits for room before its 503; default 5 seconds (a 25 MB document's extraction). */
  readonly waitMs?: number
  /** Bytes one principal may hold at once; default `DEFAULT_SHARE` of `maxBytes`. */
  readonly shareBytes?: number
}

/**
 * Four uploads at the text parser's 25 MB cap: what a small machine (2 cores, a few GB) carries
 * next to its document workers.
 *
 * @category constants
 */
export const DEFAULT_MAX_BYTES = 4 * DocumentExtractor.MAX_BYTES

/**
 * The fraction of the budget one principal may hold: two uploads at the text parser's cap of the
 * default budget, and the other half always left to other callers.
 *
 * @category constants
 */
export const DEFAULT_SHARE = 0.5

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
  const shareBytes = Math.max(1, Math.floor(options.shareBytes ?? options.maxBytes * DEFAULT_SHARE))
  const wait = options.waitMs ?? 5_000
  const retryAfterSeconds = Math.max(1, Math.ceil(wait / 1000))
  const full = new Errors.ServiceUnavailable({ message: "The server is busy with other uploads; retry shortly", retryAfterSeconds })
  const shareFull = new Errors.ServiceUnavailable({
    message: "Your uploads in progress hold your share of the server's upload memory; retry when one ends",
    retryAfterSeconds
  })
  /** Each principal's share while it holds some of it, with how many requests hold it. */
  const shares = new Map<string, { readonly semaphore: Semaphore.Semaphore; holders: number }>()

  // Requests waiting for bytes; while there are none, free bytes are taken at once. The timed wait
  // costs a timer and a race on every request, on the way to a chat stream's first chunk.
  let waiting = 0
  const waitFor = (from: Semaphore.Semaphore, bytes: number, refusal: Errors.ServiceUnavailable) =>
    Effect.acquireUseRelease(
      Effect.sync(() => waiting++),
      () => Effect.timeoutOption(from.takeScoped(bytes), wait),
      () => Effect.sync(() => waiting--)
    ).pipe(Effect.flatMap((taken) => Option.isSome(taken) ? Effect.void : Effect.fail(refusal)))
  const take = (from: Semaphore.Semaphore, bytes: number, refusal: Errors.ServiceUnavailable) =>
    Effect.uninterruptibleMask((restore) =>
      waiting > 0 ?
        restore(waitFor(from, bytes, refusal)) :
        Effect.flatMap(from.takeIfAvailable(bytes), (taken) =>
          taken ? Effect.addFinalizer(() => from.release(bytes)) : restore(waitFor(from, bytes, refusal)))
    )

  const share = (principal: string) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        let held = shares.get(principal)
        if (held === undefined) {
          held = { semaphore: Semaphore.makeUnsafe(shareBytes), holders: 0 }
          shares.set(principal, held)
        }
        held.holders++
        return held
      }),
      (held) =>
        Effect.sync(() => {
          if (--held.holders === 0) shares.delete(principal)
        })
    )

  return {
    maxBytes: options.maxBytes,
    hold: (capBytes) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const declared = Number(request.headers["content-length"])
        const bytes = Math.min(Number.isFinite(declared) && declared >= 0 ? declared : capBytes, capBytes, options.maxBytes)
        if (bytes === 0) return Effect.void
        const global = take(semaphore, bytes, full)
        return Effect.flatMap(CurrentRequest, (current) => {
          const principal = current.principalId
          if (principal === undefined) return global
          return Effect.flatMap(share(principal), (held) =>
            Effect.andThen(take(held.semaphore, Math.min(bytes, shareBytes), shareFull), global))
        })
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
