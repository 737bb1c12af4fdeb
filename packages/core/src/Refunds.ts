/**
 * Refunding a charged call: an operator returns to an account what one of its calls was charged in
 * USD, or a part of it, as a `refund` credit in the ledger. The call is named by its request id (the
 * `x-request-id` of its response, `inferenceDetails.requestId` in usage-history); its charge is the
 * sum of the USD usage entries of that request id within the retention. What the staked-token
 * allowance paid is never refunded: the allowance expires daily, so returning it as USD would give
 * more than was taken.
 *
 * A call is refunded once: the ledger reference is `refund:<requestId>`, so a retry (the same
 * amount) answers the first refund and moves nothing, and concurrent refunds of one call on any
 * number of servers move money once, by the ledger's own once-per-reference rule. A refund never
 * exceeds the charge.
 *
 * The operator's endpoint (`POST /billing/refunds`) and the CLI (`tollgate-cli credits refund`)
 * both run `refundCall`.
 *
 * @since 0.1.0
 */
import { Effect, Option, Stream } from "effect"
import * as CreditLedger from "./CreditLedger.ts"
import * as Errors from "./Errors.ts"
import * as Money from "./Money.ts"

/** @category models */
export interface RefundInput {
  readonly accountId: string
  readonly requestId: string
  /** Default: the whole USD charge. */
  readonly amount?: Money.Nano | undefined
}

/** @category models */
export interface Refund {
  readonly accountId: string
  readonly requestId: string
  readonly amount: Money.Nano
  /** What the call was charged in USD. */
  readonly charged: Money.Nano
  readonly receipt: CreditLedger.Receipt
}

/**
 * The ledger reference of a call's refund: one per call.
 *
 * @category constructors
 */
export const referenceOf = (requestId: string): string => `refund:${requestId}`

/** The usage entries of one request, newest first, over the whole retention. */
const chargesOf = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, requestId: string) =>
  CreditLedger.usageStream(ledger, accountId, { order: "desc" }).pipe(
    Stream.filter((entry) => entry.requestId === requestId),
    Stream.runCollect
  )

/** The amount of the refund already made of this call, read from the journal. */
const refundedBefore = (ledger: CreditLedger.CreditLedger["Service"], accountId: string, reference: string) =>
  CreditLedger.journalStream(ledger, accountId).pipe(
    Stream.filter((entry) => entry.kind === "refund" && entry.reference === reference),
    Stream.runHead,
    Effect.map((found) => Option.getOrUndefined(found)?.delta)
  )

/**
 * Refunds a call of an account: 404 when the account has no usage entry of that request id, 400
 * when the call was charged nothing in USD, when `amount` exceeds the charge, or when the call was
 * already refunded another amount.
 *
 * @category operations
 */
export const refundCall = Effect.fn("Refunds.refundCall")(function*(ledger: CreditLedger.CreditLedger["Service"], input: RefundInput) {
  const entries = yield* chargesOf(ledger, input.accountId, input.requestId)
  if (entries.length === 0) {
    return yield* new Errors.NotFound({
      message: `Account ${input.accountId} has no charge with request id ${input.requestId} (usage entries are kept for the retention)`
    })
  }
  const charged = Money.unsafeNano(entries.reduce((sum, entry) => entry.currency === "USD" ? sum + entry.amount : sum, 0))
  if (charged === 0) {
    return yield* new Errors.InvalidRequest({
      message: `Request ${input.requestId} was charged nothing in USD (the staked-token allowance is not refunded)`
    })
  }
  const amount = input.amount ?? charged
  if (amount > charged) {
    const limit = `must be at most ${Money.formatUsd(charged)} USD, what the call was charged`
    return yield* new Errors.InvalidRequest({
      message: `The refund ${limit}`,
      details: Errors.fieldErrors([{ path: ["amountUsd"], message: limit }])
    })
  }
  const reference = referenceOf(input.requestId)
  const receipt = yield* ledger.refund({ accountId: input.accountId, amount, reference }).pipe(
    Effect.catchTag("LedgerError", (error) =>
      error.reason !== "ReferenceConflict"
        ? Effect.fail(new Errors.InvalidRequest({ message: error.message }))
        : Effect.flatMap(refundedBefore(ledger, input.accountId, reference), (refunded) =>
          Effect.fail(
            new Errors.InvalidRequest({
              message:
                `Request ${input.requestId} was already refunded ${
                  refunded === undefined ? "another amount" : `${Money.formatUsd(refunded)} USD`
                } ` +
                `of its ${Money.formatUsd(charged)} USD charge: a call is refunded once`
            })
          )))
  )
  return { accountId: input.accountId, requestId: input.requestId, amount, charged, receipt } satisfies Refund
})
