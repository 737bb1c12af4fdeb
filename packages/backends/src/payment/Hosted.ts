/**
 * A client of a hosted x402 facilitator (`POST /verify`, `POST /settle`, `GET /supported`), for
 * operators who prefer one to settling here. Its `/supported` answer carries the Solana `feePayer`
 * the 402 bodies must advertise.
 *
 * @since 0.1.0
 */
import { type Errors, Money, type X402 } from "@tollgate/core"
import { type Duration, Effect, Option, Schema } from "effect"
import { getAddress } from "viem"
import {
  amountOf,
  type Backend,
  evmReference,
  ExactEvmPayload,
  reject,
  solanaReference,
  unavailable,
  UptoEvmPayload,
  uptoReference
} from "./Facilitator.ts"

/**
 * The HTTP facilitator client's settings. `headers` are sent with every call (a hosted
 * facilitator's API key).
 *
 * @category models
 */
export interface HttpOptions {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  readonly timeout?: Duration.Input
}

const VerifyResponse = Schema.Struct({
  isValid: Schema.Boolean,
  invalidReason: Schema.optionalKey(Schema.String),
  invalidMessage: Schema.optionalKey(Schema.String),
  payer: Schema.optionalKey(Schema.String)
})

const SettleResponse = Schema.Struct({
  success: Schema.Boolean,
  errorReason: Schema.optionalKey(Schema.String),
  errorMessage: Schema.optionalKey(Schema.String),
  payer: Schema.optionalKey(Schema.String),
  transaction: Schema.String,
  network: Schema.String
})

const SupportedResponse = Schema.Struct({
  kinds: Schema.Array(Schema.Struct({
    x402Version: Schema.Number,
    scheme: Schema.String,
    network: Schema.String,
    extra: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
  }))
})

/**
 * A client of an x402 facilitator over HTTP.
 *
 * @category constructors
 */
export const makeHttp = (options: HttpOptions): Backend => {
  const base = options.url.replace(/\/+$/, "")
  const timeout = options.timeout ?? "90 seconds"
  const call = <S extends Schema.Top>(
    path: string,
    schema: S,
    body: unknown,
    accepts: (status: number, json: unknown) => boolean
  ): Effect.Effect<S["Type"], Errors.ServiceUnavailable, S["DecodingServices"]> =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(`${base}${path}`, {
          method: body === undefined ? "GET" : "POST",
          headers: { ...options.headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          signal,
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        const json: unknown = await response.json().catch(() => undefined)
        if (!accepts(response.status, json)) throw new Error(`${path} answered ${response.status}`)
        return json
      },
      catch: () => unavailable(`The payment facilitator did not answer ${path}`)
    }).pipe(
      Effect.timeoutOrElse({ duration: timeout, orElse: () => Effect.fail(unavailable(`The payment facilitator timed out on ${path}`)) }),
      Effect.flatMap((json) =>
        Schema.decodeUnknownEffect(schema)(json).pipe(
          Effect.mapError(() => unavailable(`The payment facilitator answered ${path} with an unexpected body`))
        )
      )
    )
  const requestBody = (payment: X402.MatchedPayment) => ({
    x402Version: 2,
    paymentPayload: payment.payload,
    paymentRequirements: payment.requirements
  })
  // A 4xx carrying a verdict is a verdict (the official client throws it as VerifyError/SettleError).
  const hasField = (field: string) => (status: number, json: unknown) =>
    (status >= 200 && status < 300) ||
    (status >= 400 && status < 500 && typeof json === "object" && json !== null && field in json)

  const verify = Effect.fn("PaymentFacilitator.http.verify")(function*(payment: X402.MatchedPayment) {
    const answer = yield* call("/verify", VerifyResponse, requestBody(payment), hasField("isValid"))
    if (!answer.isValid) {
      return yield* reject(answer.invalidReason ?? "invalid_payment", answer.invalidMessage ?? "The facilitator refused the payment")
    }
    return { payer: answer.payer ?? "" }
  })

  const settle = Effect.fn("PaymentFacilitator.http.settle")(function*(payment: X402.MatchedPayment) {
    const amount = yield* amountOf(payment.requirements)
    const answer = yield* call("/settle", SettleResponse, requestBody(payment), hasField("success"))
    if (!answer.success || answer.transaction === "") {
      return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The facilitator could not settle the payment")
    }
    const network = payment.requirements.network
    const evm = Schema.decodeUnknownOption(ExactEvmPayload)(payment.payload.payload)
    const reference = network.startsWith("eip155:") && Option.isSome(evm)
      ? evmReference(network, payment.requirements.asset, evm.value.authorization.from, evm.value.authorization.nonce)
      : solanaReference(network, answer.transaction)
    const payer = answer.payer ?? (Option.isSome(evm) ? evm.value.authorization.from : "")
    if (payer === "") return yield* unavailable("The payment facilitator did not name the payer")
    return { payer, transaction: answer.transaction, network, reference, amount }
  })

  const settleActual = Effect.fn("PaymentFacilitator.http.settleActual")(function*(payment: X402.MatchedPayment, charge: Money.Nano) {
    const permit = yield* Schema.decodeUnknownEffect(UptoEvmPayload)(payment.payload.payload).pipe(
      Effect.mapError(() => reject("invalid_upto_evm_payload", "The payload is not a Permit2 upto permit"))
    )
    const units = Money.toUsdcUnits(charge)
    const amount = yield* amountOf({ ...payment.requirements, amount: units })
    const body = { ...requestBody(payment), paymentRequirements: { ...payment.requirements, amount: units } }
    const answer = yield* call("/settle", SettleResponse, body, hasField("success"))
    if (!answer.success || (answer.transaction === "" && amount > 0)) {
      return yield* reject(answer.errorReason ?? "settlement_failed", answer.errorMessage ?? "The facilitator could not settle the permit")
    }
    const { asset, network } = payment.requirements
    const { from, nonce } = permit.permit2Authorization
    return {
      payer: getAddress(from),
      transaction: answer.transaction,
      network,
      reference: uptoReference(network, asset, from, nonce),
      amount
    }
  })

  const backend: Backend = {
    verify,
    settle,
    settleActual,
    supported: call("/supported", SupportedResponse, undefined, (status) => status >= 200 && status < 300)
  }
  return backend
}
