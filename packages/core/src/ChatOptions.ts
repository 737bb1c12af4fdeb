/**
 * The chat completion request as tollgate reads it: the few OpenAI fields it must understand to
 * route, meter and cap a call (`model`, `messages`, `stream`, `max_tokens`, `n`,
 * `prompt_cache_key`), and the service's own options, `service_parameters`, which may also ride on
 * the model name as a suffix: `<model>:<option>=<value>`, several joined with `&`
 * (`llama-3.3-70b:strip_thinking_response=true&enable_web_search=on`).
 *
 * When an option is given both ways, the suffix wins, field by field: the model string is the most
 * specific choice a caller makes (apps often let their user pick a model string while their code
 * sends fixed `service_parameters`). Every other request field is kept as sent and forwarded
 * unvalidated, as the spec allows. Bad values are a 400 DetailedError naming the field.
 *
 * **Details**
 *
 * The prompts the service adds live here too (`ChatPrompts`): the operator's default system prompt,
 * prepended unless `include_venice_system_prompt` is false, and the characters `character_slug`
 * picks from.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Result, Schema, type SchemaIssue } from "effect"
import { fieldErrors, fieldErrorsFromIssue, InvalidRequest, invalidRequestFromIssue } from "./Errors.ts"

/**
 * `service_parameters`: every field of the spec's table, with its default.
 *
 * @category schemas
 */
export const ServiceParameters = Schema.Struct({
  character_slug: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))),
  strip_thinking_response: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  disable_thinking: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  enable_web_search: Schema.Literals(["off", "on", "auto"]).pipe(
    Schema.withDecodingDefaultKey(Effect.succeed("off" as const))
  ),
  enable_web_scraping: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  enable_x_search: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  enable_web_citations: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  include_search_results_in_stream: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  return_search_results_as_documents: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false))),
  include_venice_system_prompt: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(true)))
})

/** @category models */
export type ServiceParameters = typeof ServiceParameters.Type

/** @category models */
export type OptionName = keyof typeof ServiceParameters.fields

const optionNames = new Set<string>(Object.keys(ServiceParameters.fields))

const booleanOptions = new Set<string>([
  "strip_thinking_response",
  "disable_thinking",
  "enable_web_scraping",
  "enable_x_search",
  "enable_web_citations",
  "include_search_results_in_stream",
  "return_search_results_as_documents",
  "include_venice_system_prompt"
])

/**
 * The options with every default applied.
 *
 * @category constants
 */
export const defaults: ServiceParameters = Schema.decodeUnknownSync(ServiceParameters)({})

const decodeOptions = Schema.decodeUnknownResult(ServiceParameters)

/**
 * Whether the reply must lose its think-tag blocks.
 *
 * @category predicates
 */
export const stripsThinking = (options: ServiceParameters): boolean => options.strip_thinking_response || options.disable_thinking

/**
 * Which search the request needs, in the spec's order of precedence: scraping bypasses web
 * search, and X search bypasses the standard web search.
 *
 * @category predicates
 */
export const searchMode = (options: ServiceParameters): "scrape" | "x" | "web" | "none" =>
  options.enable_web_scraping
    ? "scrape"
    : options.enable_x_search
    ? "x"
    : options.enable_web_search !== "off"
    ? "web"
    : "none"

const SUFFIX_PAIR = /^([a-z_]+)=([^&]*)$/

/**
 * Splits `<model>:<option>=<value>&...` into the model id and its raw options. A model id may hold
 * colons itself (`qwen3:8b`), so the suffix starts at the first colon after which everything is
 * `name=value` pairs; a model string without such a colon has no suffix.
 *
 * @category parsing
 */
export const splitModel = (model: string): { readonly id: string; readonly suffix: ReadonlyArray<readonly [string, string]> } => {
  for (let colon = model.indexOf(":"); colon !== -1; colon = model.indexOf(":", colon + 1)) {
    const pairs = model.slice(colon + 1).split("&").map((pair) => SUFFIX_PAIR.exec(pair))
    if (pairs.every((match) => match !== null)) {
      return { id: model.slice(0, colon), suffix: pairs.map((match) => [match[1]!, decodeURIComponent(match[2]!)] as const) }
    }
  }
  return { id: model, suffix: [] }
}

