/**
 * Webhooks: what tells an operator that money is running low. Each event is delivered at least once
 * to every configured endpoint that takes its type, in the Standard Webhooks format, and fires once
 * per crossing of its threshold. Nothing on the paid path changes when no endpoint is configured.
 *
 * **Details**
 *
 * The events are an account's balance falling below a threshold, a key's spend reaching a share of
 * its cap and reaching the cap, a top-up credited, and an x402 settlement whose transaction was
 * sent but not confirmed within the facilitator's receipt timeout (the payer was answered 503 and
 * the transfer is pending). A delivery carries `webhook-id`, `webhook-timestamp` and
 * `webhook-signature` over the body, signed with the endpoint's `whsec_` secret by the
 * `standardwebhooks` package. It is stored before it is sent (`WebhookStore`, in memory or on
 * Redis, where another instance or a restarted one picks it up), and retried with exponential
 * backoff until the endpoint answers 2xx or `maxAttempts` have failed. The stored deliveries are
 * the delivery log, and any of them can be sent again (`redeliver`).
 *
 * A latch in the store is set when an event fires and cleared when the condition is undone (a
 * credit lifts the balance above the threshold; a key's next period starts with fresh latches), so
 * calls made under the threshold send nothing more. The events come from the stores' operations,
 * observed by `layerObserve` around the admission store, the ledger and the pending settlements.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Schedule } from "effect"
import { Webhook } from "standardwebhooks"
import * as Admission from "./Admission.ts"
import * as CreditLedger from "./CreditLedger.ts"
import { NotFound, type ServiceUnavailable } from "./Errors.ts"
import * as KeyCaps from "./KeyCaps.ts"
import * as Money from "./Money.ts"
import * as PendingSettlements from "./PendingSettlements.ts"

/** @category models */
export const EVENT_TYPES = [
  "balance.below_threshold",
  "key.cap_share_reached",
  "key.cap_reached",
  "topup.credited",
  "settlement.pending_timeout"
] as const

/** @category models */
export type EventType = typeof EVENT_TYPES[number]

/** @category models */
export interface Endpoint {
  readonly url: string
  /** The Standard Webhooks secret, `whsec_` and base64. */
  readonly secret: string
  /** The event types sent to it; every type when absent. */
  readonly events?: ReadonlyArray<EventType> | undefined
}

/** @category options */
export interface Options {
  readonly endpoints: ReadonlyArray<Endpoint>
  /** `balance.below_threshold` fires when an account's available USD falls below this. */
  readonly balanceBelow?: Money.Nano | undefined
  /** `key.cap_share_reached` fires when a key's spend reaches this share of its cap (0 to 1). */
  readonly capShare?: number | undefined
  /** The first retry's delay; each next one doubles, up to `MAX_RETRY_DELAY_MS`. Default 1000. */
  readonly retryBaseMs?: number | undefined
  /** Attempts before a delivery is marked failed (it can still be redelivered). Default 12. */
  readonly maxAttempts?: number | undefined
  /** How often the store is polled for due deliveries. Default 250. */
  readonly pollMs?: number | undefined
  /** How long an endpoint may take to answer. Default 10000. */
  readonly timeoutMs?: number | undefined
}

/** The longest wait between two attempts. @category constants */
export const MAX_RETRY_DELAY_MS = 10 * 60_000

/** How many deliveries the log keeps, the newest. @category constants */
export const LOG_SIZE = 10_000

/**
 * One event to one endpoint. Its id is the `webhook-id` (the same on every attempt, so a receiver
 * can drop duplicates), its payload the body, signed as is.
 *
 * @category models
 */
export interface Delivery {
  readonly id: string
  readonly type: EventType
  readonly url: string
  readonly payload: string
  readonly createdAt: number
  readonly attempts: number
  readonly status: "pending" | "delivered" | "failed"
  /** When a pending delivery is next sent. */
  readonly nextAt: number
  readonly lastError?: string | undefined
  readonly deliveredAt?: number | undefined
}

/** @category services */
export class WebhookStore extends Context.Service<WebhookStore, {
  /** True when `key` was not set, and sets it (for `ttlMs` when given): one event per crossing. */
  readonly latch: (key: string, ttlMs?: number) => Effect.Effect<boolean, ServiceUnavailable>
  readonly unlatch: (key: string) => Effect.Effect<void, ServiceUnavailable>
  readonly enqueue: (deliveries: ReadonlyArray<Delivery>) => Effect.Effect<void, ServiceUnavailable>
  /** The pending deliveries due at `now`, each leased until `now + leaseMs`, so one sender sends it at a time. */
  readonly claimDue: (now: number, leaseMs: number, limit: number) => Effect.Effect<ReadonlyArray<Delivery>, ServiceUnavailable>
  /** Stores the delivery as it is now; a pending one is due at its `nextAt`. */
  readonly update: (delivery: Delivery) => Effect.Effect<void, ServiceUnavailable>
  readonly get: (id: string) => Effect.Effect<Option.Option<Delivery>, ServiceUnavailable>
  /** The log, newest first: `limit` deliveries created before `before`. */
  readonly list: (limit: number, before?: number) => Effect.Effect<ReadonlyArray<Delivery>, ServiceUnavailable>
}>()("@tollgate/core/Webhooks/WebhookStore") {}

