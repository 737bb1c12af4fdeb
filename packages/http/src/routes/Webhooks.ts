/**
 * The webhook delivery log for operators (`Webhooks`): `GET /webhooks/deliveries` pages through
 * the deliveries, newest first, with their status, attempts and last error; `POST
 * /webhooks/deliveries/:id/redeliver` sends one again from its first attempt. Webhooks are the
 * operator's, about every account, so only an ADMIN key of an operator account may use them.
 *
 * @since 0.1.0
 */
import { Errors, Webhooks } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Authenticate from "../Authenticate.ts"
import * as RequestQuery from "../RequestQuery.ts"
import * as Route from "../Route.ts"
import { BillingOptions } from "./Billing.ts"

/** @category schemas */
export const DeliveriesQuery = Schema.Struct({
  limit: Schema.optionalKey(Schema.FiniteFromString.check(
    Schema.isInt({ message: "must be an integer" }),
    Schema.isBetween({ minimum: 1, maximum: 500 }, { message: "must be between 1 and 500" })
  )),
  /** The `createdAt` of the last delivery of the previous page. */
  before: Schema.optionalKey(Schema.FiniteFromString.check(Schema.isInt({ message: "must be an integer" })))
})

const wire = (delivery: Webhooks.Delivery) => ({
  id: delivery.id,
  type: delivery.type,
  url: delivery.url,
  status: delivery.status,
  attempts: delivery.attempts,
  createdAt: delivery.createdAt,
  nextAttemptAt: delivery.status === "pending" ? new Date(delivery.nextAt).toISOString() : null,
  deliveredAt: delivery.deliveredAt === undefined ? null : new Date(delivery.deliveredAt).toISOString(),
  lastError: delivery.lastError ?? null,
  payload: JSON.parse(delivery.payload) as unknown
})

const requireOperator = (auth: Auth["Service"], operators: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const principal = yield* Authenticate.requireAdmin(auth)
    if (!operators.includes(principal.accountId)) {
      return yield* new Errors.Forbidden({ message: "Only operator accounts may read webhook deliveries" })
    }
    return principal
  })

/** @category routes */
export const deliveries = Route.make(
  "GET",
  "/api/v1/webhooks/deliveries",
  Effect.gen(function*() {
    const auth = yield* Auth
    const store = yield* Webhooks.WebhookStore
    const { operatorAccountIds } = yield* BillingOptions
    return Effect.gen(function*() {
      yield* requireOperator(auth, operatorAccountIds)
      const query = yield* RequestQuery.schema(DeliveriesQuery)
      const limit = query.limit ?? 100
      const page = yield* store.list(limit, query.before)
      return HttpServerResponse.jsonUnsafe({
        data: page.map(wire),
        nextBefore: page.length === limit ? page.at(-1)!.createdAt : null
      }, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "The webhook delivery log",
    description: "ADMIN key of an operator account. Newest first; pass `nextBefore` as `before` for the next page.",
    tags: ["Webhooks"],
    security: "admin",
    query: DeliveriesQuery,
    responses: {
      200: { description: "A page of deliveries" },
      400: { description: "Invalid query parameters", schema: Errors.DetailedError },
      403: { description: "Not an operator's ADMIN key", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const redeliver = Route.make(
  "POST",
  "/api/v1/webhooks/deliveries/:id/redeliver",
  Effect.gen(function*() {
    const auth = yield* Auth
    const webhooks = yield* Webhooks.Webhooks
    const { operatorAccountIds } = yield* BillingOptions
    return Effect.gen(function*() {
      yield* requireOperator(auth, operatorAccountIds)
      const params = yield* Route.params
      const delivery = yield* webhooks.redeliver(params["id"] ?? "")
      return HttpServerResponse.jsonUnsafe({ data: wire(delivery) }, { status: 202 })
    })
  }),
  {
    summary: "Send a webhook delivery again",
    description: "ADMIN key of an operator account. The delivery is sent again from its first attempt, with the same `webhook-id`.",
    tags: ["Webhooks"],
    security: "admin",
    responses: {
      202: { description: "The delivery, pending again" },
      403: { description: "Not an operator's ADMIN key", schema: Errors.StandardError },
      404: { description: "No delivery with this id", schema: Errors.StandardError }
    }
  }
)

/** @category routes */
export const routes = [deliveries, redeliver] as const
