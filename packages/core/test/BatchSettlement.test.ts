import { BatchSettlement, Money, X402 } from "@tollgate/core"
import { voucherTypes } from "@x402/evm"
import { BatchSettlementEvmScheme, computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client"
import { Result } from "effect"
import { hashTypedData, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"

const relayer = privateKeyToAccount(generatePrivateKey())
const offer: BatchSettlement.Offer = {
  receiverAuthorizer: relayer.address,
  withdrawDelaySeconds: 86_400,
  minimumWithdrawDelaySeconds: 3_600,
  exposureCap: 1_000_000n,
  minDeposit: 100_000n
}
const config = X402.makeConfig({
  publicOrigin: "https://api.example.com",
  payTo: { evm: privateKeyToAccount(generatePrivateKey()).address },
  evm: { batchSettlement: offer }
})
/** An RPC call's price: 20 credits, 12.5 USDC base units. */
const RPC_PRICE = Money.unsafeNano(12_500)
const [entry] = X402.endpointRequirements(config, RPC_PRICE)

/** The channel the official client opens for `payer` against the entry, and a voucher signed on it. */
const voucherPayload = async (payer = privateKeyToAccount(generatePrivateKey()), max = "13") => {
  const channelConfig = {
    payer: payer.address,
    payerAuthorizer: payer.address,
    receiver: entry!.payTo as `0x${string}`,
    receiverAuthorizer: relayer.address,
    token: entry!.asset as `0x${string}`,
    withdrawDelay: 86_400,
    salt: `0x${"00".repeat(32)}` as `0x${string}`
  }
  const channelId = computeChannelId(channelConfig, X402.BASE_MAINNET)
  return { type: "voucher", channelConfig, voucher: await signVoucher(payer, channelId, max, X402.BASE_MAINNET) }
}

const refusal = async (payload: unknown, minimum = offer.minimumWithdrawDelaySeconds) => {
  const result = BatchSettlement.check(entry!, minimum, payload)
  return Result.isFailure(result) ? result.failure.reason : "accepted"
}

describe("batch-settlement is offered below the per-call floor, before the top-up, on the offer's terms", () => {
  it("an RPC call's 402 offers a voucher of 13 base units (12.5 rounded up), then the top-up", () => {
    expect(X402.endpointRequirements(config, RPC_PRICE).map((each) => [each.scheme, each.amount])).toEqual([
      ["batch-settlement", "13"],
      ["exact", "5000000"]
    ])
    expect(entry!.extra).toEqual({
      receiverAuthorizer: relayer.address,
      withdrawDelay: 86_400,
      name: "USD Coin",
      version: "2",
      minDeposit: "100000"
    })
  })

  it("a call at or above the floor is paid on its own (then the top-up), with no voucher entry", () => {
    expect(X402.endpointRequirements(config, X402.DEFAULT_MINIMUM_PER_CALL).map((each) => each.scheme)).toEqual(["exact", "exact"])
  })

  it("without an offer (nothing settles Base here), a call below the floor offers only the top-up", () => {
    const plain = X402.makeConfig({ publicOrigin: "https://api.example.com", payTo: { evm: relayer.address } })
    expect(X402.endpointRequirements(plain, RPC_PRICE).map((each) => each.scheme)).toEqual(["exact"])
  })
})

describe("A voucher is checked offline: the offered channel, its id, and the voucher signer's signature", () => {
  it("a voucher the official client signs passes, naming the channel, the payer and the cumulative amount", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const payload = await voucherPayload(payer, "13")
    const checked = Result.getOrThrow(BatchSettlement.check(entry!, offer.minimumWithdrawDelaySeconds, payload))
    expect(checked).toMatchObject({ type: "voucher", channelId: payload.voucher.channelId, payer: payer.address, maxClaimable: 13n })
  })

  it("the official client's first payment on a new channel is a deposit with its voucher, and passes", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const created = await new BatchSettlementEvmScheme(payer).createPaymentPayload(2, entry as never)
    const checked = Result.getOrThrow(BatchSettlement.check(entry!, offer.minimumWithdrawDelaySeconds, created.payload))
    expect(checked).toMatchObject({ type: "deposit", deposit: 100_000n, maxClaimable: 13n, payer: payer.address })
  })

  it("a voucher signed by another key, or for another amount than signed, is refused as a bad signature", async () => {
    const payload = await voucherPayload()
    const forged = await signVoucher(privateKeyToAccount(generatePrivateKey()), payload.voucher.channelId, "13", X402.BASE_MAINNET)
    expect(await refusal({ ...payload, voucher: forged })).toBe("invalid_batch_settlement_evm_voucher_signature")
    expect(await refusal({ ...payload, voucher: { ...payload.voucher, maxClaimableAmount: "14" } })).toBe(
      "invalid_batch_settlement_evm_voucher_signature"
    )
  })

  it("a channel other than the one offered is refused with the scheme's reason", async () => {
    const payload = await voucherPayload()
    const other = privateKeyToAccount(generatePrivateKey()).address
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, token: other } })).toBe(
      "invalid_batch_settlement_evm_token_mismatch"
    )
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, receiver: other } })).toBe(
      "invalid_batch_settlement_evm_receiver_mismatch"
    )
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, receiverAuthorizer: other } }))
      .toBe("invalid_batch_settlement_evm_receiver_authorizer_mismatch")
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, withdrawDelay: 7_200 } }))
      .toBe("invalid_batch_settlement_evm_withdraw_delay_mismatch")
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, salt: `0x${"11".repeat(32)}` } }))
      .toBe("invalid_batch_settlement_evm_channel_id_mismatch")
    expect(await refusal({ type: "voucher", voucher: payload.voucher })).toBe("invalid_batch_settlement_evm_voucher_payload")
  })

  it("a channel whose withdrawal delay is under the configured minimum is refused: its escrow could leave before the claim", async () => {
    const payload = await voucherPayload()
    expect(await refusal({ ...payload, channelConfig: { ...payload.channelConfig, withdrawDelay: 900 } })).toBe(
      BatchSettlement.WITHDRAW_DELAY_TOO_SHORT
    )
    expect(await refusal(payload, 100_000)).toBe(BatchSettlement.WITHDRAW_DELAY_TOO_SHORT)
  })

  it("the same signature in its high-s form is refused: the contract's ECDSA would refuse its claim", async () => {
    const payload = await voucherPayload()
    const signature = payload.voucher.signature
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
    const s = BigInt(`0x${signature.slice(66, 130)}`)
    const v = Number.parseInt(signature.slice(130), 16)
    const flipped = `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}`
    expect(await refusal({ ...payload, voucher: { ...payload.voucher, signature: flipped } })).toBe(
      "invalid_batch_settlement_evm_voucher_signature"
    )
  })

  it("the same signature with v written 0 or 1 is refused: the contract's ecrecover takes only 27 or 28", async () => {
    const payload = await voucherPayload()
    const signature = payload.voucher.signature
    const v = Number.parseInt(signature.slice(130), 16)
    const zeroBased = `${signature.slice(0, 130)}0${v - 27}`
    expect(await refusal({ ...payload, voucher: { ...payload.voucher, signature: zeroBased } })).toBe(
      "invalid_batch_settlement_evm_voucher_signature"
    )
    expect(await refusal({ ...payload, voucher: { ...payload.voucher, signature: signature.slice(0, 130) } }))
      .toBe("invalid_batch_settlement_evm_voucher_signature")
  })

  it("the voucher digest is the EIP-712 hash the official client signs", async () => {
    const payload = await voucherPayload()
    expect(BatchSettlement.voucherDigest(8453, payload.voucher.channelId, 13n)).toBe(hashTypedData({
      domain: BatchSettlement.domain(8453),
      types: voucherTypes,
      primaryType: "Voucher",
      message: { channelId: payload.voucher.channelId, maxClaimableAmount: 13n }
    }))
  })

  it("with no voucher key named, the payer's own key must sign", async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const channelConfig = { ...(await voucherPayload(payer)).channelConfig, payerAuthorizer: zeroAddress }
    const channelId = computeChannelId(channelConfig, X402.BASE_MAINNET)
    const voucher = await signVoucher(payer, channelId, "13", X402.BASE_MAINNET)
    expect(await refusal({ type: "voucher", channelConfig, voucher })).toBe("accepted")
  })
})
