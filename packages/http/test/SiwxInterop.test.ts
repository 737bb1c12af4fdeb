import * as ContractWallets from "@tollgate/backends/ContractWallets"
import * as Auth from "@tollgate/core/Auth"
import * as AuthStore from "@tollgate/core/AuthStore"
import * as Jwt from "@tollgate/core/Jwt"
import * as Principal from "@tollgate/core/Principal"
import { Anvil } from "@tollgate/testkit"
import { createSIWxPayload, encodeBase58, encodeSIWxHeader, SOLANA_MAINNET } from "@x402/extensions/sign-in-with-x"
import { Context, Effect, Layer, Option, Result } from "effect"
import * as Crypto from "node:crypto"
import { createRequire } from "node:module"
import {
  concatHex,
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  type Hex,
  http,
  serializeErc6492Signature
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const origin = "http://localhost:8787"
const signingKey = await Effect.runPromise(Jwt.generateSigningKey)

const makeAuth = (options: Partial<Auth.Options> = {}) =>
  Effect.runPromise(Effect.scoped(Effect.map(
    Layer.build(Auth.layer({ signingKey, publicOrigin: origin, ...options }).pipe(Layer.provide(AuthStore.layerMemory))),
    (context) => Context.get(context, Auth.Auth)
  )))

const signIn = (auth: Auth.Auth["Service"], header: string) =>
  Effect.runPromise(Effect.result(auth.authenticate({ "sign-in-with-x": header })))

const principalOf = (result: Result.Result<Option.Option<Principal.Principal>, { readonly _tag: string }>) =>
  Result.isSuccess(result) ? Option.getOrUndefined(result.success) : result.failure._tag

describe("Interop: headers built by the official @x402/extensions client are accepted", () => {
  it("EVM: createSIWxPayload with a viem local account, from our own 402 challenge", async () => {
    const auth = await makeAuth()
    const challenge = await Effect.runPromise(auth.siwxChallenge)
    const account = privateKeyToAccount(generatePrivateKey())
    const payload = await createSIWxPayload(
      { ...challenge.info, chainId: "eip155:8453", type: "eip191" },
      account,
      `${origin}/api/v1/chat/completions`
    )
    expect(principalOf(await signIn(auth, encodeSIWxHeader(payload)))).toEqual(
      new Principal.WalletPrincipal({
        accountId: Principal.walletAccountId("evm", account.address),
        address: account.address,
        family: "evm",
        chainId: "eip155:8453"
      })
    )
  })

  it("Solana: createSIWxPayload with an ed25519 wallet-adapter signer", async () => {
    const auth = await makeAuth()
    const challenge = await Effect.runPromise(auth.siwxChallenge)
    const { privateKey, publicKey } = Crypto.generateKeyPairSync("ed25519")
    const raw = Buffer.from(publicKey.export({ format: "jwk" }).x ?? "", "base64url")
    const address = encodeBase58(raw)
    const signer = {
      publicKey: address,
      signMessage: (message: Uint8Array) => Promise.resolve(Uint8Array.from(Crypto.sign(null, message, privateKey)))
    }
    const payload = await createSIWxPayload({ ...challenge.info, chainId: SOLANA_MAINNET, type: "ed25519" }, signer, `${origin}/`)
    expect(principalOf(await signIn(auth, encodeSIWxHeader(payload)))).toMatchObject({
      accountId: Principal.walletAccountId("solana", address),
      family: "solana",
      chainId: SOLANA_MAINNET
    })
  })

  it("EVM: the spec's shape with a message from viem's createSiweMessage", async () => {
    const auth = await makeAuth()
    const account = privateKeyToAccount(generatePrivateKey())
    const message = createSiweMessage({
      domain: "localhost:8787",
      address: account.address,
      uri: `${origin}/`,
      version: "1",
      chainId: 8453,
      nonce: Buffer.from(Crypto.randomBytes(8)).toString("hex"),
      issuedAt: new Date(),
      expirationTime: new Date(Date.now() + 600_000),
      statement: "Sign in to use your prepaid credits."
    })
    const header = Buffer.from(JSON.stringify({
      address: account.address,
      message,
      signature: await account.signMessage({ message }),
      timestamp: Date.now(),
      chainId: 8453
    })).toString("base64")
    expect(principalOf(await signIn(auth, header))).toMatchObject({ family: "evm", address: account.address })
  })
})

const WALLET_SOURCE = `
// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract OwnerWallet {
  address public immutable owner;
  constructor(address initialOwner) { owner = initialOwner; }
  function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
    if (signature.length != 65) return 0xffffffff;
    bytes32 r = bytes32(signature[0:32]);
    bytes32 s = bytes32(signature[32:64]);
    uint8 v = uint8(signature[64]);
    return ecrecover(hash, v, r, s) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
  }
}
contract WalletFactory {
  function deploy(address initialOwner, bytes32 salt) external returns (address) {
    return address(new OwnerWallet{salt: salt}(initialOwner));
  }
}
`

interface SolcOutput {
  readonly contracts: Record<
    string,
    Record<string, { readonly abi: Array<unknown>; readonly evm: { readonly bytecode: { readonly object: string } } }>
  >
}

type Artifact = { readonly abi: Array<unknown>; readonly bytecode: Hex }

const compile = (): Record<"OwnerWallet" | "WalletFactory", Artifact> => {
  const solc = createRequire(import.meta.url)("solc") as { compile: (input: string) => string }
  const output = JSON.parse(solc.compile(JSON.stringify({
    language: "Solidity",
    sources: { "OwnerWallet.sol": { content: WALLET_SOURCE } },
    settings: { outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } }
  }))) as SolcOutput
  const artifact = (name: string): Artifact => {
    const contract = output.contracts["OwnerWallet.sol"]![name]!
    return { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` }
  }
  return { OwnerWallet: artifact("OwnerWallet"), WalletFactory: artifact("WalletFactory") }
}

describe("EIP-1271 and EIP-6492: contract wallets sign in through the chain client", () => {
  let anvil: Anvil.Anvil
  let walletAddress: Hex
  let factoryAddress: Hex
  let artifacts: ReturnType<typeof compile>
  const owner = privateKeyToAccount(generatePrivateKey())

  const deploy = async (artifact: Artifact, args: ReadonlyArray<unknown>) => {
    const deployer = createWalletClient({ account: privateKeyToAccount(Anvil.devPrivateKey), transport: http(anvil.url) })
    const hash = await deployer.deployContract({ abi: artifact.abi, bytecode: artifact.bytecode, args, chain: null })
    const receipt = await createPublicClient({ transport: http(anvil.url) }).waitForTransactionReceipt({ hash, pollingInterval: 50 })
    return receipt.contractAddress!
  }

  beforeAll(async () => {
    anvil = await Anvil.start({ chainId: 8453 })
    artifacts = compile()
    walletAddress = await deploy(artifacts.OwnerWallet, [owner.address])
    factoryAddress = await deploy(artifacts.WalletFactory, [])
  }, 60_000)
  afterAll(() => anvil?.stop())

  const walletHeader = async (signer = owner, address = walletAddress, wrap = (signature: Hex) => signature) => {
    const message = createSiweMessage({
      domain: "localhost:8787",
      address,
      uri: `${origin}/`,
      version: "1",
      chainId: 8453,
      nonce: Buffer.from(Crypto.randomBytes(8)).toString("hex"),
      issuedAt: new Date(),
      expirationTime: new Date(Date.now() + 600_000)
    })
    return Buffer.from(JSON.stringify({
      address,
      message,
      signature: wrap(await signer.signMessage({ message })),
      timestamp: Date.now(),
      chainId: "eip155:8453"
    })).toString("base64")
  }

  it("the owner's signature for the wallet's address is accepted as the wallet", async () => {
    const auth = await makeAuth({ evmVerifier: ContractWallets.verifier(anvil.url) })
    expect(principalOf(await signIn(auth, await walletHeader()))).toMatchObject({
      accountId: Principal.walletAccountId("evm", walletAddress),
      family: "evm"
    })
  })

  it("another key's signature is refused by the wallet contract", async () => {
    const auth = await makeAuth({ evmVerifier: ContractWallets.verifier(anvil.url) })
    expect(principalOf(await signIn(auth, await walletHeader(privateKeyToAccount(generatePrivateKey()))))).toBe("Unauthenticated")
  })

  it("without a chain client a contract wallet cannot sign in", async () => {
    const auth = await makeAuth()
    expect(principalOf(await signIn(auth, await walletHeader()))).toBe("Unauthenticated")
  })

  it("EIP-6492: a wallet not deployed yet signs in with its factory call wrapped around the signature", async () => {
    const salt = `0x${Crypto.randomBytes(32).toString("hex")}` as Hex
    const counterfactual = getContractAddress({
      from: factoryAddress,
      opcode: "CREATE2",
      salt,
      bytecode: concatHex([artifacts.OwnerWallet.bytecode, encodeAbiParameters([{ type: "address" }], [owner.address])])
    })
    const factoryData = encodeFunctionData({ abi: artifacts.WalletFactory.abi, functionName: "deploy", args: [owner.address, salt] })
    const wrap = (signature: Hex) => serializeErc6492Signature({ address: factoryAddress, data: factoryData, signature })
    const auth = await makeAuth({ evmVerifier: ContractWallets.verifier(anvil.url) })
    expect(principalOf(await signIn(auth, await walletHeader(owner, counterfactual, wrap)))).toMatchObject({
      accountId: Principal.walletAccountId("evm", counterfactual)
    })
  })
})
