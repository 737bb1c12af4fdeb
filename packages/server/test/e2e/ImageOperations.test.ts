/**
 * The image endpoints beyond `/image/generate`, against the shipped server in dev mode, driven by
 * the `openai` SDK where the OpenAI shape fits and by fetch/FormData elsewhere. Every image that
 * comes back is decoded (sharp) and measured; every paid call is found in the usage report at the
 * nano-USD of its price.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Zlib from "node:zlib"
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
    const images = await client.images.generate({
      model: "local-renderer",
      prompt: "dunes",
      n: 2,
      size: "1792x1024",
      output_format: "webp"
    })
    expect(images.data).toHaveLength(2)
    expect(await decoded(images.data![1]!.b64_json!)).toMatchObject({ format: "webp", width: 1280, height: 731 })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image:local-renderer", unit: 2, nano: 2_000_000 })
  })

  it("an aspect-ratio model gets the nearest ratio it offers; quality hd is high", async () => {
    const images = await client.images.generate({ model: "gpt-image-1", prompt: "a map", size: "1536x1024", quality: "hd" })
    expect(await decoded(images.data![0]!.b64_json!)).toMatchObject({ width: 1024, height: 683 })
    expect((await Usage.latest(server))[0]).toMatchObject({
      sku: "image:gpt-image-1",
      nano: 190_000_000,
      notes: "1024x683 png, quality high"
    })
  })

  it("without a model, or with another provider's name, the default image model draws; an alias names its model", async () => {
    const { response } = await client.images.generate({ prompt: "a fox", size: "256x256" }).withResponse()
    expect(response.headers.get("x-service-model-id")).toBe("flux-dev")
    const { response: unknown } = await client.images.generate({ model: "some-other-model", prompt: "a fox", size: "256x256" })
      .withResponse()
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

/** The key the calls are made with; a describe that sends many refused calls takes its own. */
let callerKey: string | undefined
const bearer = () => ({ authorization: `Bearer ${callerKey ?? server.credentials!.inferenceKey}` })

/**
 * A fresh INFERENCE key of the dev account for the describe it is called in: the abuse guard counts
 * a key's refused calls against the key, and one key's 20 refusals a minute would block it.
 */
