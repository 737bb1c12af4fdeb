/**
 * `GET /metrics`: every metric of the process in Prometheus text format. Operators choose who may
 * scrape it: nobody (`off`, the route does not exist), anyone who reaches the port (`open`, for a
 * scraper on a private network), or only ADMIN keys of operator accounts (`admin`). The figures
 * are the whole deployment's (credits captured from every customer, upstream errors), so a
 * customer's ADMIN key, which manages only its own account, is refused with a 403.
 *
 * @since 0.1.0
 */
import { Auth, Errors } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import * as Authenticate from "../Authenticate.ts"
import * as Observability from "../Observability.ts"
import * as Route from "../Route.ts"

/** @category models */
export type Access = "off" | "open" | "admin"

const scrape = Observability.sampleProcess.pipe(
  Effect.andThen(PrometheusMetrics.format()),
  Effect.map((text) => HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" }))
)

const docs = (access: "open" | "admin"): Route.Docs => ({
  summary: "Prometheus metrics",
  tags: ["operations"],
  security: access === "admin" ? "admin" : "public",
  responses: { 200: { description: "Metrics in Prometheus text format", contentType: "text/plain", schema: Schema.String } }
})

/**
 * The metrics route for an access mode; none when `off`. In `admin` mode only the ADMIN keys of
 * `operatorAccountIds` may read it.
 *
 * @category routes
 */
export const routes = (access: Access, operatorAccountIds: ReadonlyArray<string> = []): ReadonlyArray<Route.Route<Auth.Auth>> => {
  switch (access) {
    case "off":
      return []
    case "open":
      return [Route.make("GET", "/metrics", Effect.succeed(scrape), docs(access))]
    case "admin":
      return [Route.make(
        "GET",
        "/metrics",
        Effect.map(
          Auth.Auth,
          (auth) =>
            Effect.flatMap(Authenticate.requireAdmin(auth), (principal) =>
              operatorAccountIds.includes(principal.accountId)
                ? scrape
                : Effect.fail(new Errors.Forbidden({ message: "Only operator accounts may read the metrics" })))
        ),
        docs(access)
      )]
  }
}
