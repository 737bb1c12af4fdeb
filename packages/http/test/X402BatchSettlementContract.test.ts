/**
 * The test chain carries x402's `batch-settlement` channel contract and its ERC-3009 deposit
 * collector at their canonical addresses, and they behave as the scheme needs: a deposit signed by
 * the official client's helper lands in the channel whose id the SDK computes, a voucher it signs
 * is claimed, the claim is settled to the receiver, the rest is refunded, and a payer's timed
 * withdrawal takes only what was not claimed.
 */
import { X402 } from "@tollgate/core"
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from "@x402/evm"
import { computeChannelId, createBatchSettlementEIP3009DepositPayload, signVoucher } from "@x402/evm/batch-settlement/client"
import { type Address, encodeAbiParameters, type Hex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { batchSettlementAbi } from "./support/BatchSettlementContracts.ts"
import * as X402Chain from "./support/X402Chain.ts"

let chain: X402Chain.Chain
const receiverAuthorizer = privateKeyToAccount(generatePrivateKey())

beforeAll(async () => {
  chain = await X402Chain.start()
}, 60_000)

afterAll(async () => {
  await chain?.stop()
})

/** A payer with `units` of USDC, its channel to a fresh receiver, and the channel's id as the SDK computes it. */
const channel = async (units: bigint, withdrawDelay = 900) => {
  const payer = privateKeyToAccount(generatePrivateKey())
  await chain.mint(payer.address, units)
  const receiver = privateKeyToAccount(generatePrivateKey()).address
  const config = {
    payer: payer.address,
    payerAuthorizer: zeroAddress as Address,
    receiver,
    receiverAuthorizer: receiverAuthorizer.address,
    token: chain.usdc,
    withdrawDelay,
    salt: `0x${"00".repeat(31)}01` as Hex
  }
  return { payer, receiver, config, channelId: computeChannelId(config, X402.BASE_MAINNET) }
}

const requirements = (payTo: Address, amount: string) => ({
  scheme: "batch-settlement",
  network: X402.BASE_MAINNET as `${string}:${string}`,
  asset: chain.usdc,
  amount,
  payTo,
  maxTimeoutSeconds: 300,
  extra: { receiverAuthorizer: receiverAuthorizer.address, withdrawDelay: 900, name: "USD Coin", version: "2" }
})

/** Deposits `amount` with the authorization the official client signs, sent by the receiver's authorizer. */
const deposit = async (opened: Awaited<ReturnType<typeof channel>>, amount: bigint) => {
  const created = await createBatchSettlementEIP3009DepositPayload(
    opened.payer,
    2,
    requirements(opened.receiver, "1"),
    opened.config,
    amount.toString(),
    "0"
  )
  const authorization = (created.payload as {
    deposit: { authorization: { erc3009Authorization: { validAfter: string; validBefore: string; salt: Hex; signature: Hex } } }
  })
    .deposit.authorization.erc3009Authorization
  const collectorData = encodeAbiParameters(
    [{ type: "uint256" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes" }],
    [BigInt(authorization.validAfter), BigInt(authorization.validBefore), BigInt(authorization.salt), authorization.signature]
  )
  await send(receiverAuthorizer, "deposit", [opened.config, amount, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData])
}

const send = async (account: ReturnType<typeof privateKeyToAccount>, functionName: string, args: ReadonlyArray<unknown>) => {
  const wallet = await chain.walletOf(account)
  const hash = await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName, args } as never)
  const receipt = await chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  expect(receipt.status).toBe("success")
  return receipt
}

const channelState = async (channelId: Hex) => {
  const [balance, totalClaimed] = await chain.client.readContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: batchSettlementAbi,
    functionName: "channels",
    args: [channelId]
  })
  return { balance, totalClaimed }
}

