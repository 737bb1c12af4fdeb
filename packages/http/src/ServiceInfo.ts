/**
 * What the service says about itself on every response: its revision (`x-service-version`), the
 * host that answered (`x-service-host-name`), and the public origin clients reach it at (used to
 * build SIWX challenges and discovery bodies).
 *
 * @since 0.1.0
 */
import { Context, Layer } from "effect"
import * as Os from "node:os"

/** @category models */
export interface Info {
  /** Date-and-time style revision, e.g. `2026-11-22T23.38.00`. */
  readonly version: string
  readonly hostName: string
  /** Origin clients use, e.g. `https://api.example.com`; SIWX domains and URIs are checked against it. */
  readonly publicOrigin: string
}

/** @category services */
export class ServiceInfo extends Context.Service<ServiceInfo, Info>()("@tollgate/http/ServiceInfo") {}

/**
 * A revision string for a point in time: `YYYYMMDD.HHMMSS` in UTC.
 *
 * @category constructors
 */
export const revisionAt = (date: Date): string => {
  const iso = date.toISOString()
  return `${iso.slice(0, 10).replaceAll("-", "")}.${iso.slice(11, 19).replaceAll(":", "")}`
}

/**
 * Defaults for tests and embedding: revision = process start, the machine's host name.
 *
 * @category layers
 */
export const layer = (info: Partial<Info> = {}): Layer.Layer<ServiceInfo> =>
  Layer.succeed(ServiceInfo, {
    version: info.version ?? revisionAt(new Date(Date.now() - process.uptime() * 1000)),
    hostName: info.hostName ?? Os.hostname(),
    publicOrigin: info.publicOrigin ?? "http://localhost:8787"
  })