const suffixValue = (name: string, value: string): unknown =>
  booleanOptions.has(name) ? (value === "true" ? true : value === "false" ? false : value) : value

/**
 * The options of a request: `service_parameters` merged with the model suffix (the suffix wins).
 * Unknown option names are refused in both forms, so a typo never silently does nothing.
 *
 * @category parsing
 */
export const parseOptions = (
  object: unknown,
  suffix: ReadonlyArray<readonly [string, string]>
): Result.Result<ServiceParameters, InvalidRequest> => {
  const problems: Array<{ path: ReadonlyArray<PropertyKey>; message: string }> = []
  if (object !== undefined && (typeof object !== "object" || object === null || Array.isArray(object))) {
    problems.push({ path: ["service_parameters"], message: "Expected an object" })
  }
  const fromObject = typeof object === "object" && object !== null && !Array.isArray(object)
    ? object as Record<string, unknown>
    : {}
  for (const name of Object.keys(fromObject)) {
    if (!optionNames.has(name)) problems.push({ path: ["service_parameters", name], message: "Unknown option" })
  }
  const fromSuffix: Record<string, unknown> = {}
  for (const [name, value] of suffix) {
    if (!optionNames.has(name)) problems.push({ path: ["model", name], message: "Unknown option" })
    else fromSuffix[name] = suffixValue(name, value)
  }
  if (problems.length > 0) {
    return Result.fail(new InvalidRequest({ message: "Invalid service_parameters", details: fieldErrors(problems) }))
  }
  // Most calls set no option: theirs are the defaults, decoded once, not on every call.
  if (suffix.length === 0 && Object.keys(fromObject).length === 0) return Result.succeed(defaults)
  const suffixCheck = suffix.length === 0 ? undefined : decodeOptions(fromSuffix, { errors: "all" })
  if (suffixCheck !== undefined && Result.isFailure(suffixCheck)) {
    return Result.fail(
      new InvalidRequest({
        message: "Invalid service_parameters in the model suffix",
        details: { _errors: [], model: fieldErrorsFromIssue(suffixCheck.failure.issue) }
      })
    )
  }
  return decodeOptions({ ...fromObject, ...fromSuffix }, { errors: "all" }).pipe(
    Result.mapError((error) =>
      new InvalidRequest({
        message: "Invalid service_parameters",
        details: { _errors: [], service_parameters: fieldErrorsFromIssue(error.issue) }
      })
    )
  )
}

const Message = Schema.Struct({
  role: Schema.String.check(Schema.isMinLength(1)),
  content: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(Schema.Unknown), Schema.Null]))
})

const ModelName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(512))

/**
 * The most models one request may name (`model` and its fallbacks in `models`).
 *
 * @category constants
 */
export const MAX_MODELS = 8

/**
 * The request fields tollgate reads. Everything else in the body passes through as sent.
 *
 * @category schemas
 */
export const ChatRequestFields = Schema.Struct({
  model: ModelName,
  models: Schema.optionalKey(Schema.Array(ModelName).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_MODELS))),
  messages: Schema.Array(Message).check(Schema.isMinLength(1)),
  stream: Schema.optionalKey(Schema.Boolean),
  max_tokens: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  max_completion_tokens: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  n: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 16 }))),
  prompt_cache_key: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(1024))),
  stream_options: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/**
 * A chat message, kept as the client sent it (`cache_control` on content parts and any other
 * field survive untouched).
 *
 * @category models
 */
export type Message = Readonly<Record<string, unknown>> & { readonly role: string; readonly content?: unknown }

/** @category models */
export interface ChatRequest {
  /** The model id, suffix removed. */
  readonly model: string
  /**
   * The models to try, in order, when `model` cannot serve the call (`models`, without `model`),
   * as ids: their suffixes are dropped, the request's options apply to each.
   */
  readonly fallbacks: ReadonlyArray<string>
  readonly options: ServiceParameters
  readonly messages: ReadonlyArray<Message>
  readonly stream: boolean
  /** `max_tokens` or `max_completion_tokens` (the smaller when both are sent). */
  readonly maxTokens: number | undefined
  /** Number of choices asked for (`n`). */
  readonly choices: number
  readonly promptCacheKey: string | undefined
  /** The body without `model` and `service_parameters`, every other field as sent. */
  readonly passthrough: Readonly<Record<string, unknown>>
}