const ownKey = () => {
  beforeAll(async () => {
    const created = await fetch(`${server.api}/api_keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({ apiKeyType: "INFERENCE", description: "image operations" })
    })
    expect(created.status).toBe(201)
    callerKey = (await created.json() as { apiKey: string }).apiKey
  })
  afterAll(() => {
    callerKey = undefined
  })
}

/** A 64x64 PNG: white, with a red 32x32 square in the middle. */
const squarePng = () =>
  Sharp({ create: { width: 64, height: 64, channels: 3, background: "#ffffff" } })
    .composite([{ input: { create: { width: 32, height: 32, channels: 3, background: "#ff0000" } }, left: 16, top: 16 }])
    .png()
    .toBuffer()

const form = (image: Buffer, fields: Record<string, string>) => {
  const body = new FormData()
  body.append("image", new Blob([new Uint8Array(image)], { type: "image/png" }), "square.png")
  for (const [name, value] of Object.entries(fields)) body.append(name, value)
  return body
}

const postForm = (path: string, body: FormData) => fetch(`${server.api}${path}`, { method: "POST", headers: bearer(), body })

const postJson = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, {
    method: "POST",
    headers: { ...bearer(), "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** The PNG with its header claiming `side` x `side` pixels (a decompression bomb's header; IHDR follows the signature). */
const claimingSize = async (png: Buffer, side: number) => {
  const bomb = Buffer.from(png)
  bomb.writeUInt32BE(side, 16)
  bomb.writeUInt32BE(side, 20)
  bomb.writeUInt32BE(Zlib.crc32(bomb.subarray(12, 29)), 29)
  return bomb
}

const pixel = async (png: Buffer, x: number, y: number) => {
  const { data, info } = await Sharp(png).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  const i = (y * info.width + x) * info.channels
  return [...data.subarray(i, i + 4)]
}

describe("POST /image/upscale returns the image at scale 2 or 4 as a decodable PNG, charged the scale's price", () => {
  it("a 64x64 PNG uploaded with scale 2 comes back 128x128, its pixels resampled from the original", async () => {
    const response = await postForm("/image/upscale", form(await squarePng(), { scale: "2" }))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("image/png")
    const png = Buffer.from(await response.arrayBuffer())
    expect(await Sharp(png).metadata()).toMatchObject({ format: "png", width: 128, height: 128 })
    expect(await pixel(png, 4, 4)).toEqual([255, 255, 255, 255])
    expect(await pixel(png, 64, 64)).toEqual([255, 0, 0, 255])
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image-upscale-2", unit: 1, nano: 20_000_000, notes: "64x64 to 128x128" })
  })

  it("JSON with the image in base64 and scale 4: 256x256, at the 4x price", async () => {
    const response = await postJson("/image/upscale", { image: (await squarePng()).toString("base64"), scale: 4 })
    expect(response.status).toBe(200)
    expect(await Sharp(Buffer.from(await response.arrayBuffer())).metadata()).toMatchObject({ width: 256, height: 256 })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image-upscale-4", nano: 80_000_000 })
  })

  it("a scale other than 2 or 4, a file that is not an image, or no image: a 400 naming the field, nothing charged", async () => {
    const before = await Usage.latest(server)
    const scale = await postForm("/image/upscale", form(await squarePng(), { scale: "3" }))
    expect(scale.status).toBe(400)
    expect(await scale.json()).toMatchObject({ details: { scale: { _errors: [expect.any(String)] } } })
    const text = await postForm("/image/upscale", form(Buffer.from("not an image"), {}))
    expect(text.status).toBe(400)
    expect(await text.json()).toMatchObject({ details: { image: { _errors: [expect.any(String)] } } })
    const none = await postJson("/image/upscale", { scale: 2 })
    expect(none.status).toBe(400)
    expect(await none.json()).toMatchObject({ details: { image: { _errors: ["Required"] } } })
    expect(await Usage.latest(server)).toEqual(before)
  })

  it("the result may have at most 16,777,216 pixels: a scale of 4 is lowered to fit, an image too large to double is a 400", async () => {
    const plain = (size: number) => Sharp({ create: { width: size, height: size, channels: 3, background: "#336699" } }).png().toBuffer()
    const lowered = await postForm("/image/upscale", form(await plain(2048), { scale: "4" }))
    expect(lowered.status).toBe(200)
    expect(await Sharp(Buffer.from(await lowered.arrayBuffer())).metadata()).toMatchObject({ width: 4096, height: 4096 })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image-upscale-4", notes: "2048x2048 to 4096x4096" })
    const before = await Usage.latest(server)
    const tooLarge = await postForm("/image/upscale", form(await plain(3000), { scale: "2" }))
    expect(tooLarge.status).toBe(400)
    expect(await tooLarge.json()).toMatchObject({ details: { image: { _errors: [expect.stringContaining("Too large to upscale")] } } })
    const overPixels = await postForm("/image/background-remove", form(await plain(4097), {}))
    expect(overPixels.status).toBe(400)
    expect(await overPixels.json()).toMatchObject({ details: { image: { _errors: ["The image has more than 16777216 pixels"] } } })
    const bomb = await postForm("/image/upscale", form(await claimingSize(await plain(1), 20_000), {}))
    expect(bomb.status).toBe(400)
    expect(await bomb.json()).toMatchObject({ details: { image: { _errors: ["The image has more than 16777216 pixels"] } } })
    expect(await Usage.latest(server)).toEqual(before)
  })

  it("an image over 25 MB is a 413", async () => {
    const response = await postJson("/image/upscale", { image: Buffer.alloc(26 * 1024 * 1024).toString("base64") })
    expect(response.status).toBe(413)
  })
})

describe("POST /image/background-remove makes the background transparent with an alpha mask", () => {
  it("the white border becomes transparent, the red square stays opaque", async () => {
    const response = await postForm("/image/background-remove", form(await squarePng(), {}))
    expect(response.status).toBe(200)
    const png = Buffer.from(await response.arrayBuffer())
    expect(await Sharp(png).metadata()).toMatchObject({ format: "png", width: 64, height: 64, hasAlpha: true })
    expect((await pixel(png, 2, 2))[3]).toBe(0)
    expect(await pixel(png, 32, 32)).toEqual([255, 0, 0, 255])
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image-background-remove", nano: 10_000_000 })
  })

  it("image_url is refused with a 400 naming it", async () => {
    const response = await postJson("/image/background-remove", { image_url: "https://example.com/a.png" })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ details: { image_url: { _errors: [expect.any(String)] } } })
  })
})

describe("POST /image/edit and OpenAI's /images/edits change the image as the prompt says, priced as one image of the model", () => {
  it("/image/edit with a black-and-white prompt: the same size, desaturated, on the default edit model", async () => {
    const response = await postForm("/image/edit", form(await squarePng(), { prompt: "make it black and white" }))
    expect(response.status).toBe(200)
    expect(response.headers.get("x-service-model-id")).toBe("local-renderer")
    const png = Buffer.from(await response.arrayBuffer())
    const [r, g, b] = await pixel(png, 32, 32)
    expect(r).toBe(g)
    expect(g).toBe(b)
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image:local-renderer", nano: 1_000_000, notes: "edit, 64x64 png" })
  })

  it("client.images.edit: the openai SDK's upload, a decodable image whose hues turned", async () => {
    const result = await client.images.edit({
      model: "flux-dev",
      image: await OpenAI.toFile(await squarePng(), "square.png", { type: "image/png" }),
      prompt: "a sunset palette"
    })
    const png = Buffer.from(result.data![0]!.b64_json!, "base64")
    expect(await Sharp(png).metadata()).toMatchObject({ format: "png", width: 64, height: 64 })
    expect(await pixel(png, 32, 32)).not.toEqual([255, 0, 0, 255])
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "image:flux-dev", nano: 10_000_000 })
  })

  it("a missing prompt or a model that is not an image model is a 400", async () => {
    const noPrompt = await postForm("/image/edit", form(await squarePng(), {}))
    expect(noPrompt.status).toBe(400)
    expect(await noPrompt.json()).toMatchObject({ details: { prompt: { _errors: [expect.any(String)] } } })
    const textModel = await postForm("/image/edit", form(await squarePng(), { prompt: "x", model: "llama-3.3-70b" }))
    expect(textModel.status).toBe(400)
    expect(await textModel.json()).toMatchObject({ details: { model: { _errors: [expect.any(String)] } } })
  })
})

describe("An image whose header reads but whose pixels are damaged is the caller's 400 naming image, never a 500, and not charged", () => {
  ownKey()

  it.each(["/image/upscale", "/image/edit", "/images/edits", "/image/background-remove"])("%s", async (path) => {
    const noise = {
      width: 256,
      height: 256,
      channels: 3,
      background: "#336699",
      noise: { type: "gaussian", mean: 128, sigma: 40 }
    } as const
    const png = await Sharp({ create: noise }).png().toBuffer()
    const truncated = png.subarray(0, Math.floor(png.length / 2))
    const before = await Usage.latest(server)
    const response = await postForm(path, form(truncated, { prompt: "blue" }))
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: "Invalid request parameters: image: Not an image that can be read (PNG, JPEG, WebP, GIF, AVIF or TIFF)",
      details: { _errors: [], image: { _errors: ["Not an image that can be read (PNG, JPEG, WebP, GIF, AVIF or TIFF)"] } }
    })
    expect(await Usage.latest(server)).toEqual(before)
  })
})

describe("GET /image/styles lists the style presets, publicly", () => {
  it("a list of names", async () => {
    const response = await fetch(`${server.api}/image/styles`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ object: "list", data: expect.arrayContaining(["Anime", "Cinematic", "Photographic"]) })
  })
})

/** A plain 256x256 PNG (the reference's least multi-edit image, 65,536 pixels) of one color. */
const plainPng = (background: string, size = 256) =>
  Sharp({ create: { width: size, height: size, channels: 3, background } }).png().toBuffer()

/** A 256x256 PNG, transparent but for an opaque blue 64x64 square at the top left. */
const blueCornerPng = () =>
  Sharp({ create: { width: 256, height: 256, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
    .composite([{ input: { create: { width: 64, height: 64, channels: 3, background: "#0000ff" } }, left: 0, top: 0 }])
    .png()
    .toBuffer()

const imagesForm = (images: ReadonlyArray<Buffer>, fields: Record<string, string>) => {
  const body = new FormData()
  images.forEach((image, i) => body.append("images", new Blob([new Uint8Array(image)], { type: "image/png" }), `layer-${i}.png`))
  for (const [name, value] of Object.entries(fields)) body.append(name, value)
  return body
}

describe("POST /image/multi-edit lays the images over the first and edits them by the prompt, priced as one image of the model", () => {
  ownKey()

  it("multipart: a white base and a layer with a blue corner, black and white: the corner comes back gray over white", async () => {
    const response = await postForm(
      "/image/multi-edit",
      imagesForm([await plainPng("#ffffff"), await blueCornerPng()], { prompt: "black and white" })
    )
    expect(response.status).toBe(200)
    expect(response.headers.get("x-service-model-id")).toBe("local-renderer")
    const png = Buffer.from(await response.arrayBuffer())
    expect(await Sharp(png).metadata()).toMatchObject({ format: "png", width: 256, height: 256 })
    const [r, g, b] = await pixel(png, 10, 10)
    expect([r, r]).toEqual([g, b])
    expect(r).toBeLessThan(128)
    expect(await pixel(png, 200, 200)).toEqual([255, 255, 255, 255])
    expect((await Usage.latest(server))[0]).toMatchObject({
      sku: "image:local-renderer",
      unit: 1,
      nano: 1_000_000,
      notes: "multi-edit of 2 images, 256x256 png"
    })
  })

  it("JSON with base64 images, a modelId and output_format webp: a webp at flux-dev's price", async () => {
    const response = await postJson("/image/multi-edit", {
      images: [(await plainPng("#ff0000")).toString("base64"), `data:image/png;base64,${(await blueCornerPng()).toString("base64")}`],
      prompt: "a sunset palette",
      modelId: "flux-dev",
      output_format: "webp"
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("image/webp")
    expect(await Sharp(Buffer.from(await response.arrayBuffer())).metadata()).toMatchObject({ format: "webp", width: 256, height: 256 })
    expect((await Usage.latest(server))[0]).toMatchObject({
      sku: "image:flux-dev",
      nano: 10_000_000,
      notes: "multi-edit of 2 images, 256x256 webp"
    })
  })

  it("no images, too many, one under 65,536 pixels, a URL, no prompt, a ratio the reference lacks, or a model that draws no images: a 400 naming the field, nothing charged", async () => {
    const before = await Usage.latest(server)
    const white = await plainPng("#ffffff")
    const cases: Array<[Response, string]> = [
      [await postJson("/image/multi-edit", { prompt: "x" }), "images"],
      [await postJson("/image/multi-edit", { prompt: "x", images: [] }), "images"],
      [await postJson("/image/multi-edit", { prompt: "x", images: Array(5).fill(white.toString("base64")) }), "images"],
      [await postForm("/image/multi-edit", imagesForm([white, await plainPng("#000000", 128)], { prompt: "x" })), "images"],
      [await postJson("/image/multi-edit", { prompt: "x", images: ["https://example.com/a.png"] }), "images"],
      [await postForm("/image/multi-edit", imagesForm([white], {})), "prompt"],
      [await postForm("/image/multi-edit", imagesForm([white], { prompt: "x", aspect_ratio: "7:5" })), "aspect_ratio"],
      [await postForm("/image/multi-edit", imagesForm([white], { prompt: "x", modelId: "llama-3.3-70b" })), "modelId"]
    ]
    for (const [response, field] of cases) {
      expect(response.status).toBe(400)
      expect(await response.json()).toMatchObject({ details: { [field]: { _errors: [expect.any(String)] } } })
    }
    const small = await postForm("/image/multi-edit", imagesForm([white, await plainPng("#000000", 128)], { prompt: "x" }))
    expect(await small.json()).toMatchObject({
      details: { images: { _errors: ["Image 2 has 128x128 pixels: at least 65536 are needed"] } }
    })
    expect(await Usage.latest(server)).toEqual(before)
  })

  it("more than four image files in a form is a 413", async () => {
    const white = await plainPng("#ffffff")
    const response = await postForm("/image/multi-edit", imagesForm(Array(5).fill(white), { prompt: "x" }))
    expect(response.status).toBe(413)
  })
})