/** The claim row of a voucher the official client signed for a cumulative `max`, claiming `total`. */
const claimRow = async (opened: Awaited<ReturnType<typeof channel>>, max: bigint, total: bigint) => {
  const voucher = await signVoucher(opened.payer, opened.channelId, max.toString(), X402.BASE_MAINNET)
  return { voucher: { channel: opened.config, maxClaimableAmount: max }, signature: voucher.signature, totalClaimed: total }
}

describe("The channel contract sits at its canonical address: the SDK's channel id, deposit and vouchers work against it", () => {
  it("the code is there and the contract computes the channel id the SDK computes", async () => {
    expect((await chain.codeAt(BATCH_SETTLEMENT_ADDRESS))?.length).toBeGreaterThan(1000)
    expect((await chain.codeAt(ERC3009_DEPOSIT_COLLECTOR_ADDRESS))?.length).toBeGreaterThan(1000)
    const opened = await channel(0n)
    expect(
      await chain.client.readContract({
        address: BATCH_SETTLEMENT_ADDRESS,
        abi: batchSettlementAbi,
        functionName: "getChannelId",
        args: [opened.config]
      })
    ).toBe(opened.channelId)
  })

  it("a deposit, a claim of the vouchers' cumulative amount, its settlement and a refund of the rest move exactly those amounts", async () => {
    const opened = await channel(5_000_000n)
    await deposit(opened, 1_000_000n)
    expect(await chain.balanceOf(opened.payer.address)).toBe(4_000_000n)
    expect(await channelState(opened.channelId)).toEqual({ balance: 1_000_000n, totalClaimed: 0n })

    // One claim for the last voucher covers every call before it: the amounts are cumulative.
    await send(receiverAuthorizer, "claim", [[await claimRow(opened, 12_500n, 12_500n)]])
    await send(receiverAuthorizer, "settle", [opened.receiver, chain.usdc])
    expect(await chain.balanceOf(opened.receiver)).toBe(12_500n)

    await send(receiverAuthorizer, "refund", [opened.config, 1_000_000n])
    expect(await chain.balanceOf(opened.payer.address)).toBe(5_000_000n - 12_500n)
    expect(await channelState(opened.channelId)).toEqual({ balance: 12_500n, totalClaimed: 12_500n })
  })

  it("a voucher claimed again, or one below what was claimed, changes nothing; a forged one is refused", async () => {
    const opened = await channel(1_000_000n)
    await deposit(opened, 1_000_000n)
    await send(receiverAuthorizer, "claim", [[await claimRow(opened, 300n, 300n)]])
    await send(receiverAuthorizer, "claim", [[await claimRow(opened, 300n, 300n)]])
    await send(receiverAuthorizer, "claim", [[await claimRow(opened, 200n, 200n)]])
    expect(await channelState(opened.channelId)).toEqual({ balance: 1_000_000n, totalClaimed: 300n })
    const forged = {
      ...await claimRow(opened, 500n, 500n),
      signature: (await signVoucher(receiverAuthorizer, opened.channelId, "500", X402.BASE_MAINNET)).signature
    }
    const wallet = await chain.walletOf(receiverAuthorizer)
    await expect(
      wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: "claim", args: [[forged]] })
    ).rejects.toThrow(/InvalidSignature|reverted/)
  })

  it("a payer's timed withdrawal takes only what is not claimed once its delay has passed", async () => {
    const opened = await channel(1_000_000n)
    await deposit(opened, 1_000_000n)
    await send(opened.payer, "initiateWithdraw", [opened.config, 1_000_000n])
    // Claimed within the delay, the served calls are the receiver's whatever the payer does next.
    await send(receiverAuthorizer, "claim", [[await claimRow(opened, 40_000n, 40_000n)]])
    await chain.client.increaseTime({ seconds: 901 })
    await chain.client.mine({ blocks: 1 })
    await send(opened.payer, "finalizeWithdraw", [opened.config])
    expect(await chain.balanceOf(opened.payer.address)).toBe(960_000n)
    await send(receiverAuthorizer, "settle", [opened.receiver, chain.usdc])
    expect(await chain.balanceOf(opened.receiver)).toBe(40_000n)
  })
})
