/**
 * Contract tests: one suite, written once, run against every layer of a service (memory and
 * Redis). No backend is ever skipped: one that cannot be had fails its file (see `RedisServer`).
 *
 * @since 0.1.0
 */
import { describe, layer } from "@effect/vitest"
import type * as Vitest from "@effect/vitest"
import type { Layer } from "effect"

/** @category models */
export interface Backend<ROut, E = never> {
  readonly name: string
  readonly layer: Layer.Layer<ROut, E>
}

/**
 * Runs `suite` once per backend, in a `describe` named after the backend, with the backend's
 * layer built once for the block.
 *
 * @category constructors
 */
export const contract = <ROut, E>(
  name: string,
  backends: ReadonlyArray<Backend<ROut, E>>,
  suite: (it: Vitest.Vitest.MethodsNonLive<ROut>, backend: string) => void,
  options: { readonly timeout?: number } = {}
) => {
  describe(name, () => {
    for (const backend of backends) {
      layer(backend.layer, { timeout: options.timeout ?? 30_000 })(backend.name, (it) => suite(it, backend.name))
    }
  })
}
