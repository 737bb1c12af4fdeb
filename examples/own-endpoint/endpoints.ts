/**
 * The two paid endpoints every host in this folder serves, declared once with `Tollgate.endpoint`:
 *
 * - `POST /v1/summarize`: JSON `{text}` in, `{summary}` out, a flat 0.002 USD per call, with
 *   `Idempotency-Key` (a retried call gets the first answer and is charged once), under its own
 *   rate limit: `SUMMARIZE_RPM` requests a minute (`SUMMARIZE_PARTNER_RPM` for partner keys);
 * - `POST /v1/generate`: JSON `{prompt, max_tokens}` in, text streamed out one token at a time,
 *   0.00001 USD per token sent. The quote (the hold) is `max_tokens`; a client that goes away
 *   mid-stream pays for the tokens it was sent. It counts against the built-in `text` limits.
 *
 * The "model" is a stand-in that repeats the words of the input: the point is the metering.
 */
import { Tollgate } from "@tollgate/server"
import { setTimeout } from "node:timers/promises"
import { z } from "zod"

/** How long the stand-in model takes per token. */
const TOKEN_MS = 5

export const summarize = Tollgate.endpoint({
  path: "/v1/summarize",
  sku: "summarize",
  kind: {
    name: "summaries",
    rates: {
      default: { requests: Number(process.env["SUMMARIZE_RPM"] ?? 60) },
      partner: { requests: Number(process.env["SUMMARIZE_PARTNER_RPM"] ?? 600) }
    }
  },
  price: { usd: "0.002" },
  body: z.object({ text: z.string().min(1) }),
  idempotency: true,
  handle: async ({ body }) => ({ json: { summary: body.text.split(/\s+/u).slice(0, 8).join(" ") } })
})

export const generate = Tollgate.endpoint({
  path: "/v1/generate",
  sku: "generate",
  price: { usdPerUnit: "0.00001", maxUnits: (body) => body.max_tokens },
  body: z.object({ prompt: z.string().min(1), max_tokens: z.number().int().min(1).max(4096) }),
  handle: async ({ body, signal }) => ({ stream: tokens(body.prompt, body.max_tokens, signal) })
})

/** One word per token, each reporting its usage: what is sent is what is charged. */
async function* tokens(prompt: string, maxTokens: number, signal: AbortSignal) {
  const words = prompt.split(/\s+/u)
  for (let i = 0; i < maxTokens && !signal.aborted; i++) {
    await setTimeout(TOKEN_MS)
    yield { data: `${words[i % words.length]} `, usage: { completionTokens: 1 } }
  }
}
