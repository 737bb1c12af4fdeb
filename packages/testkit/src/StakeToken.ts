/**
 * A staking token on a test chain: `fixtures/TestStakeToken.sol` (a minimal 18-decimal ERC-20
 * with open minting), compiled with npm `solc` and deployed on an anvil, for tests of staked-token
 * credits read from chain.
 *
 * @since 0.1.0
 */
import * as Fs from "node:fs"
import solc from "solc"
import { type Address, createPublicClient, createWalletClient, defineChain, type Hex, http } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { devPrivateKey } from "./Anvil.ts"

/** @category models */
export interface StakeToken {
  readonly address: Address
  /** Mints whole tokens (18 decimals) to `to`. */
  readonly mint: (to: Address, tokens: bigint) => Promise<void>
}

const abi = [
  {
    type: "function",
    name: "mint",
    stateMutability: "nonpayable",
    inputs: [{ name: "to", type: "address" }, { name: "value", type: "uint256" }],
    outputs: []
  }
] as const

const compile = (): Hex => {
  const source = Fs.readFileSync(new URL("./fixtures/TestStakeToken.sol", import.meta.url), "utf8")
  const output = JSON.parse(solc.compile(JSON.stringify({
    language: "Solidity",
    sources: { "TestStakeToken.sol": { content: source } },
    settings: { outputSelection: { "*": { "*": ["evm.bytecode.object"] } } }
  }))) as { contracts: Record<string, Record<string, { evm: { bytecode: { object: string } } }>> }
  return `0x${output.contracts["TestStakeToken.sol"]!["TestStakeToken"]!.evm.bytecode.object}`
}

/**
 * Deploys the token on the anvil at `rpcUrl` (chain `chainId`) from anvil's first dev account.
 *
 * @category constructors
 */
export const deploy = async (rpcUrl: string, chainId: number): Promise<StakeToken> => {
  const chain = defineChain({
    id: chainId,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } }
  })
  const account = privateKeyToAccount(devPrivateKey)
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account, pollingInterval: 50 })
  const client = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 50 })
  const hash = await wallet.deployContract({ abi, bytecode: compile() })
  const address = (await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })).contractAddress!
  return {
    address,
    mint: async (to, tokens) => {
      const minted = await wallet.writeContract({ address, abi, functionName: "mint", args: [to, tokens * 10n ** 18n] })
      await client.waitForTransactionReceipt({ hash: minted, pollingInterval: 50 })
    }
  }
}
