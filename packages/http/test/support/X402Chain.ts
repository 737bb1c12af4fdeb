/**
 * A Base-like test chain for x402: anvil with chain id 8453, an EIP-3009 USDC (compiled from
 * `fixtures/TestUsdc.sol` with npm solc) placed at the canonical Base USDC address, so the official
 * x402 client treats it as the real USDC, and Multicall3's `tryAggregate` at Multicall3's canonical
 * address, as on Base (the official facilitator simulates EIP-6492 deployments and diagnoses
 * refused transfers through it). Permit2 and x402's upto proxy sit at the addresses `@x402/evm`
 * expects (`Permit2Contracts`), for the `upto` scheme, and x402's channel contract with its ERC-3009
 * deposit collector at theirs (`BatchSettlementContracts`), for `batch-settlement`. Also signs EIP-3009 authorizations by hand,
 * for the payments the official client would never produce (forged, expired, misdirected).
 */
import { PaymentFacilitator } from "@tollgate/backends"
import { X402 } from "@tollgate/core"
import { Anvil } from "@tollgate/testkit"
import { authorizationTypes, x402UptoPermit2ProxyAddress } from "@x402/evm"
import { Redacted } from "effect"
import * as Fs from "node:fs"
import solc from "solc"
import {
  type Address,
  concatHex,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  getContractAddress,
  type Hex,
  http,
  publicActions,
  toHex
} from "viem"
import { type LocalAccount, privateKeyToAccount } from "viem/accounts"
import {
  BATCH_SETTLEMENT_ADDRESS,
  batchSettlementRuntime,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  erc3009DepositCollectorRuntime
} from "./BatchSettlementContracts.ts"
import { PERMIT2_ADDRESS, permit2Runtime, uptoProxyRuntime } from "./Permit2Contracts.ts"

const compile = (): {
  readonly usdc: { abi: Array<unknown>; runtime: Hex }
  readonly multicall: { runtime: Hex }
  readonly wallet: { abi: Array<unknown>; bytecode: Hex }
  readonly factory: { abi: Array<unknown>; bytecode: Hex }
} => {
  const source = Fs.readFileSync(new URL("../fixtures/TestUsdc.sol", import.meta.url), "utf8")
  const output = JSON.parse(solc.compile(JSON.stringify({
    language: "Solidity",
    sources: { "TestUsdc.sol": { content: source } },
    settings: { outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } } }
  }))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>
    contracts: Record<
      string,
      Record<string, { abi: Array<unknown>; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>
    >
  }
  const errors = (output.errors ?? []).filter((error) => error.severity === "error")
  if (errors.length > 0) throw new Error(errors.map((error) => error.formattedMessage).join("\n"))
  const contracts = output.contracts["TestUsdc.sol"]!
  return {
    usdc: { abi: contracts["TestUsdc"]!.abi, runtime: `0x${contracts["TestUsdc"]!.evm.deployedBytecode.object}` },
    multicall: { runtime: `0x${contracts["TestMulticall"]!.evm.deployedBytecode.object}` },
    wallet: { abi: contracts["TestWallet"]!.abi, bytecode: `0x${contracts["TestWallet"]!.evm.bytecode.object}` },
    factory: { abi: contracts["TestWalletFactory"]!.abi, bytecode: `0x${contracts["TestWalletFactory"]!.evm.bytecode.object}` }
  }
}

export const usdcAbi = [
  {
    type: "function",
    name: "mint",
    stateMutability: "nonpayable",
    inputs: [{ name: "to", type: "address" }, { name: "value", type: "uint256" }],
    outputs: []
  },
  {
    type: "function",
    name: "setBlocked",
    stateMutability: "nonpayable",
    inputs: [{ name: "account", type: "address" }, { name: "value", type: "bool" }],
    outputs: []
  },
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ type: "uint256" }]
  }
] as const

/** Where Multicall3 lives on Base and most chains. */
const MULTICALL3 = "0xcA11bde05977b3631167028862bE2a173976CA11"

export type Chain = Awaited<ReturnType<typeof start>>

