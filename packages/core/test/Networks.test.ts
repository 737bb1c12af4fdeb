import { describe, expect, it } from "@effect/vitest"
import * as Networks from "../src/Networks.ts"

describe("The network list is the spec's 25 slugs, sorted, with family and base credits", () => {
  it("lists exactly the spec's slugs in alphabetical order", () => {
    expect(Networks.slugs).toEqual([
      "arbitrum-mainnet",
      "arbitrum-sepolia",
      "avalanche-fuji",
      "avalanche-mainnet",
      "base-mainnet",
      "base-sepolia",
      "bsc-mainnet",
      "bsc-testnet",
      "ethereum-holesky",
      "ethereum-mainnet",
      "ethereum-sepolia",
      "linea-mainnet",
      "linea-sepolia",
      "optimism-mainnet",
      "optimism-sepolia",
      "polygon-amoy",
      "polygon-mainnet",
      "robinhood-mainnet",
      "robinhood-testnet",
      "solana-devnet",
      "solana-mainnet",
      "starknet-mainnet",
      "starknet-sepolia",
      "zksync-mainnet",
      "zksync-sepolia"
    ])
  })

  it("zkSync Era and Solana cost 30 base credits, every other chain 20", () => {
    for (const network of Networks.networks) {
      expect(network.baseCredits).toBe(network.family === "zksync" || network.family === "solana" ? 30 : 20)
    }
  })

  it("an unknown slug is not a network", () => {
    expect(Networks.findNetwork("base-mainnet")?.chainId).toBe(8453)
    expect(Networks.findNetwork("bitcoin-mainnet")).toBeUndefined()
  })
})
