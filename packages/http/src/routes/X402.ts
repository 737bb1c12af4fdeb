/**
 * Wallet access over x402: `POST /x402/top-up` buys USDC credit for a wallet (`GET` on it says
 * how, the link every 402 gives), and `GET /x402/balance/{walletAddress}` reads it. The metered
 * pipeline's wallet 402s are `payment/PaymentRequiredBodies.ts`.
 *
 * A top-up without a payment header answers 402 with the requirements of the amount asked for
 * (`amountUsd` in the query or the JSON body, 5 USD when absent): the official client re-sends the
 * same request with `PAYMENT-SIGNATURE`, so the requirements rebuilt for that request equal the
 * ones it signed. The payment is matched, verified and settled by the `PaymentFacilitator`, and
 * only then credited to the payer's wallet account under the payment's own reference, so a replay,
 * a retry or a concurrent duplicate never credits twice. Any refusal is a fresh 402 whose `error`
 * says why, with nothing credited.
 *
 * @since 0.1.0
 */
import { PaymentFacilitator } from "@tollgate/backends/payment/PaymentFacilitator"
import { CreditLedger, Errors, Money, Principal, TopUpTransactions, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Option, Result, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import * as JsonDepth from "../JsonDepth.ts"
import * as Route from "../Route.ts"

const invalid = (message: string) => new Errors.InvalidRequest({ message })

/** The group of both operations in the OpenAPI document. */
/** The OpenAPI group of the wallet operations. */
export const tag = "Wallets (x402)"

const parseAmount = (config: X402.Config, raw: unknown): Result.Result<Money.Nano, Errors.InvalidRequest> => {
  if (raw === undefined) return Result.succeed(config.minimumTopUp)
  const text = typeof raw === "number" ? String(raw) : typeof raw === "string" ? raw : undefined
  const parsed = text === undefined ? undefined : Money.parseUsd(text)
  if (parsed === undefined || Result.isFailure(parsed) || parsed.success <= 0) {
    return Result.fail(invalid("amountUsd must be a positive decimal amount of USD"))
  }
  if (parsed.success % Money.NANO_PER_USDC_UNIT !== 0) {
    return Result.fail(invalid("amountUsd has more than 6 decimal places"))
  }
  if (parsed.success < config.minimumTopUp) {
    return Result.fail(invalid(`The minimum top-up is ${Money.formatUsd(config.minimumTopUp)} USD`))
  }
  return Result.succeed(parsed.success)
}

/** The requested amount: `amountUsd` from the query, else from a JSON body, else the minimum. */
const requestedAmount = Effect.fn("X402.requestedAmount")(function*(config: X402.Config, url: URL) {
  const request = yield* HttpServerRequest.HttpServerRequest
  const fromQuery = url.searchParams.get("amountUsd")
  if (fromQuery !== null) return yield* Effect.fromResult(parseAmount(config, fromQuery))
  const text = yield* request.text.pipe(Effect.mapError(() => invalid("Request body could not be read")))
  if (text.trim() === "") return config.minimumTopUp
  const body = yield* Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => invalid("The body must be JSON") })
  if (JsonDepth.exceeds(body)) return yield* JsonDepth.tooDeep
  const raw = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)["amountUsd"] : undefined
  return yield* Effect.fromResult(parseAmount(config, raw))
})

/**
 * `POST /api/v1/x402/top-up`.
 *
 * @category routes
 */
