/**
 * The model endpoints as clients read them, against the shipped server in dev mode: the `openai`
 * SDK's `models.retrieve` and `models.list`, the published reference's `type` filter, traits and
 * the compatibility mapping (configured per model as aliases), and the deprecation headers.
 */
import { ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer
let client: OpenAI

beforeAll(async () => {
  server = await ShippedServer.start()
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

const get = (path: string) => fetch(`${server.api}${path}`)

describe("GET /models/{id} answers one model, so client.models.retrieve works", () => {
  it("retrieves llama-3.3-70b with its spec and price", async () => {
    const model = await client.models.retrieve("llama-3.3-70b")
    expect(model).toMatchObject({
      id: "llama-3.3-70b",
      object: "model",
      owned_by: "tollgate",
      type: "text",
      context_length: 131_072,
      model_spec: {
        name: "Llama 3.3 70B",
        availableContextTokens: 131_072,
        pricing: { input: { usd: 0.7 }, output: { usd: 2.8 }, unit: "per million tokens" },
        traits: ["default", "function_calling_default"],
        aliases: ["gpt-4o", "gpt-4.1"]
      }
    })
  })

  it("an alias retrieves the model it names, under the model's own id", async () => {
    expect((await client.models.retrieve("gpt-4o")).id).toBe("llama-3.3-70b")
  })

  it("an unknown id is a 404 StandardError, which the SDK raises as NotFoundError", async () => {
    await expect(client.models.retrieve("no-such-model")).rejects.toBeInstanceOf(OpenAI.NotFoundError)
    const response = await get("/models/no-such-model")
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ error: "No model no-such-model" })
  })

  it("client.models.list pages over every model", async () => {
    const ids = []
    for await (const model of client.models.list()) ids.push(model.id)
    expect(ids).toEqual(expect.arrayContaining(["llama-3.3-70b", "flux-dev", "dev-tts", "dev-video"]))
  })
})

describe("GET /models?type= filters with the published reference's values", () => {
  const idsOf = async (type: string) => {
    const response = await get(`/models?type=${type}`)
    expect(response.status).toBe(200)
    const body = await response.json() as { type: string; data: Array<{ id: string; type: string }> }
    expect(body.type).toBe(type)
    return body.data
  }

  it("a model type lists only its models", async () => {
    const images = await idsOf("image")
    expect(images.map((model) => model.id)).toEqual(["local-renderer", "flux-dev", "gpt-image-1", "nano-banana-pro", "sd-3.5"])
    expect((await idsOf("tts")).map((model) => model.id)).toEqual(["dev-tts"])
  })

  it("code lists the text models with the code trait (none in dev); music, upscale and inpaint list none", async () => {
    for (const type of ["code", "music", "upscale", "inpaint"]) expect(await idsOf(type)).toEqual([])
  })

  it("all lists every type, and an unknown type is a 400 naming type", async () => {
    expect(new Set((await idsOf("all")).map((model) => model.type))).toEqual(new Set(["text", "image", "embedding", "tts", "asr", "video"]))
    const response = await get("/models?type=sculpture")
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({
      error: expect.stringMatching(/^Invalid request parameters: type: /),
      details: { type: { _errors: [expect.any(String)] } }
    })
  })
})

describe("GET /models/traits and /models/compatibility_mapping map names to model ids per type, publicly", () => {
  it("traits of the text models by default, of another type when asked", async () => {
    expect(await (await get("/models/traits")).json()).toEqual({
      object: "list",
      type: "text",
      data: { default: "llama-3.3-70b", function_calling_default: "llama-3.3-70b", fastest: "qwen3-4b", default_reasoning: "qwen3-4b" }
    })
    expect(await (await get("/models/traits?type=image")).json()).toEqual({
      object: "list",
      type: "image",
      data: { default_edit: "local-renderer", default: "flux-dev", highest_quality: "gpt-image-1" }
    })
  })

  it("the compatibility mapping, and a chat call made with an OpenAI model name is served by the mapped model", async () => {
    expect(await (await get("/models/compatibility_mapping")).json()).toEqual({
      object: "list",
      type: "text",
      data: { "gpt-4o": "llama-3.3-70b", "gpt-4.1": "llama-3.3-70b", "gpt-4o-mini": "qwen3-4b", "o4-mini": "qwen3-4b" }
    })
    const { data, response } = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(data.model).toBe("llama-3.3-70b")
    expect(response.headers.get("x-service-model-id")).toBe("llama-3.3-70b")
  })
})

describe("A model the configuration marks deprecated answers with the deprecation headers", () => {
  it("sd-3.5 (deprecated in the dev list): retrieve and a generation both carry the warning and the date", async () => {
    const retrieved = await get("/models/sd-3.5")
    expect(retrieved.headers.get("x-service-model-deprecation-date")).toBe("2027-01-31")
    const { response } = await client.images.generate({
      model: "sd-3.5",
      prompt: "a lighthouse",
      size: "256x256",
      response_format: "b64_json"
    })
      .withResponse()
    expect(response.headers.get("x-service-model-deprecation-warning")).toBe(
      "sd-3.5 is deprecated and will be removed; use flux-dev instead"
    )
    expect(response.headers.get("x-service-model-deprecation-date")).toBe("2027-01-31")
  })

  it("a model that is not deprecated carries neither header", async () => {
    const response = await get("/models/flux-dev")
    expect(response.headers.get("x-service-model-deprecation-warning")).toBeNull()
    expect(response.headers.get("x-service-model-deprecation-date")).toBeNull()
  })
})
