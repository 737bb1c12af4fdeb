/**
 * `POST /video/quote` and `POST /video/complete` beside the queue and retrieval, against the
 * shipped server in dev mode (its dev video model renders locally): the quote is what the queue
 * holds and a completed job is charged; complete releases a job that has ended.
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

const anonymous = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

const post = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${server.credentials!.inferenceKey}` },
    body: JSON.stringify(body)
  })

describe("POST /video/quote answers the price in USD a queue request would hold, without credentials", () => {
  it("duration x the model's price per second; the queue holds it and the completed job is charged it", async () => {
    const quoted = await anonymous("/video/quote", { model: "dev-video", duration: "4s" })
    expect(quoted.status).toBe(200)
    expect(await quoted.json()).toEqual({ quote: 0.2 })
    expect(await (await anonymous("/video/quote", { model: "dev-video" })).json()).toEqual({ quote: 0.1 })
    const queued = await post("/video/queue", { model: "dev-video", prompt: "a lighthouse", duration: 4 })
    expect(queued.headers.get("x-service-video-hold-usd")).toBe("0.2")
    const { queue_id } = await queued.json() as { queue_id: string }
    expect((await post("/video/retrieve", { queue_id })).status).toBe(200)
    expect((await Usage.latest(server, 5)).find((entry) => entry.sku === "video:dev-video")).toMatchObject({ nano: 200_000_000 })
  })

  it("a duration or size the model does not render, or an unknown model, is a 400 naming it", async () => {
    const duration = await anonymous("/video/quote", { model: "dev-video", duration: 3 })
    expect(duration.status).toBe(400)
    expect(await duration.json()).toMatchObject({ details: { duration: { _errors: ["dev-video renders 2, 4 seconds"] } } })
    const model = await anonymous("/video/quote", { model: "llama-3.3-70b" })
    expect(await model.json()).toMatchObject({ details: { model: { _errors: [expect.any(String)] } } })
  })
})

describe("POST /video/complete releases a job that has ended; a running one is a 400, an unknown one a 404", () => {
  it("queued: 400; retrieved (completed): released, then retrieve and complete are 404", async () => {
    const { queue_id } = await (await post("/video/queue", { model: "dev-video", prompt: "waves", duration: 2 })).json() as {
      queue_id: string
    }
    const running = await post("/video/complete", { queue_id })
    expect(running.status).toBe(400)
    expect(await running.json()).toMatchObject({ details: { queue_id: { _errors: [expect.stringContaining("still running")] } } })
    expect((await post("/video/retrieve", { queue_id })).status).toBe(200)
    const completed = await post("/video/complete", { queue_id, model: "dev-video" })
    expect(completed.status).toBe(200)
    expect(await completed.json()).toEqual({ success: true })
    expect((await post("/video/retrieve", { queue_id })).status).toBe(404)
    expect(await (await post("/video/complete", { queue_id })).json()).toEqual({ error: `No video job ${queue_id}` })
  })

  it("without credentials: the 402 of every metered route", async () => {
    expect((await anonymous("/video/complete", { queue_id: "vid_x" })).status).toBe(402)
  })
})
