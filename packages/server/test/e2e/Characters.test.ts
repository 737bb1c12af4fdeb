/**
 * Characters from the configuration, against the shipped server in dev mode: listed and retrieved
 * publicly without their system prompts, and applied by chat's `character_slug` (as
 * `service_parameters` or a model suffix), driven with fetch and the `openai` SDK.
 */
import * as Tokens from "@tollgate/documents/Tokens"
import { ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const NEMO_PROMPT = "You are Captain Nemo of the Nautilus. Answer as a reclusive submarine captain would."

let server: ShippedServer.ShippedServer
let client: OpenAI

beforeAll(async () => {
  server = await ShippedServer.start({
    config: {
      chat: {
        characters: {
          "captain-nemo": {
            name: "Captain Nemo",
            systemPrompt: NEMO_PROMPT,
            description: "The captain of the Nautilus",
            tags: ["adventure", "classic"],
            modelId: "llama-3.3-70b"
          },
          "lighthouse-keeper": { name: "Lighthouse Keeper", systemPrompt: "You keep a lighthouse.", tags: ["calm"] }
        }
      }
    }
  })
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

const get = async (path: string) => {
  const response = await fetch(`${server.api}${path}`)
  return { status: response.status, body: await response.json() as Record<string, unknown> }
}

const nemo = {
  slug: "captain-nemo",
  name: "Captain Nemo",
  description: "The captain of the Nautilus",
  tags: ["adventure", "classic"],
  modelId: "llama-3.3-70b",
  adult: false
}

describe("GET /characters lists the configured characters, publicly, without their system prompts", () => {
  it("every character, and the filters of the reference", async () => {
    const all = await get("/characters")
    expect(all).toEqual({
      status: 200,
      body: {
        object: "list",
        data: [nemo, {
          slug: "lighthouse-keeper",
          name: "Lighthouse Keeper",
          description: null,
          tags: ["calm"],
          modelId: null,
          adult: false
        }]
      }
    })
    expect(JSON.stringify(all.body)).not.toContain("Nautilus. Answer")
    expect((await get("/characters?search=NAUTILUS")).body["data"]).toEqual([nemo])
    expect((await get("/characters?tags=calm,unknown")).body["data"]).toMatchObject([{ slug: "lighthouse-keeper" }])
    expect((await get("/characters?modelId=llama-3.3-70b")).body["data"]).toEqual([nemo])
    expect((await get("/characters?limit=1&offset=1")).body["data"]).toMatchObject([{ slug: "lighthouse-keeper" }])
  })

  it("a bad limit is a 400 naming it", async () => {
    expect(await get("/characters?limit=0")).toMatchObject({ status: 400, body: { details: { limit: { _errors: [expect.any(String)] } } } })
  })
})

describe("GET /characters/{slug} answers one character, or a 404", () => {
  it("by slug", async () => {
    expect(await get("/characters/captain-nemo")).toEqual({ status: 200, body: { data: nemo } })
    expect(await get("/characters/nobody")).toEqual({ status: 404, body: { error: "No character nobody" } })
  })
})

describe("character_slug in chat applies the character's system prompt; an unknown slug is a 400", () => {
  it("the prompt grows by exactly the character's system message, by suffix or service_parameters", async () => {
    const messages = [{ role: "user" as const, content: "Where are we?" }]
    const plain = await client.chat.completions.create({ model: "local-echo", messages })
    const bySuffix = await client.chat.completions.create({ model: "local-echo:character_slug=captain-nemo", messages })
    const byParameters = await client.chat.completions.create({
      model: "local-echo",
      messages,
      service_parameters: { character_slug: "captain-nemo" }
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const withCharacter = Tokens.conversation([{ role: "system", content: NEMO_PROMPT }, ...messages])
    expect(plain.usage!.prompt_tokens).toBe(Tokens.conversation(messages))
    expect(bySuffix.usage!.prompt_tokens).toBe(withCharacter)
    expect(byParameters.usage!.prompt_tokens).toBe(withCharacter)
  })

  it("an unknown slug: 400 naming service_parameters.character_slug", async () => {
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "local-echo",
        messages: [{ role: "user", content: "hi" }],
        service_parameters: { character_slug: "nobody" }
      })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "Unknown character: nobody",
      details: { _errors: [], service_parameters: { _errors: [], character_slug: { _errors: ["Unknown character: nobody"] } } }
    })
  })
})
