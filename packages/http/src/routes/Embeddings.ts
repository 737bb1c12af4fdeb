/**
 * `POST /embeddings`: OpenAI-compatible embeddings, billed per input token under the embedding
 * kind's rate limit. The body, the model and every input are checked before anything is held;
 * the hold is the price of the input tokens as counted here (o200k_base for texts, the length of a
 * token array), and the charge is the upstream's own count when it reports one, never more than
 * the hold. Vectors are answered as float arrays or, with `encoding_format: "base64"` (what the
 * `openai` SDK sends by default), as the base64 of their little-endian float32 bytes.
 *
 * @since 0.1.0
 */
import * as EmbeddingBackend from "@tollgate/backends/EmbeddingBackend"
import { Errors, Models, Money, PricingEngine } from "@tollgate/core"
import * as Tokens from "@tollgate/documents/Tokens"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"

/** The most inputs one request may embed (the OpenAI API's limit). */
const MAX_INPUTS = 2048

const TokenIds = Schema.Array(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))

/**
 * The request body.
 *
 * @category schemas
 */

export const EmbeddingRequest = Schema.Struct({
  model: Schema.String,
  input: Schema.Union([Schema.String, Schema.Array(Schema.String), TokenIds, Schema.Array(TokenIds)]),
  encoding_format: Schema.optionalKey(Schema.Literals(["float", "base64"])),
  dimensions: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  user: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "EmbeddingRequest" })

/**
 * The 200 body.
 *
 * @category schemas
 */
export const EmbeddingResponse = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({
    object: Schema.Literal("embedding"),
    index: Schema.Int,
    embedding: Schema.Union([Schema.Array(Schema.Finite), Schema.String])
  })),
  model: Schema.String,
  usage: Schema.Struct({
    prompt_tokens: Schema.Int,
    total_tokens: Schema.Int,
    cost: Schema.Finite.annotate({ description: "What the call was charged, in USD (to the nano-USD, as the ledger captured it)" })
  })
}).annotate({ identifier: "EmbeddingResponse" })

type Body = typeof EmbeddingRequest.Type

const inputsOf = (input: Body["input"]): ReadonlyArray<EmbeddingBackend.Input> =>
  typeof input === "string"
    ? [input]
    : input.length > 0 && typeof input[0] === "number"
    ? [input as ReadonlyArray<number>]
    : input as ReadonlyArray<EmbeddingBackend.Input>

const tokensOf = (input: EmbeddingBackend.Input) => typeof input === "string" ? Tokens.count(input) : input.length

const base64Of = (vector: ReadonlyArray<number>) => {
  const floats = Float32Array.from(vector)
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString("base64")
}

/** The body, with its inputs and each one's tokens, checked against its model. */
interface Checked {
  readonly body: Body
  readonly model: Models.EmbeddingModel
  readonly inputs: ReadonlyArray<EmbeddingBackend.Input>
  readonly tokens: number
}

/** @category routes */
export const route = Endpoint.make({
  method: "POST",
  path: "/api/v1/embeddings",
  kind: "embedding",
  settlesActual: true,
  serve: Effect.gen(function*() {
    const models = yield* Models.ModelList
    const tables = yield* PricingEngine.PricingEngine
    const backend = yield* EmbeddingBackend.EmbeddingBackend
    return {
      decode: Effect.gen(function*() {
        const body = yield* RequestBody.schema(EmbeddingRequest)
        const model = yield* models.ofType("embedding", body.model)
        const inputs = inputsOf(body.input)
        const counts = inputs.map(tokensOf)
        const problems: Array<{ readonly path: ReadonlyArray<string | number>; readonly message: string }> = []
        if (inputs.length === 0) problems.push({ path: ["input"], message: "Expected at least one input" })
        if (inputs.length > MAX_INPUTS) problems.push({ path: ["input"], message: `Expected at most ${MAX_INPUTS} inputs` })
        inputs.forEach((input, i) => {
          const path = typeof body.input === "string" || typeof body.input[0] === "number" ? ["input"] : ["input", i]
          if (input.length === 0) problems.push({ path, message: "An input must not be empty" })
          else if (counts[i]! > model.maxInputTokens) {
            problems.push({ path, message: `An input may have at most ${model.maxInputTokens} tokens; this one has ${counts[i]}` })
          }
        })
        if (body.dimensions !== undefined && !model.supportsDimensions) {
          problems.push({ path: ["dimensions"], message: `${model.id} does not support dimensions` })
        } else if (body.dimensions !== undefined && body.dimensions > model.dimensions) {
          problems.push({ path: ["dimensions"], message: `${model.id} has at most ${model.dimensions} dimensions` })
        }
        if (problems.length > 0) return yield* Errors.invalidParameters(problems)
        return { body, model, inputs, tokens: counts.reduce((sum, count) => sum + count, 0) } satisfies Checked
      }),
      subject: ({ model }: Checked) => ({ models: [model.id] }),
      quote: ({ model, tokens }: Checked) => PricingEngine.media(tables, "embedding", model.id, tokens),
      execute: ({ body, inputs, model, tokens }: Checked, quote: PricingEngine.Quote) =>
        Effect.map(backend.embed({ model, inputs, dimensions: body.dimensions, user: body.user }), (embedded) => {
          const billed = Math.min(embedded.promptTokens ?? tokens, tokens)
          const actual = PricingEngine.media(tables, "embedding", model.id, billed)
          const base64 = body.encoding_format === "base64"
          const charge = PricingEngine.isUnpriced(actual) ? quote.amount : Money.min(actual.amount, quote.amount)
          return {
            response: HttpServerResponse.jsonUnsafe({
              object: "list",
              data: embedded.vectors.map((vector, index) => ({
                object: "embedding",
                index,
                embedding: base64 ? base64Of(vector) : vector
              })),
              model: model.id,
              usage: { prompt_tokens: billed, total_tokens: billed, cost: Money.toUsdNumber(charge) }
            }, { headers: Models.headersOf(model) }),
            charge,
            usage: { units: billed, pricePerUnit: quote.pricePerUnit, promptTokens: billed, notes: `${inputs.length} inputs` }
          }
        })
    }
  }),
  docs: {
    summary: "Create embeddings (OpenAI-compatible)",
    description: "Vectors of one or more inputs (a string, an array of strings, an array of token ids or an array of " +
      "those). encoding_format base64 answers each vector as the base64 of its little-endian float32 bytes; " +
      "dimensions asks for shorter vectors on models that support it. Billed per input token.",
    tags: ["Embeddings"],
    request: {
      contentType: "application/json",
      schema: EmbeddingRequest,
      example: { model: "text-embedding-3-small", input: "The quick brown fox" }
    },
    responses: {
      200: { description: "The embeddings", schema: EmbeddingResponse, headers: Models.headerNames }
    }
  }
})
