/**
 * The fake OpenAI-compatible upstream for `bench/chat.ts`: streams `CHUNKS` one-token chunks per
 * request, as fast as it can or `DELAY_MS` apart. It reads and parses each body as a real server
 * does, so the direct calls pay for a long prompt too. Prints its base URL, then "listening".
 */
import { FakeChatUpstream } from "@tollgate/testkit"

const chunks = Number(process.env["CHUNKS"] ?? 200)
const delayMs = process.env["DELAY_MS"] === undefined ? undefined : Number(process.env["DELAY_MS"])
const upstream = await FakeChatUpstream.start(() => ({
  pieces: Array.from({ length: chunks }, () => " tok"),
  ...(delayMs === undefined ? {} : { delayMs })
}))
// The fake keeps every request it received for tests to read; a bench sends thousands of long prompts.
setInterval(() => void upstream.received.splice(0), 1_000).unref()
process.on("SIGTERM", () => process.exit(0))
console.log(`url ${upstream.baseUrl}\nlistening`)
