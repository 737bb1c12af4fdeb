/**
 * Contract tests: one suite, written once, run against every layer of a service (memory and
 * Redis). A backend that cannot be had locally is skipped with its reason; under `CI` the Redis
 * helper fails instead (see `RedisServer`).
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
  /** When set, the backend is skipped and this says why. */
  readonly skip?: string | undefined
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
      if (backend.skip !== undefined) {
        describe.skip(`${backend.name} (${backend.skip})`, () => {})
        continue
      }
      layer(backend.layer, { timeout: options.timeout ?? 30_000 })(backend.name, (it) => suite(it, backend.name))
    }
  })
}
