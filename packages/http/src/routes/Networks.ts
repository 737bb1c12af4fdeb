/**
 * `GET /crypto/rpc/networks`: the supported network slugs, sorted. No authentication; the body
 * never changes while the process runs, so it is encoded once.
 *
 * @since 0.1.0
 */
import { Networks } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Route from "../Route.ts"

/** @category schemas */
export const NetworkList = Schema.Struct({ networks: Schema.Array(Schema.String) }).annotate({ identifier: "NetworkList" })

// Responses are immutable values, so every request is answered with this one, encoded once.
const response = HttpServerResponse.uint8Array(new TextEncoder().encode(JSON.stringify({ networks: Networks.slugs })), {
  contentType: "application/json"
})

/** @category routes */
export const route = Route.make(
  "GET",
  "/api/v1/crypto/rpc/networks",
  Effect.succeed(Effect.succeed(response)),
  {
    summary: "List the supported RPC networks",
    description: "Alphabetically sorted network slugs accepted by POST /crypto/rpc/{network}. No authentication.",
    tags: ["Crypto RPC"],
    security: "public",
    responses: { 200: { description: "The network slugs", schema: NetworkList } }
  }
)
