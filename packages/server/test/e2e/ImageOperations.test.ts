/**
 * The image endpoints beyond `/image/generate`, against the shipped server in dev mode, driven by
 * the `openai` SDK where the OpenAI shape fits and by fetch/FormData elsewhere. Every image that
 * comes back is decoded (sharp) and measured; every paid call is found in the usage report at the
 * nano-USD of its price.
 */
import { ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import Sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

let server: ShippedServer.ShippedServer
let client: OpenAI

beforeAll(async () => {
  server = await ShippedServer.start()
  client = new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

const decoded = async (base64: string) => Sharp(Buffer.from(base64, "base64")).metadata()

describe("POST /images/generations is OpenAI's image shape over the service's image models and prices", () => {
  it("client.images.generate with b64_json returns a decodable PNG, charged the model's price per image", async () => {
    const { data, response } = await client.images.generate({
      model: "flux-dev",
      prompt: "a lighthouse at dusk",
      size: "256x256",
      response_format: "b64_json"
    }).withResponse()
    expect(data.created).toEqual(expect.any(Number))
    expect(data.data).toHaveLength(1)
    expect(await decoded(data.data![0]!.b64_json!)).toMatchObject({ format: "png", width: 256, height: 256 })
    expect(response.headers.get("x-service-model-id")).toBe("flux-dev")
    const [entry] = await Usage.latest(server)
    expect(entry).toMatchObject({ sku: "image:flux-dev", unit: 1, nano: 10_000_000, notes: "256x256 png" })
  })

  it("n images at n times the price; a size wider than the largest side keeps its shape", async () => {
    const images = await client.images.generate({ model: "local-renderer", prompt: "dunes", n: 2, size: "1792x1024", output_format: "webp" })
    expect(images.data).toHaveLength(2)
    expect(await decoded(images.data![1]!.b64_json!)).toMatchObject({ format: "webp", width: 1280, height: 731 })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image:local-renderer", unit: 2, nano: 2_000_000 })
  })

  it("an aspect-ratio model gets the nearest ratio it offers; quality hd is high", async () => {
    const images = await client.images.generate({ model: "gpt-image-1", prompt: "a map", size: "1536x1024", quality: "hd" })
    expect(await decoded(images.data![0]!.b64_json!)).toMatchObject({ width: 1024, height: 683 })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image:gpt-image-1", nano: 190_000_000, notes: "1024x683 png, quality high" })
  })

  it("without a model, or with another provider's name, the default image model draws; an alias names its model", async () => {
    const { response } = await client.images.generate({ prompt: "a fox", size: "256x256" }).withResponse()
    expect(response.headers.get("x-service-model-id")).toBe("flux-dev")
    const { response: unknown } = await client.images.generate({ model: "some-other-model", prompt: "a fox", size: "256x256" }).withResponse()
    expect(unknown.headers.get("x-service-model-id")).toBe("flux-dev")
  })

  it("response_format url answers a data URL of the image", async () => {
    const images = await client.images.generate({ model: "flux-dev", prompt: "a fox", size: "256x256", response_format: "url" })
    const url = images.data![0]!.url!
    expect(url.startsWith("data:image/png;base64,")).toBe(true)
    expect(await decoded(url.slice("data:image/png;base64,".length))).toMatchObject({ width: 256, height: 256 })
  })

  it("a bad field is a 400 naming it, and nothing is charged", async () => {
    const before = await Usage.latest(server)
    await expect(client.images.generate({ model: "flux-dev", prompt: "", size: "256x256" })).rejects.toBeInstanceOf(OpenAI.BadRequestError)
    const tooMany = await fetch(`${server.api}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "a fox", n: 9 })
    })
    expect(tooMany.status).toBe(400)
    expect(await tooMany.json()).toMatchObject({ details: { n: { _errors: [expect.any(String)] } } })
    expect(await Usage.latest(server)).toEqual(before)
  })
})
