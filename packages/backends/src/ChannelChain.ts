/**
 * The chain side of x402 `batch-settlement` payment channels, sent from the relayer key, which is
 * also the receiver authorizer the channels name: a payer's deposit (verified and submitted by the
 * official `@x402/evm` batch-settlement facilitator scheme, through x402's ERC-3009 deposit
 * collector), reads of a channel's escrow and of a pending withdrawal, the withdrawals payers
 * started (the contract's `WithdrawInitiated` events, one log query for every channel), and the
 * receiver's side of the contract, called directly: `claim` of many channels' latest vouchers in
 * one transaction, `settle` of what was claimed to `payTo` in one transfer, and the cooperative
 * `refund` of a channel's unclaimed escrow.
 *
 * **Details**
 *
 * The relayer sends one transaction at a time here, and takes its nonces from viem's shared nonce
 * manager, as the EVM facilitator of `PaymentFacilitator` does for the same key.
 *
 * @since 0.1.0
 */
import { Errors, type PaymentChannels, X402 } from "@tollgate/core"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Context, Duration, Effect, Layer, Redacted, Semaphore } from "effect"
import { createWalletClient, defineChain, type Hex, http, parseAbi, publicActions } from "viem"
import { nonceManager, privateKeyToAccount } from "viem/accounts"

/**
 * The functions of x402's channel contract called here, and the event a payer's withdrawal
 * emits, as its source declares them.
 *
 * @category constants
 */
export const abi = parseAbi([
  "struct ChannelConfig { address payer; address payerAuthorizer; address receiver; address receiverAuthorizer; address token; uint40 withdrawDelay; bytes32 salt; }",
  "struct Voucher { ChannelConfig channel; uint128 maxClaimableAmount; }",
  "struct VoucherClaim { Voucher voucher; bytes signature; uint128 totalClaimed; }",
  "function deposit(ChannelConfig config, uint128 amount, address collector, bytes collectorData)",
  "function claim(VoucherClaim[] voucherClaims)",
  "function settle(address receiver, address token)",
  "function refund(ChannelConfig config, uint128 amount)",
  "function initiateWithdraw(ChannelConfig config, uint128 amount)",
  "function finalizeWithdraw(ChannelConfig config)",
  "function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)",
  "function pendingWithdrawals(bytes32 channelId) view returns (uint128 amount, uint40 initiatedAt)",
  "function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)",
  "function getChannelId(ChannelConfig config) view returns (bytes32)",
  "event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter)"
])

/**
 * The most blocks one scan for withdrawals covers: RPC providers bound `eth_getLogs` by its block
 * range, the strictest at 500. Rounds run every second and Base makes a block every two, so a scan
 * covers one block or two; a longer gap (no instance scanned for 15 minutes) is not scanned but
 * swept (see `Withdrawals`).
 *
 * @category constants
 */
export const WITHDRAWAL_SCAN_BLOCKS = 500n

/**
 * The blocks below the last one scanned that a scan covers again: a withdrawal whose block was
 * replaced by a reorganisation after it was scanned is seen in its new block. Base's
 * reorganisations are shallower.
 *
 * @category constants
 */
export const WITHDRAWAL_RESCAN_BLOCKS = 5n

/**
 * The withdrawals a payer started in the blocks scanned, on any channel of the contract (the
 * caller keeps its own), up to `head`, the block the next scan starts after. `gap` when the blocks
 * since the last scan were too many to scan: the caller then reads its channels instead.
 *
 * @category models
 */
export interface Withdrawals {
  readonly head: bigint
  readonly channelIds: ReadonlyArray<string>
  readonly gap: boolean
}

/**
 * One row of a claim: a channel, its latest voucher, and the cumulative amount claimed by it.
 *
 * @category models
 */
export interface ClaimRow {
  readonly config: PaymentChannels.ChannelConfig
  readonly signedMax: bigint
  readonly signature: string
  readonly totalClaimed: bigint
}

/** @category models */
export interface Deposited {
  readonly payer: string
  readonly transaction: string
  readonly onChain: PaymentChannels.OnChain
}

