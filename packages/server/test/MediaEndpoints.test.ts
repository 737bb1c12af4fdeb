/**
 * Embeddings, speech, transcription, video jobs and the model list through the shipped server,
 * driven by the official `openai` SDK as a user moving from another OpenAI-compatible provider
 * would: once in dev mode (every type served locally), once with every type configured on an
 * OpenAI-compatible upstream (a real HTTP server), and once against the spec's rate limits.
 */
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const WAV_HEADER_BYTES = 44

/** A PCM WAV of `seconds` of silence, 16 kHz mono. */
const wav = (seconds: number) => {
  const data = Math.round(seconds * 16_000) * 2
  const bytes = Buffer.alloc(WAV_HEADER_BYTES + data)
  bytes.write("RIFF", 0)
  bytes.writeUInt32LE(36 + data, 4)
  bytes.write("WAVEfmt ", 8)
  bytes.writeUInt32LE(16, 16)
  bytes.writeUInt16LE(1, 20)
  bytes.writeUInt16LE(1, 22)
  bytes.writeUInt32LE(16_000, 24)
  bytes.writeUInt32LE(32_000, 28)
  bytes.writeUInt16LE(2, 32)
  bytes.writeUInt16LE(16, 34)
  bytes.write("data", 36)
  bytes.writeUInt32LE(data, 40)
  return bytes
}

const sdk = (server: ShippedServer.ShippedServer) =>
  new OpenAI({ apiKey: server.credentials!.inferenceKey, baseURL: server.api, maxRetries: 0 })

interface UsageEntry {
  readonly sku: string
  readonly amount: number
  readonly unit: number
}

