/**
 * `GET /audio/voices` and the queued speech operations (`/audio/queue`, `/audio/retrieve`,
 * `/audio/quote`, `/audio/complete`) against the shipped server in dev mode, whose `dev-tts` model
 * speaks alloy, echo and nova as a generated WAV tone at 15 USD per million characters. Every
 * charge is read back from the usage report to the nano-USD.
 */
import { ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start()
})

afterAll(async () => {
  await server?.stop()
})

/** dev-tts's price per character, in nano-USD (15 USD per million). */
const NANO_PER_CHARACTER = 15_000

const anonymous = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

const post = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${server.credentials!.inferenceKey}` },
    body: JSON.stringify(body)
  })

const ttsEntries = async () => (await Usage.latest(server, 50)).filter((entry) => entry.sku === "tts:dev-tts")

describe("GET /audio/voices lists each speech model's voices from the configuration, without credentials", () => {
  it("every speech model, and one named by ?model=", async () => {
    const all = await fetch(`${server.api}/audio/voices`)
    expect(all.status).toBe(200)
    expect(await all.json()).toEqual({
      object: "list",
      data: expect.arrayContaining([{ model: "dev-tts", voices: ["alloy", "echo", "nova"], default_voice: "alloy" }])
    })
    const one = await fetch(`${server.api}/audio/voices?model=dev-tts`)
    expect(await one.json()).toEqual({
      object: "list",
      data: [{ model: "dev-tts", voices: ["alloy", "echo", "nova"], default_voice: "alloy" }]
    })
  })

  it("a model that is not a speech model is a 400 naming model", async () => {
    const response = await fetch(`${server.api}/audio/voices?model=llama-3.3-70b`)
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ details: { model: { _errors: [expect.any(String)] } } })
  })
})

describe("POST /audio/quote answers the price in USD of character_count characters, without credentials", () => {
  it("per character at the model's price; a missing count or a model that speaks nothing is a 400", async () => {
    const quoted = await anonymous("/audio/quote", { model: "dev-tts", character_count: 1000 })
    expect(quoted.status).toBe(200)
    expect(await quoted.json()).toEqual({ quote: 0.015 })
    const none = await anonymous("/audio/quote", { model: "dev-tts" })
    expect(none.status).toBe(400)
    expect(await none.json()).toMatchObject({ details: { character_count: { _errors: [expect.any(String)] } } })
    const text = await anonymous("/audio/quote", { model: "llama-3.3-70b", character_count: 10 })
    expect(await text.json()).toMatchObject({ details: { model: { _errors: [expect.any(String)] } } })
  })
})

describe("POST /audio/queue holds the text's price; the first retrieval captures it and streams the audio; complete removes the job", () => {
  it("queued: nothing charged yet; retrieved: the WAV, charged per character once; completed: then a 404", async () => {
    const prompt = "A warm spoken narration."
    const before = await ttsEntries()
    const queued = await post("/audio/queue", { model: "dev-tts", prompt, voice: "nova" })
    expect(queued.status).toBe(200)
    const job = await queued.json() as { model: string; queue_id: string; status: string }
    expect(job).toEqual({ model: "dev-tts", queue_id: expect.stringMatching(/^aud_/), status: "QUEUED" })
    expect(await ttsEntries()).toEqual(before)

    const retrieved = await post("/audio/retrieve", { model: "dev-tts", queue_id: job.queue_id })
    expect(retrieved.status).toBe(200)
    expect(retrieved.headers.get("content-type")).toBe("audio/wav")
    const wav = Buffer.from(await retrieved.arrayBuffer())
    expect(wav.subarray(0, 4).toString("ascii")).toBe("RIFF")
    expect(wav.subarray(8, 12).toString("ascii")).toBe("WAVE")
    const [charged] = await ttsEntries()
    expect(charged).toMatchObject({
      unit: prompt.length,
      nano: prompt.length * NANO_PER_CHARACTER,
      notes: `wav speech, job ${job.queue_id}`
    })

    const again = await post("/audio/retrieve", { model: "dev-tts", queue_id: job.queue_id })
    expect(again.status).toBe(200)
    expect(Buffer.from(await again.arrayBuffer())).toEqual(wav)
    expect(await ttsEntries()).toHaveLength(before.length + 1)

    const completed = await post("/audio/complete", { model: "dev-tts", queue_id: job.queue_id })
    expect(completed.status).toBe(200)
    expect(await completed.json()).toEqual({ success: true })
    expect((await post("/audio/retrieve", { model: "dev-tts", queue_id: job.queue_id })).status).toBe(404)
    expect((await post("/audio/complete", { model: "dev-tts", queue_id: job.queue_id })).status).toBe(404)
  })

  it("delete_media_on_completion removes the job with the retrieval that returns its audio", async () => {
    const { queue_id } = await (await post("/audio/queue", { model: "dev-tts", prompt: "Hello." })).json() as { queue_id: string }
    const retrieved = await post("/audio/retrieve", { model: "dev-tts", queue_id, delete_media_on_completion: true })
    expect(retrieved.status).toBe(200)
    await retrieved.arrayBuffer()
    expect((await ttsEntries())[0]).toMatchObject({ unit: 6, nano: 6 * NANO_PER_CHARACTER })
    expect((await post("/audio/retrieve", { model: "dev-tts", queue_id })).status).toBe(404)
  })

  it("completing a job never retrieved is a 400 (its hold is open); another model's name or a video job's id is a 404", async () => {
    const { queue_id } = await (await post("/audio/queue", { model: "dev-tts", prompt: "Later." })).json() as { queue_id: string }
    const early = await post("/audio/complete", { model: "dev-tts", queue_id })
    expect(early.status).toBe(400)
    expect(await early.json()).toMatchObject({ details: { queue_id: { _errors: [expect.stringContaining("never retrieved")] } } })
    expect((await post("/audio/retrieve", { model: "dev-video", queue_id })).status).toBe(404)
    const video = await (await post("/video/queue", { model: "dev-video", prompt: "waves", duration: 2 })).json() as { queue_id: string }
    expect((await post("/audio/retrieve", { model: "dev-video", queue_id: video.queue_id })).status).toBe(404)
  })

  it("a voice the model lacks, a text past its limit, a music field, no prompt or a model that speaks nothing: a 400 naming it, nothing held or charged", async () => {
    const before = await Usage.latest(server, 5)
    const cases: Array<[unknown, string]> = [
      [{ model: "dev-tts", prompt: "hi", voice: "onyx" }, "voice"],
      [{ model: "dev-tts", prompt: "x".repeat(4097) }, "prompt"],
      [{ model: "dev-tts", prompt: "hi", lyrics_prompt: "la la" }, "lyrics_prompt"],
      [{ model: "dev-tts", prompt: "hi", duration_seconds: 60 }, "duration_seconds"],
      [{ model: "dev-tts", prompt: "" }, "prompt"],
      [{ model: "dev-tts", prompt: "hi", speed: 5 }, "speed"],
      [{ model: "llama-3.3-70b", prompt: "hi" }, "model"]
    ]
    for (const [body, field] of cases) {
      const response = await post("/audio/queue", body)
      expect(response.status).toBe(400)
      expect(await response.json()).toMatchObject({ details: { [field]: { _errors: [expect.any(String)] } } })
    }
    expect(await Usage.latest(server, 5)).toEqual(before)
  })
})
