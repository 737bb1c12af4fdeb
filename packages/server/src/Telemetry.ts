/**
 * Tracing through OpenTelemetry (`@effect/opentelemetry`). The OTLP exporter is configured by the
 * standard `OTEL_*` variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
 * `OTEL_SERVICE_NAME`, ...); with none of the endpoint variables set, tracing is off: Effect's
 * tracer is disabled, so no span is even created (left on, Effect's own tracer would still build
 * the request's span and the pipeline's, about a fifth of the pipeline's time, for no reader). Each request is one span (opened by the HTTP server) with child spans for the steps
 * of the metered pipeline: authentication, admission, the backend call and the capture.
 *
 * @since 0.1.0
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Layer, References } from "effect"

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
  NodeSdk.layer(() => ({ resource: { serviceName }, spanProcessor: processor }))

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
    ? layerWith(new BatchSpanProcessor(new OTLPTraceExporter()), env["OTEL_SERVICE_NAME"] ?? "tollgate")
    : layerDisabled
