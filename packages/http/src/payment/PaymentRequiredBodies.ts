/**
 * The wallet 402s of the metered pipeline, as `X402` writes them: the pipeline's
 * `PaymentRequiredBodies` (`metered/PaymentRequiredBodies.ts`) decides when one is due, and this
 * layer says what it carries, so the x402 shape stays in `core/src/x402/` and the pipeline does not
 * depend on it.
 *
 * @since 0.1.0
 */
import { X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import { Effect, Layer } from "effect"
import { PaymentRequiredBodies } from "../metered/PaymentRequiredBodies.ts"
import { CurrentRequest } from "../RequestContext.ts"

/**
 * The wallet 402s of the metered pipeline, built by `X402` with a fresh SIWX challenge each: the
 * discovery body offers the call at its price (above `minimumPerCall`) and the minimum top-up; the
 * insufficient-balance body says what the call needs, and its `PAYMENT-REQUIRED` offers the same.
 * Both carry the route's bazaar extension (`Bazaar`), which `App` puts in `CurrentRequest`.
 *
 * @category layers
 */
export const layer: Layer.Layer<PaymentRequiredBodies, never, X402.X402Config | Auth> = Layer.effect(
  PaymentRequiredBodies,
  Effect.gen(function*() {
    const config = yield* X402.X402Config
    const auth = yield* Auth
    const absolute = (url: string) => url.startsWith("/") ? `${config.publicOrigin}${url}` : url
    return PaymentRequiredBodies.of({
      discovery: ({ price, settlesActual, url }) =>
        Effect.zipWith(auth.siwxChallenge, CurrentRequest, (challenge, current) =>
          X402.discovery(config, {
            resource: { url: absolute(url) },
            challenge,
            bazaar: current.bazaar,
            ...(price === undefined ? {} : { price }),
            ...(settlesActual === true ? { settlesActual } : {})
          })),
      insufficientBalance: ({ balance, call, url }) =>
        Effect.zipWith(auth.siwxChallenge, CurrentRequest, (challenge, current) =>
          X402.insufficientBalance(config, {
            balance: balance.availableUsd,
            required: call.quote.amount,
            challenge,
            bazaar: current.bazaar,
            ...(call.settlesActual === true ? { settlesActual: true } : {}),
            ...(url === undefined ? {} : { resource: { url: absolute(url) } })
          }))
    })
  })
)
