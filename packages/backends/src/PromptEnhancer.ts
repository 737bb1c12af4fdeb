/**
 * Prompt enhancement for image generation (`enhance_prompt`): the prompt is rewritten before the
 * image is drawn. `layerLocal` is the dev enhancer, deterministic (the same prompt always gives the
 * same rewrite) and instant; `layerChat` asks an OpenAI-compatible chat model to rewrite it. Either
 * way the result stays within the image model's prompt limit.
 *
 * @since 0.1.0
 */
import { Errors, type Models } from "@tollgate/core"
import { Context, Duration, Effect, Layer } from "effect"
import { HttpClient } from "effect/http"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

/** @category models */
export interface EnhanceOptions {
  readonly model: Models.ImageModel
  /** Whether the enhancer may think first (off only for models that support turning it off). */
  readonly thinking: boolean
}

/** @category services */
export class PromptEnhancer extends Context.Service<PromptEnhancer, {
  readonly enhance: (prompt: string, options: EnhanceOptions) => Effect.Effect<string, Errors.ApiError>
}>()("@tollgate/backends/PromptEnhancer") {}

const LIGHTING = ["soft natural light", "golden hour light", "dramatic rim lighting", "diffuse studio light"]
const DETAIL = ["highly detailed", "crisp textures", "fine detail", "intricate detail"]
const FRAMING = ["balanced composition", "shallow depth of field", "wide establishing shot", "rule of thirds"]

const pick = (words: ReadonlyArray<string>, hash: number) => words[hash % words.length] ?? ""

const hashOf = (text: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

/**
 * Cuts a prompt to a model's limit at a word boundary when there is one.
 *
 * @category constructors
 */
export const fit = (prompt: string, limit: number): string => {
  if (prompt.length <= limit) return prompt
  const cut = prompt.slice(0, limit)
  const space = cut.lastIndexOf(" ")
  return (space > limit / 2 ? cut.slice(0, space) : cut).trimEnd()
}

/**
 * The dev enhancer's rewrite: the prompt with lighting, detail and framing chosen from its hash.
 *
 * @category constructors
 */
export const enhanceLocally = (prompt: string, model: Models.ImageModel): string => {
  const hash = hashOf(prompt)
  const extra = `${pick(LIGHTING, hash)}, ${pick(DETAIL, hash >>> 8)}, ${pick(FRAMING, hash >>> 16)}`
  return fit(`${prompt.trim()}, ${extra}`, model.promptCharacterLimit)
}

/** @category layers */
export const layerLocal: Layer.Layer<PromptEnhancer> = Layer.succeed(PromptEnhancer, {
  enhance: (prompt, { model }) => Effect.succeed(enhanceLocally(prompt, model))
})

const INSTRUCTION = "Rewrite the user's image prompt into one richer prompt for an image model: keep the subject and " +
  "intent, add concrete detail about style, lighting and composition. Answer with the prompt only."

/** @category options */
export interface ChatOptions {
  readonly upstreams: ReadonlyArray<Models.Upstream>
  /** The chat model that rewrites (the upstream's name unless an upstream overrides it). */
  readonly model: string
  readonly timeout?: Duration.Input
}

const contentOf = (body: unknown): string | undefined => {
  const choices = typeof body === "object" && body !== null && "choices" in body ? body.choices : undefined
  const first = Array.isArray(choices) ? choices[0] as { message?: { content?: unknown } } | undefined : undefined
  const content = first?.message?.content
  return typeof content === "string" && content.trim() !== "" ? content.trim() : undefined
}

/**
 * Rewrites through an OpenAI-compatible `POST /chat/completions`; when the image model supports
 * turning prompt-optimization thinking off and the request did, the chat model is asked not to
 * think. An empty answer keeps the original prompt.
 *
 * @category layers
 */
export const layerChat = (options: ChatOptions): Layer.Layer<PromptEnhancer, never, HttpClient.HttpClient> =>
  Layer.effect(
    PromptEnhancer,
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      return PromptEnhancer.of({
        enhance: Effect.fn("PromptEnhancer.enhance")(function*(prompt, { model, thinking }) {
          const body = yield* OpenAiCompatible.postJson(options.upstreams, "/chat/completions", options.model, {
            messages: [{ role: "system", content: INSTRUCTION }, { role: "user", content: prompt }],
            ...(thinking ? {} : { service_parameters: { disable_thinking: true }, reasoning_effort: "none" })
          }, {
            timeout: options.timeout ?? Duration.seconds(30),
            onRefusal: (refusal) =>
              new Errors.InvalidRequest({
                message: `The prompt could not be enhanced: ${refusal.message}`
              })
          }).pipe(Effect.provideService(HttpClient.HttpClient, client))
          return fit(contentOf(body) ?? prompt, model.promptCharacterLimit)
        })
      })
    })
  )