/** @category services */
export class ChannelChain extends Context.Service<ChannelChain, {
  /** The relayer's address: the `receiverAuthorizer` of the channels offered. */
  readonly receiverAuthorizer: string
  /** Verifies and submits a `deposit` payload; succeeds once the escrow holds it. */
  readonly deposit: (payment: X402.MatchedPayment) => Effect.Effect<Deposited, X402.PaymentRejected | Errors.ServiceUnavailable>
  readonly read: (channelId: string) => Effect.Effect<PaymentChannels.OnChain, Errors.ServiceUnavailable>
  /**
   * The withdrawals started after block `after` (`WithdrawInitiated`, every channel in one log
   * query); with no block yet, none, and the head to start from.
   */
  readonly withdrawalsAfter: (after: bigint | undefined) => Effect.Effect<Withdrawals, Errors.ServiceUnavailable>
  /** Claims the rows in one transaction, and answers its hash. */
  readonly claim: (rows: ReadonlyArray<ClaimRow>) => Effect.Effect<string, Errors.ServiceUnavailable>
  /** Transfers what is claimed for `receiver` of `token`; the hash and the amount, "" and 0 when nothing is due. */
  readonly settle: (
    receiver: string,
    token: string
  ) => Effect.Effect<{ readonly transaction: string; readonly amount: bigint }, Errors.ServiceUnavailable>
  /** Returns `amount` of a channel's unclaimed escrow to its payer. */
  readonly refund: (config: PaymentChannels.ChannelConfig, amount: bigint) => Effect.Effect<string, Errors.ServiceUnavailable>
}>()("@tollgate/backends/ChannelChain") {}

/** @category models */
export interface Options {
  readonly network: string
  readonly rpcUrl: string
  readonly relayerKey: Redacted.Redacted<Hex>
  readonly pollingIntervalMs?: number
  readonly receiptTimeout?: Duration.Input
}

const contractConfig = (config: PaymentChannels.ChannelConfig) => ({
  payer: config.payer as Hex,
  payerAuthorizer: config.payerAuthorizer as Hex,
  receiver: config.receiver as Hex,
  receiverAuthorizer: config.receiverAuthorizer as Hex,
  token: config.token as Hex,
  withdrawDelay: config.withdrawDelay,
  salt: config.salt as Hex
})

/**
 * The chain side over one EVM network's RPC URL.
 *
 * @category constructors
 */