/**
 * Deliveries and latches in process memory.
 *
 * @category layers
 */
export const layerStoreMemory: Layer.Layer<WebhookStore> = Layer.sync(WebhookStore, () => {
  const deliveries = new Map<string, Delivery>()
  const latches = new Map<string, number>()
  return WebhookStore.of({
    latch: (key, ttlMs) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const until = latches.get(key)
        if (until !== undefined && until > now) return false
        latches.set(key, ttlMs === undefined ? Number.POSITIVE_INFINITY : now + ttlMs)
        return true
      }),
    unlatch: (key) => Effect.sync(() => void latches.delete(key)),
    enqueue: (added) =>
      Effect.sync(() => {
        for (const delivery of added) deliveries.set(delivery.id, delivery)
        // Insertion order is creation order: the oldest leave first.
        for (const id of deliveries.keys()) {
          if (deliveries.size <= LOG_SIZE) break
          deliveries.delete(id)
        }
      }),
    claimDue: (now, leaseMs, limit) =>
      Effect.sync(() => {
        const due: Array<Delivery> = []
        for (const delivery of deliveries.values()) {
          if (due.length >= limit) break
          if (delivery.status !== "pending" || delivery.nextAt > now) continue
          due.push(delivery)
          deliveries.set(delivery.id, { ...delivery, nextAt: now + leaseMs })
        }
        return due
      }),
    update: (delivery) => Effect.sync(() => void (deliveries.has(delivery.id) && deliveries.set(delivery.id, delivery))),
    get: (id) => Effect.sync(() => Option.fromNullishOr(deliveries.get(id))),
    list: (limit, before) =>
      Effect.sync(() =>
        [...deliveries.values()].filter((delivery) => before === undefined || delivery.createdAt < before)
          .sort((a, b) => b.createdAt - a.createdAt).slice(0, limit)
      )
  })
})

/** @category services */
export class Webhooks extends Context.Service<Webhooks, {
  readonly options: Options
  /** Stores a delivery of the event for every endpoint that takes its type. Never fails: a store failure is logged. */
  readonly emit: (type: EventType, data: Readonly<Record<string, unknown>>) => Effect.Effect<void>
  /** `emit`, when `latch` was not set (and sets it): once per crossing. */
  readonly once: (latch: string, type: EventType, data: Readonly<Record<string, unknown>>, ttlMs?: number) => Effect.Effect<void>
  /** Clears a latch: the condition was undone, and the next crossing fires again. */
  readonly rearm: (latch: string) => Effect.Effect<void>
  /** Sends the delivery again, from its first attempt. */
  readonly redeliver: (id: string) => Effect.Effect<Delivery, NotFound | ServiceUnavailable>
}>()("@tollgate/core/Webhooks") {}

const randomId = (prefix: string) => `${prefix}_${Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString("hex")}`

/**
 * The service over the `WebhookStore` in context.
 *
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Webhooks, never, WebhookStore> =>
  Layer.effect(
    Webhooks,
    Effect.gen(function*() {
      const store = yield* WebhookStore
      const logged = <E>(effect: Effect.Effect<void, E>) =>
        Effect.catchCause(effect, (cause) => Effect.logError("webhook event not stored", cause))
      const emit = (type: EventType, data: Readonly<Record<string, unknown>>) =>
        Effect.suspend(() => {
          const endpoints = options.endpoints.filter((endpoint) => endpoint.events === undefined || endpoint.events.includes(type))
          if (endpoints.length === 0) return Effect.void
          return Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const payload = JSON.stringify({ type, timestamp: new Date(now).toISOString(), data })
            return logged(store.enqueue(endpoints.map((endpoint): Delivery => ({
              id: randomId("msg"),
              type,
              url: endpoint.url,
              payload,
              createdAt: now,
              attempts: 0,
              status: "pending",
              nextAt: now
            }))))
          })
        })
      return Webhooks.of({
        options,
        emit,
        once: (latch, type, data, ttlMs) =>
          logged(Effect.flatMap(store.latch(latch, ttlMs), (fresh) => fresh ? emit(type, data) : Effect.void)),
        rearm: (latch) => logged(store.unlatch(latch)),
        redeliver: (id) =>
          Effect.gen(function*() {
            const found = yield* store.get(id)
            if (Option.isNone(found)) return yield* new NotFound({ message: "No webhook delivery with this id" })
            const again: Delivery = { ...found.value, status: "pending", attempts: 0, nextAt: yield* Clock.currentTimeMillis }
            yield* store.update(again)
            return again
          })
      })
    })
  )

/** The latch of an account's balance below the threshold. */
const balanceLatch = (accountId: string) => `balance:${accountId}`

