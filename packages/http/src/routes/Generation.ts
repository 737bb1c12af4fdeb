/**
 * `GET /generation?id=<answer id>`: what one chat call did, for the account that made it (OpenRouter
 * offers the same): the model that served it, the upstream that answered, its tokens, its cost as
 * the ledger captured it, its latency and whether it was cut short. An id of another account's call
 * is answered like an unknown one, a 404, so ids reveal nothing across accounts.
 *
 * @since 0.1.0
 */
import { Errors, Generations, Money } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

const Query = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256)).annotate({ description: "The answer's id" })
})

/**
 * The 200 body.
 *
 * @category schemas
 */
export const GenerationBody = Schema.Struct({
  data: Schema.Struct({
    id: Schema.String,
    model: Schema.String,
    upstream: Schema.String.annotate({ description: "The host of the upstream that answered, or local" }),
    prompt_tokens: Schema.Int,
    completion_tokens: Schema.Int,
    cached_tokens: Schema.Int,
    cost: Schema.Finite.annotate({ description: "USD, as the ledger captured it (the answer's usage.cost)" }),
    latency_ms: Schema.Int,
    cut_short: Schema.Boolean.annotate({
      description: "The answer ended before the model finished (a client that hung up, an upstream that broke off)"
    }),
    created_at: Schema.String
  })
}).annotate({ identifier: "Generation" })

/** @category routes */
export const route = Route.make(
  "GET",
  "/api/v1/generation",
  Effect.gen(function*() {
    const auth = yield* Auth
    const generations = yield* Generations.Generations
    return Effect.gen(function*() {
      const principal = yield* Authenticate.requireKey(auth)
      const { id } = yield* RequestQuery.schema(Query)
      const found = yield* generations.get(principal.accountId, id)
      if (Option.isNone(found)) return yield* new Errors.NotFound({ message: `No generation ${id}` })
      const generation = found.value
      return HttpServerResponse.jsonUnsafe({
        data: {
          id: generation.id,
          model: generation.model,
          upstream: generation.upstream,
          prompt_tokens: generation.promptTokens,
          completion_tokens: generation.completionTokens,
          cached_tokens: generation.cachedTokens,
          cost: Money.toUsdNumber(generation.cost),
          latency_ms: generation.latencyMs,
          cut_short: generation.cutShort,
          created_at: new Date(generation.createdAt).toISOString()
        }
      }, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "What one chat call did",
    description: "For the id of a chat completion, response or message answered to this account: the model that served " +
      "it, the upstream, the tokens, the cost as charged, the latency and whether it was cut short. Another account's " +
      "id is a 404, like an unknown one. Kept for 7 days.",
    tags: ["Chat"],
    security: "key",
    query: Query,
    responses: {
      200: { description: "The call", schema: GenerationBody },
      404: { description: "No call of this account has that id" }
    }
  }
)
