/**
 * `GET /crypto/rpc/networks`: the supported network slugs, sorted. No authentication; the body
 * never changes while the process runs, so it is encoded once.
 *
 * @since 0.1.0
 */
import { Networks } from "@tollgate/core"
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Route from "../Route.ts"

const body = new TextEncoder().encode(JSON.stringify({ networks: Networks.slugs }))

/** @category routes */
export const route = Route.make(
  "GET",
  "/api/v1/crypto/rpc/networks",
  Effect.succeed(Effect.sync(() => HttpServerResponse.uint8Array(body, { contentType: "application/json" })))
)
