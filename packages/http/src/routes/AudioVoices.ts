/**
 * `GET /audio/voices`: the voices each speech model speaks in, from the model configuration (what
 * `voice` of `POST /audio/speech` and `/audio/queue` accepts), public like the model list so a
 * client can offer them before it has a key. `?model=` narrows it to one speech model (an id or an
 * alias); a model that is not a speech model is a 400 naming `model`.
 *
 * The published reference's `POST /audio/voices` clones a voice from a sample; no backend here
 * can, so that method is not served.
 *
 * @since 0.1.0
 */
import { Models } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

/** @category schemas */
export const ModelVoices = Schema.Struct({
  model: Schema.String,
  voices: Schema.Array(Schema.String),
  /** The first voice configured: what a client offers first. */
  default_voice: Schema.String
}).annotate({ identifier: "ModelVoices" })

const voicesOf = (model: Models.SpeechModel): typeof ModelVoices.Type => ({
  model: model.id,
  voices: model.voices,
  default_voice: model.voices[0]!
})

/** @category routes */
export const route = Route.make(
  "GET",
  "/api/v1/audio/voices",
  Effect.gen(function*() {
    const models = yield* Models.ModelList
    const all = models.all.filter((model): model is Models.SpeechModel => model.type === "tts").map(voicesOf)
    return Effect.gen(function*() {
      const name = RequestQuery.params(yield* HttpServerRequest.HttpServerRequest)["model"]
      const data = name === undefined ? all : [voicesOf(yield* models.ofType("tts", name))]
      return HttpServerResponse.jsonUnsafe({ object: "list", data })
    })
  }),
  {
    summary: "List the voices of the speech models",
    description: "The voices of every speech model (or of the one model names), as voice of POST /audio/speech and " +
      "POST /audio/queue accepts them; default_voice is the first. Public, like the model list.",
    tags: ["Audio"],
    security: "public",
    query: Schema.Struct({ model: Schema.optionalKey(Schema.String) }),
    responses: {
      200: {
        description: "The voices",
        schema: Schema.Struct({ object: Schema.Literal("list"), data: Schema.Array(ModelVoices) }).annotate({ identifier: "AudioVoices" })
      },
      400: { description: "model is not a speech model" }
    }
  }
)