export const topUp = Route.make(
  "POST",
  X402.topUpPath,
  Effect.gen(function*() {
    const config = yield* X402.X402Config
    const facilitator = yield* PaymentFacilitator
    const ledger = yield* CreditLedger.CreditLedger
    const auth = yield* Auth
    // Where the server keeps them: the transaction hashes a wallet's history shows.
    const transactions = Option.getOrUndefined(yield* Effect.serviceOption(TopUpTransactions.TopUpTransactions))
    return Effect.gen(function*() {
      if (!X402.paymentsEnabled(config)) {
        return yield* new Errors.ServiceUnavailable({
          message: "Wallet payments are not configured on this server (its operator has set no x402.payTo)"
        })
      }
      const request = yield* HttpServerRequest.HttpServerRequest
      const url = new URL(request.url, config.publicOrigin)
      const amount = yield* requestedAmount(config, url)
      const resource = {
        url: `${config.publicOrigin}${url.pathname}`,
        description: `Top up ${Money.formatUsd(amount)} USD of wallet credit`
      }
      const refuse = (error: string) =>
        Effect.flatMap(auth.siwxChallenge, (challenge) => Effect.fail(X402.discovery(config, { resource, challenge, amount, error })))
      const header = X402.paymentHeader(request.headers)
      if (Option.isNone(header)) return yield* refuse("Payment required")
      const settled = yield* Effect.fromResult(X402.decodePayment(header.value, X402.requirements(config, amount))).pipe(
        Effect.tap((payment) => facilitator.verify(payment)),
        Effect.flatMap((payment) => facilitator.settle(payment)),
        Effect.catchTag(
          "PaymentRejected",
          (rejected) =>
            Effect.logInfo("x402 payment refused", rejected.reason, rejected.message).pipe(Effect.andThen(refuse(rejected.reason)))
        )
      )
      const family = X402.familyOf(settled.network)
      const accountId = Principal.walletAccountId(family, settled.payer)
      const receipt = yield* ledger.topUp({
        accountId,
        amount: settled.amount,
        reference: settled.reference
      }).pipe(
        Effect.catchTag(
          "LedgerError",
          (error) =>
            Effect.logError("x402 top-up settled but not credited", settled.reference, error.message).pipe(
              Effect.andThen(Effect.fail(new Errors.ServiceUnavailable({ message: "The payment settled but could not be credited yet" })))
            )
        )
      )
      // The credit stands either way: a hash not kept only leaves the history without it.
      if (transactions !== undefined) {
        yield* transactions.record(accountId, settled.reference, settled.transaction).pipe(
          Effect.catchCause((cause) => Effect.logWarning("x402 top-up transaction hash not kept", settled.reference, cause))
        )
      }
      const response: X402.SettleResponse = {
        success: true,
        transaction: settled.transaction,
        network: settled.network,
        payer: settled.payer
      }
      return HttpServerResponse.jsonUnsafe({
        success: true,
        walletAddress: settled.payer,
        network: settled.network,
        transaction: settled.transaction,
        creditedUsd: Money.formatUsd(settled.amount),
        balanceUsd: Money.formatUsd(receipt.balance.availableUsd)
      }, {
        headers: {
          [X402.headers.paymentResponse]: X402.encodePaymentResponse(response),
          "cache-control": "no-store, private"
        }
      })
    })
  }),
  {
    summary: "Buy prepaid USDC credit for a wallet",
    description: "Without a payment header: a 402 whose `accepts` lists what to pay for `amountUsd` (5 USD when " +
      "absent), on Base and on Solana when offered. Sent again with the payment signed for one entry in " +
      "`PAYMENT-SIGNATURE`: settled, then credited to the paying wallet once per payment, with the settlement in " +
      "`PAYMENT-RESPONSE`. With no wallet payments configured it answers 503.",
    tags: [tag],
    security: "public",
    query: Schema.Struct({ amountUsd: Schema.optionalKey(Schema.String) }),
    headers: [{ name: "PAYMENT-SIGNATURE", description: "base64 JSON of the x402 payment for one entry of `accepts`" }],
    responses: {
      200: {
        description: "Credited",
        schema: Schema.Struct({
          success: Schema.Boolean,
          walletAddress: Schema.String,
          network: Schema.String,
          transaction: Schema.String,
          creditedUsd: Schema.String,
          balanceUsd: Schema.String
        })
      },
      402: { description: "The payment requirements and a sign-in challenge; after a refused payment, `error` says why" },
      503: { description: "Wallet payments are not configured on this server" }
    }
  }
)

/**
 * `GET /api/v1/x402/top-up`: the top-up link of every 402, opened. How to buy credit here, or that
 * this server takes no wallet payments yet and how to pay instead (`X402.topUpGuide`).
 *
 * @category routes
 */
export const topUpGuide = Route.make(
  "GET",
  X402.topUpPath,
  Effect.map(X402.X402Config, (config) => {
    const guide = X402.topUpGuide(config)
    return Effect.succeed(HttpServerResponse.jsonUnsafe(guide, { headers: { "cache-control": "no-store" } }))
  }),
  {
    summary: "How to top up a wallet's credit here",
    description: "The top-up link of a 402, opened: whether this server takes wallet payments, the steps of a top-up " +
      "and what the minimum top-up accepts; on a server that takes none (dev mode before x402.payTo and a settler are " +
      "set), how to pay with an API key instead.",
    tags: [tag],
    security: "public",
    responses: { 200: { description: "How to top up, or how to pay instead" } }
  }
)

/**
 * `GET /api/v1/x402/balance/:walletAddress`.
 *
 * @category routes
 */
export const balance = Route.make(
  "GET",
  "/api/v1/x402/balance/:walletAddress",
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    return Effect.gen(function*() {
      const params = yield* Route.params
      const wallet = X402.parseWalletAddress(params["walletAddress"] ?? "")
      if (Option.isNone(wallet)) {
        return yield* invalid("walletAddress must be an EVM address (0x + 40 hex) or a Solana address (base58)")
      }
      const current = yield* ledger.balance(Principal.walletAccountId(wallet.value.family, wallet.value.address))
      return HttpServerResponse.jsonUnsafe({
        walletAddress: wallet.value.address,
        chainFamily: wallet.value.family,
        balanceUsd: Money.formatUsd(current.availableUsd),
        currency: "USD"
      }, { headers: { "cache-control": "no-store" } })
    })
  }),
  {
    summary: "Read a wallet's prepaid credit",
    tags: [tag],
    security: "public",
    responses: {
      200: {
        description: "The wallet's balance (0 for a wallet never seen)",
        schema: Schema.Struct({
          walletAddress: Schema.String,
          chainFamily: Schema.Literals(["evm", "solana"]),
          balanceUsd: Schema.String,
          currency: Schema.Literal("USD")
        })
      },
      400: { description: "walletAddress is neither an EVM nor a Solana address" }
    }
  }
)

/** @category routes */
export const routes = [topUp, topUpGuide, balance] as const