const usage = async (server: ShippedServer.ShippedServer): Promise<ReadonlyArray<UsageEntry>> => {
  const response = await fetch(`${server.api}/billing/usage-history?limit=500`, {
    headers: { authorization: `Bearer ${server.credentials!.adminKey}` }
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as { data: Array<UsageEntry> }).data
}

/** What a paid response reports: the available balance before its own hold. */
const balanceOf = (response: Response) => Number(response.headers.get("x-service-balance-usd"))

describe("Dev mode serves every type locally, each a dev-* model, through the unmodified openai SDK", () => {
  let server: ShippedServer.ShippedServer
  let client: OpenAI

  beforeAll(async () => {
    server = await ShippedServer.start()
    client = sdk(server)
  }, 120_000)
  afterAll(async () => {
    await server?.stop()
  })

  it("embeddings.create: deterministic vectors, base64 by default and float on request, shorter with dimensions", async () => {
    const first = await client.embeddings.create({ model: "dev-embedding", input: ["the quick brown fox", "a lazy dog"] })
    const again = await client.embeddings.create({ model: "dev-embedding", input: "the quick brown fox", encoding_format: "float" })
    expect(first.data).toHaveLength(2)
    expect(first.data[0]!.embedding).toHaveLength(256)
    expect(again.data[0]!.embedding.map((x) => Math.fround(x))).toEqual(first.data[0]!.embedding)
    expect(first.usage.prompt_tokens).toBeGreaterThan(0)
    const short = await client.embeddings.create({ model: "dev-embedding", input: [[1, 2, 3]], dimensions: 16 })
    expect(short.data[0]!.embedding).toHaveLength(16)
    expect(short.usage.prompt_tokens).toBe(3)
  })

  it("audio.speech.create: a short WAV under audio/wav", async () => {
    const response = await client.audio.speech.create({ model: "dev-tts", input: "Hello there", voice: "alloy", response_format: "wav" })
    expect(response.headers.get("content-type")).toBe("audio/wav")
    const bytes = Buffer.from(await response.arrayBuffer())
    expect(bytes.subarray(0, 4).toString()).toBe("RIFF")
    expect(bytes.subarray(8, 12).toString()).toBe("WAVE")
  })

  it("audio.speech.create with a voice the model lacks: a 400 naming voice and the voices it has, nothing charged", async () => {
    const before = (await usage(server)).length
    const response = await fetch(`${server.api}/audio/speech`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "dev-tts", input: "Hello there", voice: "nobody" })
    })
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string; details: { voice: { _errors: Array<string> } } }
    expect(body.error).toMatch(/^Invalid request parameters: voice: Expected one of /)
    expect(body.details.voice._errors).toEqual([body.error.slice("Invalid request parameters: voice: ".length)])
    expect((await usage(server)).length).toBe(before)
  })

  it("audio.transcriptions.create: a WAV becomes the fixed text, in every response format", async () => {
    const file = () => toFile(wav(2.5), "hello.wav", { type: "audio/wav" })
    const json = await client.audio.transcriptions.create({ model: "dev-asr", file: await file() })
    expect(json.text).toBe("This is the tollgate dev transcription model; it hears no words.")
    const text = await client.audio.transcriptions.create({ model: "dev-asr", file: await file(), response_format: "text" })
    expect(text).toContain("dev transcription model")
    const srt = await client.audio.transcriptions.create({ model: "dev-asr", file: await file(), response_format: "srt" })
    expect(srt).toContain("00:00:00,000 --> 00:00:02,500")
    const vtt = await client.audio.transcriptions.create({ model: "dev-asr", file: await file(), response_format: "vtt" })
    expect(vtt).toMatch(/^WEBVTT/)
    const verbose = await client.audio.transcriptions.create({ model: "dev-asr", file: await file(), response_format: "verbose_json" })
    expect(verbose.duration).toBe(2.5)
  })

  it("a transcription of audio the dev model cannot read is a 400 naming file, and is not charged", async () => {
    const before = (await usage(server)).length
    const error = await client.audio.transcriptions.create({
      model: "dev-asr",
      file: await toFile(Buffer.from("not audio at all"), "x.mp3", { type: "audio/mpeg" })
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((await usage(server)).length).toBe(before)
  })

  it("models.list: every type, in the OpenAI list shape; ?type= filters", async () => {
    const models = []
    for await (const model of client.models.list()) models.push(model)
    const types = new Set(models.map((model) => (model as unknown as { type: string }).type))
    expect([...types].sort()).toEqual(["asr", "embedding", "image", "text", "tts", "video"])
    expect(models.find((model) => model.id === "dev-video")).toMatchObject({ object: "model", owned_by: "tollgate" })
    const embedding = await fetch(`${server.api}/models?type=embedding`).then((response) => response.json()) as {
      data: Array<{ id: string; model_spec: Record<string, unknown> }>
    }
    expect(embedding.data.map((model) => model.id)).toEqual(["dev-embedding"])
    expect(embedding.data[0]!.model_spec).toMatchObject({
      dimensions: 256,
      pricing: { usd: 0.02, unit: "per million input tokens" },
      rateLimit: { kind: "embedding" }
    })
    const bad = await fetch(`${server.api}/models?type=audio`)
    expect(bad.status).toBe(400)
  })

  it("a video job: queued, then the video itself, its hold captured at the model's price", async () => {
    const queued = await fetch(`${server.api}/video/queue`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "dev-video", prompt: "a lighthouse at dusk", duration: 2 })
    })
    expect(queued.status).toBe(200)
    const job = await queued.json() as { queue_id: string; status: string }
    expect(job.status).toBe("queued")
    const video = await fetch(`${server.api}/video/retrieve`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify({ queue_id: job.queue_id })
    })
    expect(video.status).toBe(200)
    expect(video.headers.get("content-type")).toBe("video/x-yuv4mpeg")
    expect(Buffer.from(await video.arrayBuffer()).subarray(0, 9).toString()).toBe("YUV4MPEG2")
    const entries = (await usage(server)).filter((entry) => entry.sku === "video:dev-video")
    expect(entries).toHaveLength(1)
    expect(entries[0]!.amount).toBeCloseTo(0.1, 9)
  })
})

let upstream: FakeChatUpstream.FakeChatUpstream
let redis: RedisServer.RedisServer
/** Production on Redis, so the shipped CLI can make a second account (the video jobs are per account). */
let configured: ShippedServer.ShippedServer

