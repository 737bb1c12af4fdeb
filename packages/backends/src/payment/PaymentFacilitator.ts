/**
 * Verifying and settling x402 payments. A top-up credits a wallet only after its payment has been
 * verified and settled here; what is credited is keyed by the `reference` returned, so a payment
 * credits at most once however often it is submitted.
 *
 * **Details**
 *
 * Three backends, combined by network in `layer`: `LocalEvm` (the official `@x402/evm` schemes,
 * sending from the relayer key), `LocalSolana` (the official `@x402/svm` scheme, co-signing as fee
 * payer) and `Hosted` (a client of a hosted facilitator). What they share is in `Facilitator`.
 *
 * Both local backends keep a transaction sent but not confirmed in time in a pending settlements
 * store (`@x402/core`'s `PendingSettlementStore`, `@tollgate/core/PendingSettlements`): the top-up
 * answers 503, and the retried payment, whose money has already moved, is accepted and collects
 * that transaction. Several processes must share the store (Redis), or a retry reaching another one
 * is refused while the payer has paid.
 *
 * @since 0.1.0
 */
import { type Errors } from "@tollgate/core"
import { Context, Effect, Layer } from "effect"
import { type Backend, reject } from "./Facilitator.ts"
import * as Hosted from "./Hosted.ts"
import * as LocalEvm from "./LocalEvm.ts"
import * as LocalSolana from "./LocalSolana.ts"

export {
  type Backend,
  evmReference,
  ExactEvmPayload,
  type FacilitatorError,
  feePayerOf,
  type Settled,
  solanaReference,
  type Supported,
  UptoEvmPayload,
  uptoReference,
  type Verified
} from "./Facilitator.ts"
export { type HttpOptions, makeHttp } from "./Hosted.ts"
export { type LocalEvmOptions, makeLocalEvm, uptoExtra } from "./LocalEvm.ts"
export { type LocalSvmOptions, makeLocalSvm } from "./LocalSolana.ts"

/** @category services */
export class PaymentFacilitator extends Context.Service<PaymentFacilitator, Backend>()("@tollgate/backends/payment/PaymentFacilitator") {}

/**
 * Routes each payment by network: the first local backend that supports it serves it (local EVM,
 * then local Solana); any other network goes to the HTTP facilitator, when there is one.
 * `supported` is the union.
 *
 * @category constructors
 */
export const combine = (locals: ReadonlyArray<Backend | undefined>, remote: Backend | undefined): Backend => {
  const present = locals.filter((backend): backend is Backend => backend !== undefined)
  const pick = (network: string) =>
    Effect.gen(function*() {
      for (const backend of present) {
        const supported = yield* backend.supported
        if (supported.kinds.some((kind) => kind.network === network)) return backend
      }
      if (remote !== undefined) return remote
      return yield* reject("unsupported_network", `Network ${network} is not supported`)
    })
  const all = remote === undefined ? present : [...present, remote]
  return PaymentFacilitator.of({
    verify: (payment) => Effect.flatMap(pick(payment.requirements.network), (backend) => backend.verify(payment)),
    settle: (payment) => Effect.flatMap(pick(payment.requirements.network), (backend) => backend.settle(payment)),
    settleActual: (payment, amount) =>
      Effect.flatMap(pick(payment.requirements.network), (backend) => backend.settleActual(payment, amount)),
    supported: Effect.map(Effect.forEach(all, (backend) => backend.supported), (each) => ({ kinds: each.flatMap((s) => s.kinds) }))
  })
}

/**
 * The facilitator of a deployment: local EVM settlement when `local` is given, local Solana
 * settlement when `svm` is given, the HTTP facilitator when `http` is given, each network served
 * by the first that supports it.
 *
 * @category layers
 */
export const layer = (options: {
  readonly local?: LocalEvm.LocalEvmOptions
  readonly svm?: LocalSolana.LocalSvmOptions
  readonly http?: Hosted.HttpOptions
}): Layer.Layer<PaymentFacilitator, Errors.ServiceUnavailable> =>
  Layer.effect(
    PaymentFacilitator,
    Effect.gen(function*() {
      const local = options.local === undefined ? undefined : yield* LocalEvm.makeLocalEvm(options.local)
      const svm = options.svm === undefined ? undefined : yield* LocalSolana.makeLocalSvm(options.svm)
      const remote = options.http === undefined ? undefined : Hosted.makeHttp(options.http)
      return combine([local, svm], remote)
    })
  )
