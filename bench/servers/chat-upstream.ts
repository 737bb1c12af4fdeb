/**
 * The fake OpenAI-compatible upstream for `bench/chat.ts`: streams `CHUNKS` one-token chunks per
 * request, as fast as it can or `DELAY_MS` apart. Prints its base URL, then "listening".
 */
import { FakeChatUpstream } from "@tollgate/testkit"

const chunks = Number(process.env["CHUNKS"] ?? 200)
const delayMs = process.env["DELAY_MS"] === undefined ? undefined : Number(process.env["DELAY_MS"])
const upstream = await FakeChatUpstream.start(() => ({
  pieces: Array.from({ length: chunks }, () => " tok"),
  ...(delayMs === undefined ? {} : { delayMs })
}))
console.log(`url ${upstream.baseUrl}\nlistening`)