export const make = Effect.fn("ChannelChain.make")(function*(options: Options) {
  const [{ toFacilitatorEvmSigner }, { BatchSettlementEvmScheme }] = yield* Effect.promise(() =>
    Promise.all([import("@x402/evm"), import("@x402/evm/batch-settlement/facilitator")])
  )
  const account = privateKeyToAccount(Redacted.value(options.relayerKey), { nonceManager })
  const chain = defineChain({
    id: Number(options.network.slice("eip155:".length)),
    name: options.network,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } }
  })
  const pollingInterval = options.pollingIntervalMs ?? 1_000
  const timeout = Duration.toMillis(Duration.fromInputUnsafe(options.receiptTimeout ?? "2 minutes"))
  const client = createWalletClient({ chain, transport: http(options.rpcUrl), account, pollingInterval }).extend(publicActions)
  const submissions = yield* Semaphore.make(1)
  const oneAtATime = <A>(send: () => Promise<A>) =>
    Effect.runPromise(submissions.withPermits(1)(Effect.tryPromise({ try: send, catch: (error) => error })))
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    getCode: (args) => client.getCode(args),
    readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]),
    verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
    writeContract: (args) => oneAtATime(() => client.writeContract(args as Parameters<typeof client.writeContract>[0])),
    sendTransaction: (args) => oneAtATime(() => client.sendTransaction(args)),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args)
  }, { confirmationTimeoutMs: timeout })
  const scheme = new BatchSettlementEvmScheme(signer)
  const unreachable = (what: string) => () => Errors.storeUnavailable(`The chain (${what})`)

  /** Sends a call of the channel contract and waits for its receipt; a revert is a 503 too. */
  const send = (what: string, functionName: "claim" | "settle" | "refund", args: ReadonlyArray<unknown>) =>
    Effect.tryPromise({
      try: async () => {
        const hash = await oneAtATime(() =>
          client.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi, functionName, args } as Parameters<typeof client.writeContract>[0])
        )
        const receipt = await client.waitForTransactionReceipt({ hash, timeout })
        if (receipt.status !== "success") throw new Error(`${what} reverted (${hash})`)
        return hash
      },
      catch: unreachable(what)
    })

  const read = (channelId: string) =>
    Effect.tryPromise({
      try: async () => {
        const [[balance, totalClaimed], [, initiatedAt]] = await Promise.all([
          client.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi, functionName: "channels", args: [channelId as Hex] }),
          client.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi, functionName: "pendingWithdrawals", args: [channelId as Hex] })
        ])
        return { balance, totalClaimed, withdrawRequestedAt: initiatedAt }
      },
      catch: unreachable("channel read")
    })

  const withdrawalsAfter = (after: bigint | undefined) =>
    Effect.tryPromise({
      try: async (): Promise<Withdrawals> => {
        const head = await client.getBlockNumber({ cacheTime: 0 })
        if (after === undefined || head - after > WITHDRAWAL_SCAN_BLOCKS) return { head, channelIds: [], gap: after !== undefined }
        if (head <= after) return { head: after, channelIds: [], gap: false }
        const rescanned = after - WITHDRAWAL_RESCAN_BLOCKS
        const logs = await client.getContractEvents({
          address: BATCH_SETTLEMENT_ADDRESS,
          abi,
          eventName: "WithdrawInitiated",
          fromBlock: (rescanned < 0n ? 0n : rescanned) + 1n,
          toBlock: head
        })
        return { head, channelIds: logs.flatMap((log) => (log.args.channelId === undefined ? [] : [log.args.channelId])), gap: false }
      },
      catch: unreachable("withdrawal events")
    })

  return ChannelChain.of({
    receiverAuthorizer: account.address,
    withdrawalsAfter,
    deposit: (payment) =>
      Effect.gen(function*() {
        const [payload, requirements] = [payment.payload, payment.requirements] as unknown as Parameters<typeof scheme.settle>
        const answer = yield* Effect.tryPromise({ try: () => scheme.settle(payload, requirements), catch: unreachable("deposit") })
        if (!answer.success) {
          return yield* new X402.PaymentRejected({
            reason: answer.errorReason ?? "invalid_batch_settlement_evm_deposit_transaction_failed",
            message: answer.errorMessage ?? "The deposit was refused"
          })
        }
        const state =
          (answer.extra as { channelState?: { balance: string; totalClaimed: string; withdrawRequestedAt: number } } | undefined)
            ?.channelState
        return {
          payer: answer.payer ?? "",
          transaction: answer.transaction,
          onChain: {
            balance: BigInt(state?.balance ?? "0"),
            totalClaimed: BigInt(state?.totalClaimed ?? "0"),
            withdrawRequestedAt: state?.withdrawRequestedAt ?? 0
          }
        }
      }),
    read,
    claim: (rows) =>
      send("claim", "claim", [rows.map((row) => ({
        voucher: { channel: contractConfig(row.config), maxClaimableAmount: row.signedMax },
        signature: row.signature as Hex,
        totalClaimed: row.totalClaimed
      }))]),
    settle: (receiver, token) =>
      Effect.gen(function*() {
        const [claimed, settled] = yield* Effect.tryPromise({
          try: () =>
            client.readContract({
              address: BATCH_SETTLEMENT_ADDRESS,
              abi,
              functionName: "receivers",
              args: [receiver as Hex, token as Hex]
            }),
          catch: unreachable("settle")
        })
        if (claimed === settled) return { transaction: "", amount: 0n }
        return { transaction: yield* send("settle", "settle", [receiver, token]), amount: claimed - settled }
      }),
    refund: (config, amount) => send("refund", "refund", [contractConfig(config), amount])
  })
})

/**
 * The layer of `make`.
 *
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<ChannelChain> => Layer.effect(ChannelChain, make(options))