beforeAll(async () => {
  upstream = await FakeChatUpstream.start()
  redis = await RedisServer.start()
  const upstreams = [{ baseUrl: upstream.baseUrl, apiKey: "sk-upstream", model: "upstream-name" }]
  configured = await ShippedServer.start({
    store: "redis",
    redisUrl: redis.url,
    signingKey: true,
    config: {
      models: [
        { id: "text-embedding-3-small", type: "embedding", upstreams, dimensions: 8, supportsDimensions: true },
        { id: "tts-1", type: "tts", upstreams, voices: ["alloy", "nova"] },
        { id: "whisper-1", type: "asr", upstreams },
        { id: "sora-2", type: "video", upstreams, durations: [4, 8], sizes: ["1280x720"] },
        { id: "sora-2-pro", type: "video", upstreams, durations: [8], sizes: ["1280x720"] }
      ],
      prices: {
        embedding: { "text-embedding-3-small": { perMillionTokensUsd: "20000" } },
        speech: { "tts-1": { perMillionCharactersUsd: "15000" } },
        transcription: { "whisper-1": { perSecondUsd: "0.01" } },
        video: { "sora-2": { perSecondUsd: "0.10" }, "sora-2-pro": { perSecondUsd: "5" } }
      }
    }
  })
}, 120_000)
afterAll(async () => {
  await configured?.stop()
  await upstream?.close()
  await redis?.stop()
})

describe("With a configured OpenAI-compatible upstream, the SDK's calls reach it and are billed at the configured prices", () => {
  let client: OpenAI
  beforeAll(() => {
    client = sdk(configured)
  })

  it("embeddings.create goes to POST /embeddings with the upstream's model name and key; billed per input token", async () => {
    const { data, response } = await client.embeddings.create({
      model: "text-embedding-3-small",
      input: "the quick brown fox",
      dimensions: 4
    })
      .withResponse()
    const sent = upstream.received.at(-1)!
    expect(sent.path).toBe("/embeddings")
    expect(sent.body).toMatchObject({ model: "upstream-name", input: ["the quick brown fox"], encoding_format: "float", dimensions: 4 })
    expect(sent.headers.authorization).toBe("Bearer sk-upstream")
    expect(data.data[0]!.embedding).toHaveLength(4)
    expect(data.usage.prompt_tokens).toBe(4)
    const next = await client.embeddings.create({ model: "text-embedding-3-small", input: "x" }).withResponse()
    // 4 tokens at 20000 USD per million tokens
    expect(balanceOf(response) - balanceOf(next.response)).toBeCloseTo(0.08, 9)
  })

  it("audio.speech.create streams the upstream's audio under the format's type; billed per input character", async () => {
    const { data, response } = await client.audio.speech.create({
      model: "tts-1",
      input: "Hello, world",
      voice: "nova",
      response_format: "mp3"
    })
      .withResponse()
    expect(data.headers.get("content-type")).toBe("audio/mpeg")
    expect(await data.text()).toBe("FAKE-AUDIO mp3 nova: Hello, world")
    const next = await client.audio.speech.create({ model: "tts-1", input: "x", voice: "nova" }).withResponse()
    await next.data.arrayBuffer()
    // 12 characters at 15000 USD per million characters
    expect(balanceOf(response) - balanceOf(next.response)).toBeCloseTo(0.18, 9)
  })

  it("audio.transcriptions.create sends the file as multipart; billed per second the upstream reports, never above the hold", async () => {
    upstream.transcriptSeconds = 3.2
    const audio = Buffer.alloc(6_000, 7)
    const { data, response } = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await toFile(audio, "speech.mp3", { type: "audio/mpeg" }),
      language: "en"
    }).withResponse()
    expect(data.text).toBe("Hello from the fake upstream.")
    const sent = upstream.received.at(-1)!
    expect(sent.path).toBe("/audio/transcriptions")
    expect(sent.body).toMatchObject({
      model: "upstream-name",
      response_format: "verbose_json",
      language: "en",
      file: { name: "speech.mp3", size: 6_000 }
    })
    const entries = (await usage(configured)).filter((entry) => entry.sku === "asr:whisper-1")
    expect(entries.map((entry) => [entry.unit, entry.amount])).toEqual([[4, 0.04]])
    const srt = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await toFile(audio, "speech.mp3", { type: "audio/mpeg" }),
      response_format: "srt"
    }).withResponse()
    expect(srt.data).toBe("1\n00:00:00,000 --> 00:00:03,200\nHello from the fake upstream.\n")
    expect(balanceOf(response) - balanceOf(srt.response)).toBeCloseTo(0.04, 9)
  })

  it("a transcription larger than 25 MB is a 413 and reaches no upstream", async () => {
    const before = upstream.received.length
    const error = await client.audio.transcriptions.create({
      model: "whisper-1",
      file: await toFile(Buffer.alloc(25 * 1024 * 1024 + 1), "big.mp3", { type: "audio/mpeg" })
    }).catch((e: unknown) => e)
    expect(error).toMatchObject({ status: 413 })
    expect(upstream.received.length).toBe(before)
  })

  it("models.list lists the configured models with their types and prices, never their upstreams", async () => {
    const models = await fetch(`${configured.api}/models`).then((response) => response.json()) as {
      object: string
      data: Array<{ id: string; type: string; model_spec: Record<string, unknown> }>
    }
    expect(models.object).toBe("list")
    expect(models.data.map((model) => [model.id, model.type])).toEqual([
      ["text-embedding-3-small", "embedding"],
      ["tts-1", "tts"],
      ["whisper-1", "asr"],
      ["sora-2", "video"],
      ["sora-2-pro", "video"]
    ])
    expect(models.data[2]!.model_spec["pricing"]).toEqual({ usd: 0.01, unit: "per second of audio" })
    expect(JSON.stringify(models)).not.toContain("sk-upstream")
    const listed = []
    for await (const model of client.models.list()) listed.push(model.id)
    expect(listed).toContain("sora-2")
  })
})