/** How long a key's per-period latches are kept: past the longest period that starts afresh. */
const CAP_LATCH_TTL_MS = 32 * 86_400_000

/**
 * Watches the admission store and the ledger in context and emits the events their operations
 * cross: provide it over them (`Layer.provideMerge`), and what it provides replaces them.
 *
 * @category layers
 */
export const layerObserve: Layer.Layer<
  Admission.AdmissionStore | CreditLedger.CreditLedger | PendingSettlements.PendingSettlements,
  never,
  Admission.AdmissionStore | CreditLedger.CreditLedger | PendingSettlements.PendingSettlements | KeyCaps.KeyCaps | Webhooks
> = Layer.effectContext(Effect.gen(function*() {
  const admission = yield* Admission.AdmissionStore
  const ledger = yield* CreditLedger.CreditLedger
  const pending = yield* PendingSettlements.PendingSettlements
  const context = yield* Effect.context<never>()
  const caps = yield* KeyCaps.KeyCaps
  const webhooks = yield* Webhooks
  const { balanceBelow, capShare } = webhooks.options
  // Reading a key's spend after each settlement is worth it only when an endpoint takes cap events.
  const watchesCaps = webhooks.options.endpoints.some((endpoint) =>
    endpoint.events === undefined || endpoint.events.includes("key.cap_reached") || endpoint.events.includes("key.cap_share_reached")
  )

  const balanceCrossed = (accountId: string, balance: CreditLedger.Balance) =>
    balanceBelow === undefined || balance.availableUsd >= balanceBelow
      ? Effect.void
      : webhooks.once(balanceLatch(accountId), "balance.below_threshold", {
        accountId,
        availableUsd: Money.formatUsd(balance.availableUsd),
        thresholdUsd: Money.formatUsd(balanceBelow)
      })

  const capData = (accountId: string, keyId: string, spend: KeyCaps.KeySpend) => ({
    accountId,
    keyId,
    limitPeriod: spend.cap.period,
    capUsd: Money.formatUsd(spend.cap.usd),
    spentUsd: Money.formatUsd(spend.spent)
  })
  const capLatch = (kind: string, accountId: string, keyId: string, spend: KeyCaps.KeySpend, now: number) =>
    `${kind}:${accountId}:${keyId}:${KeyCaps.periodId(spend.cap.period, now)}`

  const capCrossed = (accountId: string, keyId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const spend = (yield* caps.read(accountId, [keyId], now)).get(keyId)
      if (spend === undefined) return
      if (spend.spent >= spend.cap.usd) {
        yield* webhooks.once(
          capLatch("cap", accountId, keyId, spend, now),
          "key.cap_reached",
          capData(accountId, keyId, spend),
          CAP_LATCH_TTL_MS
        )
      }
      if (capShare !== undefined && spend.spent >= spend.cap.usd * capShare) {
        yield* webhooks.once(capLatch("share", accountId, keyId, spend, now), "key.cap_share_reached", {
          ...capData(accountId, keyId, spend),
          share: capShare
        }, CAP_LATCH_TTL_MS)
      }
    }).pipe(Effect.catchCause((cause) => Effect.logError("webhook cap check failed", cause)))

  // A credit may lift the balance back over the threshold: the next fall is a new crossing.
  const credited = (accountId: string, receipt: CreditLedger.Receipt) =>
    balanceBelow !== undefined && receipt.balance.availableUsd >= balanceBelow ? webhooks.rearm(balanceLatch(accountId)) : Effect.void

  const observed = Admission.AdmissionStore.of({
    ...admission,
    admit: (input) =>
      Effect.tap(admission.admit(input), (reply) =>
        reply._tag === "CapReached" && input.spendKeyId !== undefined
          ? Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const spend = { cap: reply.cap, spent: reply.spent }
            return webhooks.once(
              capLatch("cap", input.accountId, input.spendKeyId!, spend, now),
              "key.cap_reached",
              capData(input.accountId, input.spendKeyId!, spend),
              CAP_LATCH_TTL_MS
            )
          })
          : Effect.void),
    settle: (input) =>
      Effect.tap(admission.settle(input), (settlement) =>
        Effect.andThen(
          balanceCrossed(input.capture.accountId, settlement.balance),
          input.spendKeyId === undefined || !watchesCaps
            ? Effect.void
            : capCrossed(input.capture.accountId, input.spendKeyId)
        ))
  })

  const observedLedger = CreditLedger.CreditLedger.of({
    ...ledger,
    topUp: (input) =>
      Effect.tap(ledger.topUp(input), (receipt) =>
        Effect.andThen(
          credited(input.accountId, receipt),
          webhooks.once(`topup:${input.accountId}:${input.reference}`, "topup.credited", {
            accountId: input.accountId,
            amountUsd: Money.formatUsd(input.amount),
            reference: input.reference,
            balanceUsd: Money.formatUsd(receipt.balance.usd)
          }, CreditLedger.CLOSED_HOLD_RETENTION_MS)
        )),
    grant: (input) => Effect.tap(ledger.grant(input), (receipt) => credited(input.accountId, receipt)),
    refund: (input) => Effect.tap(ledger.refund(input), (receipt) => credited(input.accountId, receipt))
  })

  // The facilitator records a transaction whose receipt came too late here (the SDK's store, a
  // Promise interface): that is the settlement pending past its timeout.
  const observedPending: PendingSettlements.PendingSettlements["Service"] = {
    get: (key) => pending.get(key),
    delete: (key) => pending.delete(key),
    set: async (key, transactionHash) => {
      await pending.set(key, transactionHash)
      await Effect.runPromiseWith(context)(webhooks.once(`pending:${key}`, "settlement.pending_timeout", {
        payment: key,
        transactionHash
      }, PendingSettlements.TTL_MS))
    }
  }

  return Context.make(Admission.AdmissionStore, observed).pipe(
    Context.add(CreditLedger.CreditLedger, observedLedger),
    Context.add(PendingSettlements.PendingSettlements, observedPending)
  )
}))

