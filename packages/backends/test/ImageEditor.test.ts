import { Errors, Models } from "@tollgate/core"
import { Effect, Exit, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import Sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as ImageEditor from "../src/ImageEditor.ts"

/** A fake OpenAI-compatible `POST /images/edits`: parses the multipart form it gets and answers as scripted. */
const received: Array<{ path: string; authorization: string | undefined; form: FormData }> = []
let answer: () => Promise<{ status: number; body: unknown }>
let server: Http.Server
let baseUrl: string

beforeAll(async () => {
  server = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", async () => {
      const form = await new Response(Buffer.concat(chunks), { headers: { "content-type": request.headers["content-type"] ?? "" } })
        .formData()
      received.push({ path: request.url ?? "", authorization: request.headers.authorization, form })
      const { body, status } = await answer()
      response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
})

afterAll(() => new Promise((resolve) => server.close(resolve)))

const model = (): Models.ImageModel => ({
  ...(Models.defaults.find((entry) => entry.id === "gpt-image-1") as Models.ImageModel),
  upstreams: [{ baseUrl, apiKey: "sk-upstream", model: "gpt-image-1-upstream" }]
})

const png = (color: string, size: number) =>
  Sharp({ create: { width: size, height: size, channels: 3, background: color } }).png().toBuffer()

const edit = (call: ImageEditor.EditCall) =>
  Effect.runPromiseExit(
    Effect.flatMap(ImageEditor.ImageEditor, (editor) => editor.edit(call)).pipe(
      Effect.provide(ImageEditor.layer().pipe(Layer.provide(FetchHttpClient.layer)))
    )
  )

const editError = (call: ImageEditor.EditCall) =>
  Effect.runPromise(
    Effect.flatMap(ImageEditor.ImageEditor, (editor) => Effect.flip(editor.edit(call))).pipe(
      Effect.provide(ImageEditor.layer().pipe(Layer.provide(FetchHttpClient.layer)))
    )
  )

describe("ImageEditor: a model with upstreams is edited by their OpenAI-compatible POST /images/edits", () => {
  it("sends the image, prompt and the upstream's model name with its key; re-encodes the answer to the asked format", async () => {
    const blue = await png("#0000ff", 32)
    answer = async () => ({ status: 200, body: { created: 1, data: [{ b64_json: blue.toString("base64") }] } })
    received.length = 0
    const exit = await edit({ model: model(), image: new Uint8Array(await png("#ff0000", 16)), prompt: "make it blue", format: "webp" })
    expect(Exit.isSuccess(exit)).toBe(true)
    const produced = (exit as Exit.Success<ImageEditor.Produced>).value
    expect(produced).toMatchObject({ contentType: "image/webp", width: 32, height: 32 })
    expect(await Sharp(produced.bytes).metadata()).toMatchObject({ format: "webp" })
    const [request] = received
    expect(request!.path).toBe("/v1/images/edits")
    expect(request!.authorization).toBe("Bearer sk-upstream")
    expect(request!.form.get("prompt")).toBe("make it blue")
    expect(request!.form.get("model")).toBe("gpt-image-1-upstream")
    expect(request!.form.get("response_format")).toBe("b64_json")
    const image = request!.form.get("image") as File
    expect(await Sharp(Buffer.from(await image.arrayBuffer())).metadata()).toMatchObject({ width: 16, height: 16 })
  })

  it("a multi-edit sends the base image and its layers, in order, as image[] parts", async () => {
    const blue = await png("#0000ff", 32)
    answer = async () => ({ status: 200, body: { created: 1, data: [{ b64_json: blue.toString("base64") }] } })
    received.length = 0
    const layers = [new Uint8Array(await png("#00ff00", 8)), new Uint8Array(await png("#0000ff", 4))]
    const exit = await edit({ model: model(), image: new Uint8Array(await png("#ff0000", 16)), layers, prompt: "combine", format: "png" })
    expect(Exit.isSuccess(exit)).toBe(true)
    const form = received[0]!.form
    expect(form.get("image")).toBeNull()
    const sizes = await Promise.all(
      (form.getAll("image[]") as Array<File>).map(async (file) => (await Sharp(Buffer.from(await file.arrayBuffer())).metadata()).width)
    )
    expect(sizes).toEqual([16, 8, 4])
  })

  it("a content-policy refusal is the client's 400; an unreadable answer a 502", async () => {
    answer = async () => ({ status: 400, body: { error: { code: "content_policy_violation", message: "no" } } })
    const refused = await editError({ model: model(), image: new Uint8Array(await png("#ff0000", 16)), prompt: "x", format: "png" })
    expect(refused).toEqual(new Errors.InvalidRequest({ message: "The prompt was refused by the content policy" }))
    answer = async () => ({ status: 200, body: { data: [] } })
    const unreadable = await editError({ model: model(), image: new Uint8Array(await png("#ff0000", 16)), prompt: "x", format: "png" })
    expect(unreadable).toEqual(new Errors.BadGateway({ message: "The upstream failed to answer" }))
  })

  it("a model without upstreams is edited locally: the same size, the hues turned by the prompt", async () => {
    received.length = 0
    const exit = await edit({
      model: { ...model(), upstreams: [] },
      image: new Uint8Array(await png("#ff0000", 16)),
      prompt: "sunset",
      format: "png"
    })
    const produced = (exit as Exit.Success<ImageEditor.Produced>).value
    expect(produced).toMatchObject({ contentType: "image/png", width: 16, height: 16 })
    expect(received).toEqual([])
  })
})
