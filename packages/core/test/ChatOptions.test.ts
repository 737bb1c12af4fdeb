import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { ChatOptions } from "../src/index.ts"

const parse = (body: unknown) => ChatOptions.parseRequest(body)
const ok = (body: unknown) => {
  const result = parse(body)
  if (Result.isFailure(result)) throw new Error(JSON.stringify(result.failure))
  return result.success
}
const fail = (body: unknown) => {
  const result = parse(body)
  if (Result.isSuccess(result)) throw new Error("expected a failure")
  return result.failure
}
const messages = [{ role: "user", content: "hi" }]

describe("service_parameters: every option of the spec's table, with its default", () => {
  it("applies the defaults when none is sent", () => {
    expect(ok({ model: "m", messages }).options).toEqual({
      strip_thinking_response: false,
      disable_thinking: false,
      enable_web_search: "off",
      enable_web_scraping: false,
      enable_x_search: false,
      enable_web_citations: false,
      include_search_results_in_stream: false,
      return_search_results_as_documents: false,
      include_venice_system_prompt: true
    })
  })

  it("reads every option", () => {
    const options = ok({
      model: "m",
      messages,
      service_parameters: {
        character_slug: "alan-watts",
        strip_thinking_response: true,
        disable_thinking: true,
        enable_web_search: "auto",
        enable_web_scraping: true,
        enable_x_search: true,
        enable_web_citations: true,
        include_search_results_in_stream: true,
        return_search_results_as_documents: true,
        include_venice_system_prompt: false
      }
    }).options
    expect(options.character_slug).toBe("alan-watts")
    expect(options.enable_web_search).toBe("auto")
    expect(options.include_venice_system_prompt).toBe(false)
    expect(ChatOptions.searchMode(options)).toBe("scrape")
  })

  it("answers a bad value with a DetailedError naming the field", () => {
    const error = fail({ model: "m", messages, service_parameters: { enable_web_search: "maybe", disable_thinking: "yes" } })
    expect(error._tag).toBe("InvalidRequest")
    expect(error.details?.["service_parameters"]).toMatchObject({
      enable_web_search: { _errors: [expect.any(String)] },
      disable_thinking: { _errors: [expect.any(String)] }
    })
  })

  it("refuses an unknown option and a service_parameters that is not an object", () => {
    expect(fail({ model: "m", messages, service_parameters: { strip_thinking: true } }).details)
      .toMatchObject({ service_parameters: { strip_thinking: { _errors: ["Unknown option"] } } })
    expect(fail({ model: "m", messages, service_parameters: [1] }).details)
      .toMatchObject({ service_parameters: { _errors: ["Expected an object"] } })
  })
})

describe("service_parameters: options given as a model suffix <model>:<option>=<value>, joined with &", () => {
  it("strips the suffix from the model and reads the options", () => {
    const request = ok({ model: "qwen3-4b:strip_thinking_response=true&enable_web_search=on", messages })
    expect(request.model).toBe("qwen3-4b")
    expect(request.options.strip_thinking_response).toBe(true)
    expect(request.options.enable_web_search).toBe("on")
  })

  it("keeps colons that belong to the model id", () => {
    expect(ChatOptions.splitModel("qwen3:8b")).toEqual({ id: "qwen3:8b", suffix: [] })
    expect(ChatOptions.splitModel("qwen3:8b:disable_thinking=true")).toEqual({
      id: "qwen3:8b",
      suffix: [["disable_thinking", "true"]]
    })
    expect(ChatOptions.splitModel("a:character_slug=b%20c")).toEqual({ id: "a", suffix: [["character_slug", "b c"]] })
  })

  it("merges with the object, the suffix winning field by field", () => {
    const options = ok({
      model: "m:include_venice_system_prompt=true",
      messages,
      service_parameters: { include_venice_system_prompt: false, disable_thinking: true }
    }).options
    expect(options.include_venice_system_prompt).toBe(true)
    expect(options.disable_thinking).toBe(true)
  })

  it("answers a bad suffix value or an unknown suffix option with a DetailedError under model", () => {
    expect(fail({ model: "m:disable_thinking=yes", messages }).details)
      .toMatchObject({ model: { disable_thinking: { _errors: [expect.any(String)] } } })
    expect(fail({ model: "m:nope=1", messages }).details).toMatchObject({ model: { nope: { _errors: ["Unknown option"] } } })
  })
})

describe("chat request: the fields tollgate reads are validated, every other field passes through as sent", () => {
  it("keeps unknown fields and cache_control on message content", () => {
    const content = [{ type: "text", text: "long context", cache_control: { type: "ephemeral" } }]
    const request = ok({
      model: "m",
      messages: [{ role: "system", content }, ...messages],
      temperature: 0.2,
      top_k: 40,
      some_vendor_field: { x: 1 },
      prompt_cache_key: "conversation-1",
      max_tokens: 50,
      max_completion_tokens: 20
    })
    expect(request.passthrough).toMatchObject({ temperature: 0.2, top_k: 40, some_vendor_field: { x: 1 } })
    expect(request.passthrough).not.toHaveProperty("model")
    expect(request.messages[0]?.content).toEqual(content)
    expect(request.promptCacheKey).toBe("conversation-1")
    expect(request.maxTokens).toBe(20)
  })

  it("refuses a missing model, empty messages and a bad max_tokens with every field named", () => {
    const error = fail({ messages: [], max_tokens: 0 })
    expect(Object.keys(error.details ?? {}).sort()).toEqual(["_errors", "max_tokens", "messages", "model"])
    expect(fail("not an object")._tag).toBe("InvalidRequest")
  })
})

describe("chat request: models names the fallbacks (OpenRouter's shape), tried after model in their order", () => {
  it("model then the other models, without repeats or suffixes; models is not sent upstream", () => {
    const request = ok({ model: "a:enable_web_search=on", models: ["a", "b:disable_thinking=true", "c", "b"], messages })
    expect(request.model).toBe("a")
    expect(request.fallbacks).toEqual(["b", "c"])
    expect(request.options.enable_web_search).toBe("on")
    expect(request.passthrough).not.toHaveProperty("models")
  })

  it("without model, the first of models is the model", () => {
    expect(ok({ models: ["a", "b"], messages })).toMatchObject({ model: "a", fallbacks: ["b"] })
  })

  it("an empty list, a non-string or more than MAX_MODELS models is a 400 naming models", () => {
    for (const models of [[], [1], Array.from({ length: ChatOptions.MAX_MODELS + 1 }, (_, i) => `m${i}`)]) {
      expect(Object.keys(fail({ model: "a", models, messages }).details ?? {})).toContain("models")
    }
  })
})