export const start = async () => {
  const compiled = compile()
  const anvil = await Anvil.start({ chainId: 8453 })
  const chain = defineChain({
    id: 8453,
    name: "base-test",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } }
  })
  const client = createTestClient({ chain, mode: "anvil", transport: http(anvil.url), pollingInterval: 50 }).extend(publicActions)
  const admin = createWalletClient({
    chain,
    transport: http(anvil.url),
    account: privateKeyToAccount(Anvil.devPrivateKey),
    pollingInterval: 50
  })
  const usdc = X402.BASE_USDC as Address
  await client.setCode({ address: usdc, bytecode: compiled.usdc.runtime })
  await client.setCode({ address: MULTICALL3, bytecode: compiled.multicall.runtime })
  await client.setCode({ address: PERMIT2_ADDRESS, bytecode: permit2Runtime })
  await client.setCode({ address: x402UptoPermit2ProxyAddress, bytecode: uptoProxyRuntime })
  await client.setCode({ address: BATCH_SETTLEMENT_ADDRESS, bytecode: batchSettlementRuntime })
  await client.setCode({ address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, bytecode: erc3009DepositCollectorRuntime })
  const send = async (functionName: "mint" | "setBlocked", args: readonly [Address, bigint] | readonly [Address, boolean]) => {
    const hash = await admin.writeContract({ address: usdc, abi: usdcAbi, functionName, args } as never)
    await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  }
  return {
    anvil,
    client,
    usdc,
    mint: (to: Address, units: bigint) => send("mint", [to, units]),
    setBlocked: (account: Address, blocked: boolean) => send("setBlocked", [account, blocked]),
    balanceOf: (account: Address) => client.readContract({ address: usdc, abi: usdcAbi, functionName: "balanceOf", args: [account] }),
    /**
     * `account` approves Permit2 for `units` of its USDC (given ETH for the gas), as a wallet does
     * once before its first `upto` payment; 0 revokes.
     */
    approvePermit2: async (account: LocalAccount, units: bigint) => {
      await client.setBalance({ address: account.address, value: 10n ** 18n })
      const wallet = createWalletClient({ chain, transport: http(anvil.url), account, pollingInterval: 50 })
      const hash = await wallet.writeContract({ address: usdc, abi: erc20Abi, functionName: "approve", args: [PERMIT2_ADDRESS, units] })
      await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
    },
    deployWallet: async (owner: Address): Promise<Address> => {
      const hash = await admin.deployContract({ abi: compiled.wallet.abi, bytecode: compiled.wallet.bytecode, args: [owner] })
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
      return receipt.contractAddress!
    },
    /** Deploys a TestWalletFactory; its wallets can be used before they exist (EIP-6492). */
    deployFactory: async () => {
      const hash = await admin.deployContract({ abi: compiled.factory.abi, bytecode: compiled.factory.bytecode })
      const factory = (await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })).contractAddress!
      return {
        address: factory,
        /** The address `owner`'s wallet of `salt` will have, and the factory call that deploys it. */
        counterfactual: (owner: Address, salt: Hex) => ({
          address: getContractAddress({
            from: factory,
            opcode: "CREATE2",
            salt,
            bytecode: concatHex([compiled.wallet.bytecode, encodeAbiParameters([{ type: "address" }], [owner])])
          }),
          deployCall: encodeFunctionData({ abi: compiled.factory.abi, functionName: "deploy", args: [owner, salt] })
        })
      }
    },
    codeAt: (address: Address) => client.getCode({ address }),
    /** A wallet client of `account`, given ETH for its gas. */
    walletOf: async (account: LocalAccount) => {
      await client.setBalance({ address: account.address, value: 10n ** 18n })
      return createWalletClient({ chain, transport: http(anvil.url), account, pollingInterval: 50 })
    },
    stop: () => anvil.stop()
  }
}

/** An EIP-3009 authorization signed by `signer`, as the exact EVM payload carries it. */
export const authorize = async (signer: LocalAccount, input: {
  readonly from?: Address
  readonly to: Address
  readonly value: bigint
  readonly validAfter?: bigint
  readonly validBefore?: bigint
  readonly nonce?: Hex
  readonly verifyingContract?: Address
}) => {
  const authorization = {
    from: input.from ?? signer.address,
    to: input.to,
    value: input.value,
    validAfter: input.validAfter ?? 0n,
    validBefore: input.validBefore ?? BigInt(Math.floor(Date.now() / 1000) + 600),
    nonce: input.nonce ?? toHex(crypto.getRandomValues(new Uint8Array(32)))
  }
  const signature = await signer.signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: input.verifyingContract ?? (X402.BASE_USDC as Address) },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: authorization
  })
  return {
    signature,
    authorization: {
      from: authorization.from,
      to: authorization.to,
      value: authorization.value.toString(),
      validAfter: authorization.validAfter.toString(),
      validBefore: authorization.validBefore.toString(),
      nonce: authorization.nonce
    }
  }
}

/** The `PAYMENT-SIGNATURE` value of a v2 payment. */
export const paymentHeader = (accepted: X402.PaymentRequirements, payload: unknown) =>
  X402.encodeHeader({ x402Version: 2, accepted, payload })

/**
 * The local EVM facilitator settling on this chain with anvil's first dev account as relayer,
 * plus an HTTP facilitator when a URL is given.
 */
export const facilitator = (chain: Chain, httpUrl?: string, eip6492AllowedFactories: ReadonlyArray<Address> = []) =>
  PaymentFacilitator.layer({
    local: {
      chains: { [X402.BASE_MAINNET]: { rpcUrl: chain.anvil.url } },
      relayerKey: Redacted.make(Anvil.devPrivateKey),
      pollingIntervalMs: 50,
      eip6492AllowedFactories
    },
    ...(httpUrl === undefined ? {} : { http: { url: httpUrl } })
  })
