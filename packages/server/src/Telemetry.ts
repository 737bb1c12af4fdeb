/**
 * Tracing through OpenTelemetry (`@effect/opentelemetry`), configured by the standard `OTEL_*`
 * variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
 * `OTEL_SERVICE_NAME`, ...). Each request is one span (opened by the HTTP server) with child spans
 * for the steps of the metered pipeline: authentication, admission, the backend call and the
 * capture. With none of the endpoint variables set, tracing is off: no span is made and the
 * OpenTelemetry SDK is not loaded.
 *
 * **Details**
 *
 * With tracing off, Effect's tracer is disabled, so no span is even created: left on, Effect's own
 * tracer would still build the request's span and the pipeline's, about a fifth of the pipeline's
 * time, for no reader. The OpenTelemetry SDK is imported only when tracing is on: loading it took
 * about 0.28 s of CPU at every start (Node 24.21, f6e1df1), for servers that mostly never export a
 * span.
 *
 * @since 0.1.0
 */
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, References } from "effect"

/**
 * Whether the environment asks for trace export.
 *
 * @category predicates
 */
export const isEnabled = (env: Readonly<Record<string, string | undefined>>): boolean =>
  [env["OTEL_EXPORTER_OTLP_ENDPOINT"], env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]].some((value) => value !== undefined && value !== "") &&
  env["OTEL_SDK_DISABLED"] !== "true"

/**
 * Tracing with a given span processor (tests use an in-memory exporter).
 *
 * @category layers
 */
export const layerWith = (processor: SpanProcessor, serviceName = "tollgate") =>
  Layer.unwrap(Effect.map(
    Effect.promise(() => import("@effect/opentelemetry/NodeSdk")),
    (NodeSdk) => NodeSdk.layer(() => ({ resource: { serviceName }, spanProcessor: processor }))
  ))

const layerOtlp = (serviceName: string) =>
  Layer.unwrap(Effect.map(
    Effect.promise(() => Promise.all([import("@opentelemetry/exporter-trace-otlp-http"), import("@opentelemetry/sdk-trace-base")])),
    ([Otlp, TraceBase]) => layerWith(new TraceBase.BatchSpanProcessor(new Otlp.OTLPTraceExporter()), serviceName)
  ))

/**
 * No spans at all.
 *
 * @category layers
 */
export const layerDisabled: Layer.Layer<never> = Layer.succeed(References.TracerEnabled, false)

/**
 * Tracing as the environment configures it: OTLP over HTTP when an endpoint is set, else off.
 *
 * @category layers
 */
export const layer = (env: Readonly<Record<string, string | undefined>> = process.env) =>
  isEnabled(env)
    ? layerOtlp(env["OTEL_SERVICE_NAME"] ?? "tollgate")
    : layerDisabled