/**
 * Reads a chat completion body: validates the fields tollgate relies on and the options, keeps
 * the rest for the upstream.
 *
 * @category parsing
 */
export const parseRequest = (body: unknown): Result.Result<ChatRequest, InvalidRequest> => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return Result.fail(new InvalidRequest({ message: "The request body must be a JSON object" }))
  }
  // OpenRouter's shape: with `models`, `model` may be left out and the first of them is the model
  const { model, models, service_parameters, ...passthrough } = body as Record<string, unknown>
  const named = model === undefined && Array.isArray(models) ? { ...body, model: models[0] } : body
  const fields = Schema.decodeUnknownResult(ChatRequestFields)(named, { errors: "all" })
  if (Result.isFailure(fields)) return Result.fail(invalidFields(fields.failure.issue))
  const { id, suffix } = splitModel(fields.success.model)
  const fallbacks = [...new Set((fields.success.models ?? []).map((model) => splitModel(model).id))].filter((model) => model !== id)
  return Result.map(parseOptions(service_parameters, suffix), (options) => {
    const { max_completion_tokens, max_tokens } = fields.success
    const limits = [max_tokens, max_completion_tokens].filter((n): n is number => n !== undefined)
    return {
      model: id,
      fallbacks,
      options,
      messages: (body as { messages: ReadonlyArray<Message> }).messages,
      stream: fields.success.stream === true,
      maxTokens: limits.length === 0 ? undefined : Math.min(...limits),
      choices: fields.success.n ?? 1,
      promptCacheKey: fields.success.prompt_cache_key,
      passthrough
    }
  })
}

const invalidFields = (issue: SchemaIssue.Issue) => invalidRequestFromIssue(issue)

/**
 * A character a caller may pick with `character_slug`.
 *
 * @category models
 */
export interface Character {
  readonly name: string
  readonly systemPrompt: string
  /** What `GET /characters` shows of it; the system prompt is never listed. */
  readonly description?: string | undefined
  readonly tags?: ReadonlyArray<string> | undefined
  /** The model the character is written for. */
  readonly modelId?: string | undefined
  readonly adult?: boolean | undefined
}

/**
 * The prompts the service adds to a conversation.
 *
 * @category services
 */
export class ChatPrompts extends Context.Service<ChatPrompts, {
  /** Prepended to the caller's messages unless `include_venice_system_prompt` is false. */
  readonly systemPrompt: string | undefined
  readonly characters: ReadonlyMap<string, Character>
}>()("@tollgate/core/ChatOptions/ChatPrompts") {}

/**
 * Prompts from config.
 *
 * @category layers
 */
export const layerPrompts = (config: {
  readonly systemPrompt?: string | undefined
  readonly characters?: Readonly<Record<string, Character>> | undefined
} = {}): Layer.Layer<ChatPrompts> =>
  Layer.succeed(ChatPrompts, {
    systemPrompt: config.systemPrompt,
    characters: new Map(Object.entries(config.characters ?? {}))
  })

/**
 * The system messages the service puts before the caller's: its default system prompt (when
 * configured and not turned off), then the character's. An unknown character is a 400.
 *
 * @category prompts
 */
export const serviceMessages = (
  prompts: ChatPrompts["Service"],
  options: ServiceParameters
): Result.Result<ReadonlyArray<Message>, InvalidRequest> => {
  const messages: Array<Message> = []
  if (options.include_venice_system_prompt && prompts.systemPrompt !== undefined) {
    messages.push({ role: "system", content: prompts.systemPrompt })
  }
  if (options.character_slug !== undefined) {
    const character = prompts.characters.get(options.character_slug)
    if (character === undefined) {
      return Result.fail(
        new InvalidRequest({
          message: `Unknown character: ${options.character_slug}`,
          details: fieldErrors([{
            path: ["service_parameters", "character_slug"],
            message: `Unknown character: ${options.character_slug}`
          }])
        })
      )
    }
    messages.push({ role: "system", content: character.systemPrompt })
  }
  return Result.succeed(messages)
}
