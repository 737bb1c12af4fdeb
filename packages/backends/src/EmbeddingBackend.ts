/**
 * Embeddings from an OpenAI-compatible `POST /embeddings` upstream, or, for a model with no
 * upstreams, from a local deterministic function (the dev model). The upstream is always asked for
 * float vectors; the route encodes them the way the client asked, so base64 works the same with
 * every upstream.
 *
 * **Details**
 *
 * The local function hashes each word (or token id) into a signed position of the vector and
 * normalizes it: the same input always gives the same vector, and inputs sharing words are closer
 * than inputs that share none. It is a stand-in for the quick start, not a model.
 *
 * @since 0.1.0
 */
import { Errors, type Models } from "@tollgate/core"
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

/** One input: a text, or the token ids of one. @category models */
export type Input = string | ReadonlyArray<number>

/** @category models */
export interface Call {
  readonly model: Models.EmbeddingModel
  readonly inputs: ReadonlyArray<Input>
  /** Shorter vectors, when the model supports them. */
  readonly dimensions?: number | undefined
  readonly user?: string | undefined
}

/** @category models */
export interface Embedded {
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  /** The upstream's count of the input tokens, when it reported one. */
  readonly promptTokens: number | undefined
}

/** @category services */
export class EmbeddingBackend extends Context.Service<EmbeddingBackend, {
  readonly embed: (call: Call) => Effect.Effect<Embedded, Errors.ApiError>
}>()("@tollgate/backends/EmbeddingBackend") {}

/** FNV-1a, 32 bits: a stable, fast hash (not a security boundary). */
const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/**
 * The dev model's vector of one input.
 *
 * @category local
 */
export const localVector = (input: Input, dimensions: number): Array<number> => {
  const vector = new Array<number>(dimensions).fill(0)
  const features = typeof input === "string"
    ? input.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((word) => word.length > 0)
    : input.map(String)
  for (const feature of features.length === 0 ? [""] : features) {
    const hash = fnv1a(feature)
    vector[hash % dimensions]! += (hash & 0x8000_0000) === 0 ? 1 : -1
  }
  const norm = Math.hypot(...vector)
  return vector.map((value) => (norm === 0 ? 0 : value / norm))
}

const isVector = (u: unknown): u is Array<number> => Array.isArray(u) && u.every((n) => typeof n === "number")

const readEmbeddings = (body: unknown, count: number): Embedded | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  const data = (body as { data?: unknown }).data
  if (!Array.isArray(data) || data.length !== count) return undefined
  const vectors: Array<Array<number>> = new Array(count)
  for (const item of data as Array<{ index?: unknown; embedding?: unknown }>) {
    const index = typeof item.index === "number" ? item.index : -1
    if (index < 0 || index >= count || !isVector(item.embedding)) return undefined
    vectors[index] = item.embedding
  }
  if (vectors.some((vector) => vector === undefined)) return undefined
  const usage = (body as { usage?: { prompt_tokens?: unknown } }).usage
  return { vectors, promptTokens: typeof usage?.prompt_tokens === "number" ? usage.prompt_tokens : undefined }
}

/** @category options */
export interface Options {
  readonly timeout?: Duration.Input
}

/**
 * The adapter over an `HttpClient`.
 *
 * @category constructors
 */
export const make = Effect.fnUntraced(function*(options: Options = {}) {
  const client = yield* HttpClient.HttpClient
  const timeout = options.timeout ?? Duration.seconds(60)
  return EmbeddingBackend.of({
    embed: Effect.fn("EmbeddingBackend.embed")(function*(call: Call) {
      if (call.model.upstreams.length === 0) {
        const dimensions = call.dimensions ?? call.model.dimensions
        return { vectors: call.inputs.map((input) => localVector(input, dimensions)), promptTokens: undefined }
      }
      const answer = yield* OpenAiCompatible.call(call.model.upstreams, {
        timeout,
        request: (upstream, url) =>
          HttpClientRequest.post(url("/embeddings")).pipe(HttpClientRequest.bodyJsonUnsafe({
            model: upstream.model ?? call.model.id,
            input: call.inputs,
            encoding_format: "float",
            ...(call.dimensions === undefined ? {} : { dimensions: call.dimensions }),
            ...(call.user === undefined ? {} : { user: call.user })
          })),
        read: (response) =>
          Effect.map(Effect.orElseSucceed(response.json, () => undefined), (body) => readEmbeddings(body, call.inputs.length)),
        onRefusal: (refusal) => new Errors.InvalidRequest({ message: `The embedding model refused the request: ${refusal.message}` })
      }).pipe(Effect.provideService(HttpClient.HttpClient, client))
      return answer.value
    })
  })
})

/** @category layers */
export const layer = (options: Options = {}): Layer.Layer<EmbeddingBackend, never, HttpClient.HttpClient> =>
  Layer.effect(EmbeddingBackend, make(options))
