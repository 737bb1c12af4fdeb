/**
 * `GET /characters` and `GET /characters/{slug}`: the characters a chat call may pick with
 * `character_slug`, from the configuration (`chat.characters`), public like the model list. A
 * character is shown by its name, description, tags, model and adult flag; its system prompt,
 * which chat applies, is never listed. The list filters by `search` (name or description, any
 * case), `tags` (comma-separated, any of them), `modelId` and `isAdult`, and pages with `limit`
 * and `offset`.
 *
 * @since 0.1.0
 */
import { ChatOptions, Errors } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as RequestBody from "../RequestBody.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"

const Entry = Schema.Struct({
  slug: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  modelId: Schema.NullOr(Schema.String),
  adult: Schema.Boolean
}).annotate({ identifier: "Character" })

const entryOf = (slug: string, character: ChatOptions.Character): typeof Entry.Type => ({
  slug,
  name: character.name,
  description: character.description ?? null,
  tags: character.tags ?? [],
  modelId: character.modelId ?? null,
  adult: character.adult ?? false
})

const Count = Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0))

/** @category schemas */
export const ListQuery = Schema.Struct({
  search: Schema.optionalKey(Schema.String),
  tags: Schema.optionalKey(Schema.String),
  modelId: Schema.optionalKey(Schema.String),
  isAdult: Schema.optionalKey(Schema.Literals(["true", "false"])),
  limit: Schema.optionalKey(Count.check(Schema.isBetween({ minimum: 1, maximum: 500 }))),
  offset: Schema.optionalKey(Count)
})

/** @category routes */
export const list = Route.make(
  "GET",
  "/api/v1/characters",
  Effect.gen(function*() {
    const prompts = yield* ChatOptions.ChatPrompts
    const entries = [...prompts.characters].map(([slug, character]) => entryOf(slug, character))
    return Effect.gen(function*() {
      const query = yield* RequestBody.decode(ListQuery, RequestQuery.params(yield* HttpServerRequest.HttpServerRequest))
      const search = query.search?.toLowerCase()
      const tags = query.tags?.split(",").map((tag) => tag.trim()).filter((tag) => tag !== "")
      const found = entries.filter((entry) =>
        (search === undefined || entry.name.toLowerCase().includes(search) || (entry.description ?? "").toLowerCase().includes(search)) &&
        (tags === undefined || tags.length === 0 || tags.some((tag) => entry.tags.includes(tag))) &&
        (query.modelId === undefined || entry.modelId === query.modelId) &&
        (query.isAdult === undefined || entry.adult === (query.isAdult === "true"))
      )
      const offset = query.offset ?? 0
      return HttpServerResponse.jsonUnsafe({ object: "list", data: found.slice(offset, offset + (query.limit ?? 50)) })
    })
  }),
  {
    summary: "List characters",
    description: "The characters chat's character_slug picks, from the configuration: name, description, tags, model and " +
      "adult flag (never the system prompt). Filters: search (name or description), tags (comma-separated, any), modelId, " +
      "isAdult; pages of limit (default 50) from offset.",
    tags: ["Characters"],
    security: "public",
    query: ListQuery,
    responses: {
      200: {
        description: "The characters",
        schema: Schema.Struct({ object: Schema.Literal("list"), data: Schema.Array(Entry) }).annotate({ identifier: "CharacterList" })
      }
    }
  }
)

/** @category routes */
export const get = Route.make(
  "GET",
  "/api/v1/characters/:slug",
  Effect.gen(function*() {
    const prompts = yield* ChatOptions.ChatPrompts
    return Effect.gen(function*() {
      const { slug = "" } = yield* Route.params
      const character = prompts.characters.get(slug)
      if (character === undefined) return yield* new Errors.NotFound({ message: `No character ${slug}` })
      return HttpServerResponse.jsonUnsafe({ data: entryOf(slug, character) })
    })
  }),
  {
    summary: "Retrieve a character",
    description: "One character by its slug, as the list shows it.",
    tags: ["Characters"],
    security: "public",
    responses: {
      200: { description: "The character", schema: Schema.Struct({ data: Entry }).annotate({ identifier: "CharacterResponse" }) },
      404: { description: "No character of that slug", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [list, get] as const
