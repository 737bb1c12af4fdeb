/**
 * The minimum rate at which a request's body must arrive while the server reads it: a body must
 * bring at least `minBytesPerSecond` in every window of `windowMs`, or the read stops, the request
 * is answered 408 (which the abuse guard counts against the caller) and the connection is closed,
 * so a slow sender is cut off within two windows.
 *
 * **Details**
 *
 * A body read into memory holds its size against the `UploadBudget` until it is read, so a client
 * that declares 25 MB and sends a kilobyte a second would hold that room for as long as Node lets
 * the request live (300 s by default): a few such connections would starve every other upload.
 *
 * The rate is read from the socket's byte count (`bytesRead`) every window, which costs nothing
 * while the body streams and needs no hook into the reading itself. A request that does not come
 * from a Node socket (the fetch handler of `Handlers`) is read without a deadline: its platform
 * buffers and times out bodies itself.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import { Context, Effect } from "effect"
import { HttpServerRequest } from "effect/http"

/** @category models */
export interface Options {
  /** Bytes the body must bring in every window. */
  readonly minBytesPerSecond: number
  /** How often the rate is checked; the first check comes one window after the read starts. */
  readonly windowMs: number
}

/**
 * 16 KiB/s over 5 s windows: a phone on a poor link (128 kbit/s) still uploads, a deliberately slow
 * sender is cut off within 10 s.
 *
 * @category constants
 */
export const defaultOptions: Options = { minBytesPerSecond: 16 * 1024, windowMs: 5_000 }

/**
 * The deadline bodies are read under; provide another value to change it.
 *
 * @category references
 */
export const BodyDeadline = Context.Reference<Options>("@tollgate/http/BodyDeadline", {
  defaultValue: () => defaultOptions
})

/** What this module reads of a Node `IncomingMessage`. */
interface NodeSource {
  readonly complete: boolean
  readonly socket: { readonly bytesRead: number } | null
}

const isNodeSource = (source: unknown): source is NodeSource =>
  typeof source === "object" && source !== null && "complete" in source && "socket" in source

const tooSlow = (options: Options) =>
  new Errors.RequestTimeout({
    message: `The request body arrived slower than ${options.minBytesPerSecond} bytes per second; the request was cut off`
  })

const watch = (source: NodeSource, options: Options, last: number): Effect.Effect<never, Errors.RequestTimeout> =>
  Effect.flatMap(Effect.sleep(options.windowMs), () => {
    const socket = source.socket
    // The whole body is in: what remains (parsing) is the server's work, not the client's.
    if (source.complete || socket === null) return Effect.never
    const read = socket.bytesRead
    if (read - last < options.minBytesPerSecond * options.windowMs / 1000) return Effect.fail(tooSlow(options))
    return watch(source, options, read)
  })

/**
 * `body` (a read of the request's body), cut off with a 408 when the body arrives too slowly.
 *
 * @category reading
 */
export const read = <A, E, R>(
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | Errors.RequestTimeout, R | HttpServerRequest.HttpServerRequest> =>
  // Every paid call reads its body through it: the request is read from the fiber, not as an Effect step.
  Effect.withFiber((fiber) => {
    const source = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest).source
    if (!isNodeSource(source) || source.complete || source.socket === null) return body
    // A body sent with its headers is parsed by Node right after the request event that started
    // this read, in the same turn: after one yield it is complete and is read without a watch,
    // which would fork two fibers and set a timer on every such call.
    return Effect.flatMap(Effect.yieldNow, () =>
      source.complete || source.socket === null
        ? body
        : Effect.raceFirst(body, watch(source, fiber.getRef(BodyDeadline), source.socket.bytesRead)))
  })