describe("A video job holds its worst-case price: captured when the job completes, released when it fails", () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}, key = configured.credentials!.inferenceKey) =>
    fetch(`${configured.api}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })

  it("queue holds duration x price; polls answer the state; the poll that sees completion captures it once", async () => {
    const queued = await post("/video/queue", { model: "sora-2", prompt: "a lighthouse", duration: "8s" })
    expect(queued.status).toBe(200)
    const before = balanceOf(queued)
    const { queue_id } = await queued.json() as { queue_id: string }
    expect(upstream.received.at(-1)).toMatchObject({ path: "/videos", body: { prompt: "a lighthouse", seconds: "8", size: "1280x720" } })

    upstream.videoOutcome = "in_progress"
    const running = await post("/video/retrieve", { queue_id })
    expect(await running.json()).toMatchObject({ queue_id, status: "queued", progress: 40 })
    expect(balanceOf(running)).toBeCloseTo(before - 0.8, 9)

    upstream.videoOutcome = "completed"
    const done = await post("/video/retrieve", { queue_id, model: "sora-2" })
    expect(done.status).toBe(200)
    expect(done.headers.get("content-type")).toBe("video/mp4")
    expect(await done.text()).toMatch(/^FAKE-MP4 video_/)
    const again = await post("/video/retrieve", { queue_id })
    expect(await again.text()).toMatch(/^FAKE-MP4 video_/)
    expect(balanceOf(again)).toBeCloseTo(before - 0.8, 9)
    const entries = (await usage(configured)).filter((entry) => entry.sku === "video:sora-2")
    expect(entries.map((entry) => [entry.unit, entry.amount])).toEqual([[8, 0.8]])
  })

  it("a job that fails releases its hold: the balance is back and nothing is charged", async () => {
    const queued = await post("/video/queue", { model: "sora-2", prompt: "a storm", duration: 4 })
    const before = balanceOf(queued)
    const { queue_id } = await queued.json() as { queue_id: string }
    upstream.videoOutcome = "failed"
    const failed = await post("/video/retrieve", { queue_id })
    expect(balanceOf(failed)).toBeCloseTo(before - 0.4, 9)
    expect(await failed.json()).toMatchObject({ queue_id, status: "failed", error: "The fake upstream failed to render" })
    const after = await post("/video/retrieve", { queue_id })
    expect(balanceOf(after)).toBeCloseTo(before, 9)
    expect(await after.json()).toMatchObject({ status: "failed" })
    expect((await usage(configured)).filter((entry) => entry.sku === "video:sora-2")).toHaveLength(1)
  })

  it("a job the balance cannot cover is a 402 INSUFFICIENT_BALANCE and starts nothing", async () => {
    const before = upstream.received.length
    const refused = await post("/video/queue", { model: "sora-2-pro", prompt: "an epic", duration: 8 })
    expect(refused.status).toBe(402)
    expect(await refused.json()).toMatchObject({ code: "INSUFFICIENT_BALANCE" })
    expect(upstream.received.length).toBe(before)
  })

  it("another account's queue_id, or an unknown one, is a 404", async () => {
    await configured.cli(["accounts", "create", "--id", "acct_other"])
    const otherKey = String((await configured.cli(["keys", "mint", "--account", "acct_other", "--type", "INFERENCE"]))["apiKey"])
    await configured.cli(["credits", "grant", "--account", "acct_other", "--usd", "5.00", "--reference", "other-seed"])
    upstream.videoOutcome = "in_progress"
    const queued = await post("/video/queue", { model: "sora-2", prompt: "someone else's", duration: 4 }, {}, otherKey)
    expect(queued.status).toBe(200)
    const { queue_id } = await queued.json() as { queue_id: string }
    // The job is real: its own account reads it.
    const own = await post("/video/retrieve", { queue_id }, {}, otherKey)
    expect(own.status).toBe(200)
    expect(await own.json()).toMatchObject({ queue_id, status: "queued" })
    const foreign = await post("/video/retrieve", { queue_id })
    expect(foreign.status).toBe(404)
    expect(await foreign.json()).toEqual({ error: `No video job ${queue_id}` })
    const missing = await post("/video/retrieve", { queue_id: "vid_unknown" })
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ error: "No video job vid_unknown" })
  })

  it("a queue retried with the same Idempotency-Key gets the same job and one hold", async () => {
    upstream.videoOutcome = "in_progress"
    const first = await post("/video/queue", { model: "sora-2", prompt: "twice", duration: 4 }, { "idempotency-key": "video-once" })
    const before = balanceOf(first)
    const second = await post("/video/queue", { model: "sora-2", prompt: "twice", duration: 4 }, { "idempotency-key": "video-once" })
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    const { queue_id } = await first.json() as { queue_id: string }
    expect((await second.json() as { queue_id: string }).queue_id).toBe(queue_id)
    expect(upstream.received.filter((received) => received.path === "/videos" && received.body["prompt"] === "twice")).toHaveLength(1)
    // One hold of 4 s at 0.10 USD: the balance a later call starts from is 0.40 lower, not 0.80.
    const running = await post("/video/retrieve", { queue_id })
    expect(await running.json()).toMatchObject({ queue_id, status: "queued" })
    expect(balanceOf(running)).toBeCloseTo(before - 0.4, 9)
  })

  it("a malformed Idempotency-Key, or a used one with another body, is a 400 that starts no job and holds nothing", async () => {
    upstream.videoOutcome = "in_progress"
    const submitted = () => upstream.received.filter((received) => received.path === "/videos").length
    const first = await post("/video/queue", { model: "sora-2", prompt: "keyed once", duration: 4 }, { "idempotency-key": "video-keyed" })
    expect(first.status).toBe(200)
    const { queue_id } = await first.json() as { queue_id: string }
    const jobs = submitted()
    const malformed = await post("/video/queue", { model: "sora-2", prompt: "bad key", duration: 4 }, {
      "idempotency-key": "no spaces allowed"
    })
    expect(malformed.status).toBe(400)
    expect(await malformed.json()).toEqual({ error: "Idempotency-Key must match [A-Za-z0-9_-]{1,255}" })
    const reused = await post("/video/queue", { model: "sora-2", prompt: "another body", duration: 4 }, {
      "idempotency-key": "video-keyed"
    })
    expect(reused.status).toBe(400)
    expect(await reused.json()).toEqual({ error: "Idempotency-Key was already used with a different request body" })
    expect(submitted()).toBe(jobs)
    // Only the first job's hold of 4 s at 0.10 USD is on the balance.
    const running = await post("/video/retrieve", { queue_id })
    expect(await running.json()).toMatchObject({ queue_id, status: "queued" })
    expect(balanceOf(running)).toBeCloseTo(balanceOf(first) - 0.4, 9)
  })
})

describe("Each kind's 429 arrives at the spec's per-minute limit, with the x-ratelimit headers", () => {
  let server: ShippedServer.ShippedServer

  beforeAll(async () => {
    server = await ShippedServer.start()
  }, 120_000)
  afterAll(async () => {
    await server?.stop()
  })

  const hammer = async (count: number, call: () => Promise<Response>) => {
    const statuses: Array<number> = []
    for (let batch = 0; batch < count; batch += 25) {
      const responses = await Promise.all(Array.from({ length: Math.min(25, count - batch) }, call))
      for (const response of responses) {
        statuses.push(response.status)
        await response.arrayBuffer()
      }
    }
    return statuses
  }

  const post = (path: string, body: unknown) => () =>
    fetch(`${server.api}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  /**
   * Counts a limit's window from its first request. The windows are fixed minutes: when the probe
   * finds less than 25 s left in the current one, the count starts in the next, so a loaded
   * machine cannot straddle two windows.
   */
  const refusedAt = async (path: string, body: unknown, limit: number) => {
    const probe = await post(path, body)()
    expect(probe.status).toBe(200)
    const probed = await probe.text()
    const resetMs = Number(probe.headers.get("x-ratelimit-reset-requests")) * 1000
    const fresh = resetMs - Date.now() < 25_000
    if (fresh) await new Promise((resolve) => setTimeout(resolve, resetMs - Date.now() + 250))
    const statuses = await hammer(fresh ? limit : limit - 1, post(path, body))
    expect(statuses.filter((status) => status !== 200)).toEqual([])
    const refused = await post(path, body)()
    expect(refused.status).toBe(429)
    expect(refused.headers.get("x-ratelimit-limit-requests")).toBe(String(limit))
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0")
    expect(Number(refused.headers.get("x-ratelimit-reset-requests"))).toBeGreaterThan(Date.now() / 1000)
    expect(await refused.json()).toEqual({ error: expect.any(String) })
    return probed
  }

  it("audio: 60 a minute, speech and transcription together", async () => {
    await refusedAt("/audio/speech", { model: "dev-tts", input: "hi", voice: "alloy" }, 60)
  }, 120_000)

  it("embedding: 500 a minute", async () => {
    await refusedAt("/embeddings", { model: "dev-embedding", input: "hi" }, 500)
  }, 120_000)

  it("video queue: 40 a minute; video retrieve: 120 a minute, counted apart", async () => {
    const probe = await refusedAt("/video/queue", { model: "dev-video", prompt: "hi" }, 40)
    const { queue_id } = JSON.parse(probe) as { queue_id: string }
    await refusedAt("/video/retrieve", { queue_id }, 120)
  }, 120_000)

  it("the SDK sees the 429 as a RateLimitError", async () => {
    // The window the first test filled may have ended since: it is filled (again) here, until a
    // 429 leaves more than 5 s of its window for the SDK's call.
    const speech = post("/audio/speech", { model: "dev-tts", input: "hi", voice: "alloy" })
    for (let sent = 0;; sent++) {
      expect(sent).toBeLessThan(1_000)
      const response = await speech()
      await response.arrayBuffer()
      if (response.status === 429 && Number(response.headers.get("x-ratelimit-reset-requests")) * 1000 - Date.now() > 5_000) break
    }
    const error = await sdk(server).audio.speech.create({ model: "dev-tts", input: "hi", voice: "alloy" }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
  }, 120_000)
})
