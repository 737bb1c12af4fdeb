/**
 * The request log: one structured JSON line per response with the request id (and the client's own
 * request id when it sent one, the trace id when tracing is on), the principal id (never a key,
 * signature, document or prompt), the method, the route pattern, the status and the latency.
 * Without the service (embedders that do not want it) nothing is recorded.
 *
 * **Details**
 *
 * It runs on every request, so it bypasses the general-purpose logger: a line is encoded into a
 * byte chunk, and the chunk is written out every 50 ms and when the layer is released.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import * as Timestamp from "./Timestamp.ts"

/** @category models */
export interface Entry {
  readonly requestId: string
  readonly clientRequestId?: string | undefined
  /** The trace of the request's server span, when an OpenTelemetry tracer records it. */
  readonly traceId?: string | undefined
  readonly principalId: string | undefined
  readonly method: string
  readonly route: string
  readonly status: number
  readonly latencyMs: number
}

/** @category services */
export class RequestLog extends Context.Service<RequestLog, {
  readonly record: (entry: Entry) => void
}>()("@tollgate/http/RequestLog") {}

/**
 * The JSON line of an entry, in the shape of the other structured logs (`message`, `level`,
 * `timestamp`, `annotations`).
 *
 * @category formatting
 */
export const format = (entry: Entry, timestamp: string): string =>
  // A template over the fixed keys: about twice as fast as stringifying a nested object. Only the
  // principal id is escaped: the request id is a UUID, the client's id matched
  // `[A-Za-z0-9._:-]`, the method passed node's token check and the route is one of ours.
  `{"message":"request","level":"${entry.status >= 500 ? "ERROR" : "INFO"}","timestamp":"${timestamp}",` +
  `"annotations":{"requestId":"${entry.requestId}",` +
  (entry.clientRequestId === undefined ? "" : `"clientRequestId":"${entry.clientRequestId}",`) +
  (entry.traceId === undefined ? "" : `"traceId":"${entry.traceId}",`) +
  `"principalId":${JSON.stringify(entry.principalId ?? "anonymous")},` +
  `"method":"${entry.method}","route":"${entry.route}","status":${entry.status},` +
  `"latencyMs":${Math.round(entry.latencyMs * 100) / 100}}}`

const CHUNK_BYTES = 256 * 1024

/**
 * Lines written to stdout in batches every 50 ms. `errorsOnly` keeps only 5xx lines (log level
 * `error`). Each line is encoded into a byte chunk as it is recorded rather than kept as a string
 * until the flush: a string that lives 50 ms outlasts the young generation's collections and is
 * copied into the old one, which under load costs more than formatting the line.
 *
 * @category layers
 */
export const layerJson = (options: { readonly errorsOnly?: boolean } = {}): Layer.Layer<RequestLog> =>
  Layer.effect(
    RequestLog,
    Effect.gen(function*() {
      let chunk = Buffer.allocUnsafe(CHUNK_BYTES)
      let used = 0
      const flush = () => {
        if (used === 0) return
        const full = chunk.subarray(0, used)
        chunk = Buffer.allocUnsafe(CHUNK_BYTES)
        used = 0
        process.stdout.write(full)
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => setInterval(flush, 50).unref()),
        (interval) =>
          Effect.sync(() => {
            clearInterval(interval)
            flush()
          })
      )
      return RequestLog.of({
        record: (entry) => {
          if (options.errorsOnly === true && entry.status < 500) return
          const line = `${format(entry, Timestamp.now())}\n`
          // Three bytes per UTF-16 unit bound the line's UTF-8 length without a pass to count it.
          const most = line.length * 3
          if (used + most > CHUNK_BYTES) flush()
          if (most > CHUNK_BYTES) process.stdout.write(line)
          else used += chunk.write(line, used)
        }
      })
    })
  )

/**
 * Each line handed to `write` at once (tests read the lines back).
 *
 * @category layers
 */
export const layerWith = (write: (line: string) => void): Layer.Layer<RequestLog> =>
  Layer.succeed(RequestLog, RequestLog.of({ record: (entry) => write(format(entry, Timestamp.now())) }))
