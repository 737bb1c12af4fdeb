/**
 * Spans for the steps every paid request takes (the metered pipeline's stages, the Redis ledger's
 * hold, capture and release), recorded without a call-site stack, and not made at all with tracing
 * off.
 *
 * **Details**
 *
 * Capturing a call-site stack, as `Effect.fn` and `Effect.withSpan` do on every call, is a
 * measurable share of a proxied RPC call, and the span names already say where they come from. With
 * tracing off the steps are not wrapped at all, since even a span that is never recorded costs a
 * context change per step.
 *
 * @since 0.1.0
 */
import { Effect, References } from "effect"

/**
 * Runs `self` in a span named `name` when tracing is on; returns it as it is when tracing is off.
 *
 * @category models
 */
export type Span = <A, E, R>(
  name: string,
  self: Effect.Effect<A, E, R>,
  attributes?: Record<string, string>
) => Effect.Effect<A, E, R>

/**
 * The span wrapper for a tracer that is on or off; data-first `withSpan`, since the data-last form
 * ignores `captureStackTrace`.
 *
 * @category constructors
 */
export const make = (enabled: boolean): Span =>
  enabled
    ? (name, self, attributes) =>
      Effect.withSpan(self, name, { captureStackTrace: false, ...(attributes === undefined ? {} : { attributes }) })
    : (_name, self) => self

/**
 * The span wrapper for the tracer of the current context, read once (when a layer is built).
 *
 * @category constructors
 */
export const current: Effect.Effect<Span> = Effect.map(Effect.service(References.TracerEnabled), make)