/**
 * Sends the due deliveries in the background while the layer's scope is open: each signed with its
 * endpoint's secret, a 2xx answer delivers it, anything else schedules the next attempt.
 *
 * @category layers
 */
export const layerSender: Layer.Layer<never, never, Webhooks | WebhookStore> = Layer.effectDiscard(Effect.gen(function*() {
  const webhooks = yield* Webhooks
  const store = yield* WebhookStore
  const { endpoints } = webhooks.options
  const timeoutMs = webhooks.options.timeoutMs ?? 10_000
  const retryBaseMs = webhooks.options.retryBaseMs ?? 1_000
  const maxAttempts = webhooks.options.maxAttempts ?? 12
  const signers = new Map(endpoints.map((endpoint) => [endpoint.url, new Webhook(endpoint.secret)]))

  const attempt = (delivery: Delivery) =>
    Effect.gen(function*() {
      const signer = signers.get(delivery.url)
      const sentAt = new Date(yield* Clock.currentTimeMillis)
      const failure = signer === undefined ? "the endpoint is no longer configured" : yield* Effect.promise(async () => {
        try {
          const response = await fetch(delivery.url, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              "webhook-id": delivery.id,
              "webhook-timestamp": String(Math.floor(sentAt.getTime() / 1000)),
              "webhook-signature": signer.sign(delivery.id, sentAt, delivery.payload)
            },
            body: delivery.payload,
            signal: AbortSignal.timeout(timeoutMs)
          })
          await response.body?.cancel()
          return response.ok ? undefined : `the endpoint answered ${response.status}`
        } catch (error) {
          return error instanceof Error ? error.message : String(error)
        }
      })
      const now = yield* Clock.currentTimeMillis
      const attempts = delivery.attempts + 1
      yield* store.update(
        failure === undefined
          ? { ...delivery, attempts, status: "delivered", deliveredAt: now, lastError: undefined }
          : {
            ...delivery,
            attempts,
            status: attempts >= maxAttempts ? "failed" : "pending",
            nextAt: now + Math.min(retryBaseMs * 2 ** (attempts - 1), MAX_RETRY_DELAY_MS),
            lastError: failure
          }
      )
    })

  const round = Effect.gen(function*() {
    const due = yield* store.claimDue(yield* Clock.currentTimeMillis, timeoutMs + 5_000, 50)
    yield* Effect.forEach(due, attempt, { concurrency: 8, discard: true })
  }).pipe(Effect.catchCause((cause) => Effect.logWarning("webhook deliveries not sent this round", cause)))

  if (endpoints.length === 0) return
  yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(webhooks.options.pollMs ?? 250)))
}))
