/**
 * A local Solana for tests: a `litesvm` (a real SVM with the SPL Token, Associated Token Account
 * and Memo programs, from npm with its Linux binary) behind a small JSON-RPC server on a free
 * loopback port, in the wire format of a validator, so `@solana/kit`'s `createSolanaRpc`, the
 * official x402 client and the `@x402/svm` facilitator work against it unchanged.
 *
 * **Details**
 *
 * It speaks the methods those clients call: `getLatestBlockhash`, `getAccountInfo`,
 * `simulateTransaction`, `sendTransaction`, `getSignatureStatuses`, `getTransaction`,
 * `getTokenAccountBalance`, `getBalance`, `getSlot`, `getBlockHeight`. A transaction is final as
 * soon as `sendTransaction` returns; blockhashes stay valid until `expireBlockhash`.
 * `lagStatuses(true)` makes `getSignatureStatuses` fail, as a node that is behind does, so a sent
 * transaction's confirmation is late. `createMint` and `fund` write SPL accounts directly, which is
 * how a test places USDC at its mainnet mint address so the official client treats it as USDC.
 *
 * @since 0.1.0
 */
import { findAssociatedTokenPda, getMintEncoder, getTokenDecoder, getTokenEncoder, TOKEN_PROGRAM_ADDRESS } from "@solana-program/token"
import {
  type Address,
  address as toAddress,
  getBase58Decoder,
  getBase64Encoder,
  getTransactionDecoder,
  lamports,
  type Transaction
} from "@solana/kit"
import { FailedTransactionMetadata, LiteSVM } from "litesvm"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** @category models */
export interface SolanaRpc {
  readonly url: string
  readonly svm: LiteSVM
  /** Creates an SPL mint (Token program) at `mint`, with `decimals`. */
  readonly createMint: (mint: string, decimals: number) => void
  /** Sets `owner`'s associated token account of `mint` to hold `amount` base units (created if absent). */
  readonly fund: (mint: string, owner: string, amount: bigint) => Promise<void>
  /** The base units `owner` holds of `mint` (0 without an account). */
  readonly tokenBalance: (mint: string, owner: string) => Promise<bigint>
  readonly airdrop: (to: string, lamports: bigint) => void
  /** Every blockhash issued so far stops being valid. */
  readonly expireBlockhash: () => void
  /** While `true`, `getSignatureStatuses` answers an RPC error: no confirmation can be read. */
  readonly lagStatuses: (lagging: boolean) => void
  readonly stop: () => Promise<void>
}

interface RpcRequest {
  readonly jsonrpc: "2.0"
  readonly id: unknown
  readonly method: string
  readonly params?: ReadonlyArray<unknown>
}

class RpcError extends Error {
  readonly code: number
  constructor(code: number, message: string) {
    super(message)
    this.code = code
  }
}

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64")

const errorJson = (failed: FailedTransactionMetadata): unknown => {
  const err = failed.err()
  return typeof err === "number"
    ? { code: err }
    : JSON.parse(JSON.stringify(err, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v)))
}

/**
 * A fresh ed25519 key pair as the 64 bytes (seed, then public key) `solana-keygen` writes and
 * `createKeyPairSignerFromBytes` reads.
 *
 * @category constructors
 */
export const keyPairBytes = (): Uint8Array => {
  const { privateKey, publicKey } = Crypto.generateKeyPairSync("ed25519")
  const seed = Buffer.from(privateKey.export({ format: "jwk" }).d ?? "", "base64url")
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x ?? "", "base64url")
  return Uint8Array.from([...seed, ...raw])
}

/**
 * Starts litesvm behind a JSON-RPC server on a free loopback port.
 *
 * @category constructors
 */
export const start = async (): Promise<SolanaRpc> => {
  const svm = new LiteSVM()
  const decoder = getTransactionDecoder()
  const signatureText = getBase58Decoder()
  const statuses = new Map<string, { readonly slot: number; readonly err: unknown }>()
  let lagging = false
  const lag = (): never => {
    throw new RpcError(-32004, "Block not available for slot: the node is behind")
  }

  const context = () => ({ apiVersion: "2.2.0", slot: Number(svm.getClock().slot) })
  const decodeTransaction = (params: ReadonlyArray<unknown>): Transaction => {
    const [wire, config] = params as [string, { encoding?: string } | undefined]
    if (config?.encoding !== "base64") throw new RpcError(-32602, "only base64 transactions are supported")
    return decoder.decode(getBase64Encoder().encode(wire))
  }
  const account = (address: string) => {
    const found = svm.getAccount(toAddress(address))
    return found.exists
      ? {
        data: [base64(found.data), "base64"],
        executable: found.executable,
        lamports: Number(found.lamports),
        owner: found.programAddress,
        rentEpoch: 0,
        space: Number(found.space)
      }
      : null
  }

  const methods: Record<string, (params: ReadonlyArray<unknown>) => unknown> = {
    getLatestBlockhash: () => ({
      context: context(),
      value: { blockhash: svm.latestBlockhash(), lastValidBlockHeight: Number(svm.getClock().slot) + 150 }
    }),
    getSlot: () => Number(svm.getClock().slot),
    getBlockHeight: () => Number(svm.getClock().slot),
    getBalance: ([address]) => ({ context: context(), value: Number(svm.getBalance(toAddress(address as string)) ?? 0n) }),
    getAccountInfo: ([address, config]) => {
      const encoding = (config as { encoding?: string } | undefined)?.encoding ?? "base64"
      if (encoding !== "base64") throw new RpcError(-32602, `encoding ${encoding} is not supported here`)
      return { context: context(), value: account(address as string) }
    },
    getTokenAccountBalance: ([address]) => {
      const found = svm.getAccount(toAddress(address as string))
      if (!found.exists) throw new RpcError(-32602, "Invalid param: could not find account")
      const token = getTokenDecoder().decode(found.data)
      return { context: context(), value: { amount: token.amount.toString(), decimals: 6, uiAmount: null, uiAmountString: "" } }
    },
    simulateTransaction: (params) => {
      const transaction = decodeTransaction(params)
      const { sigVerify } = (params[1] ?? {}) as { sigVerify?: boolean }
      // The fee payer's slot is still empty when a facilitator simulates, exactly as a
      // validator's `sigVerify: false` allows.
      const internal = (svm as unknown as { inner: { setSigverify: (on: boolean) => void } }).inner
      internal.setSigverify(sigVerify === true)
      try {
        const result = svm.simulateTransaction(transaction)
        const failed = result instanceof FailedTransactionMetadata
        const meta = failed ? result.meta() : result.meta()
        return {
          context: context(),
          value: {
            err: failed ? errorJson(result) : null,
            logs: meta.logs(),
            accounts: null,
            unitsConsumed: Number(meta.computeUnitsConsumed()),
            returnData: null,
            innerInstructions: null
          }
        }
      } finally {
        internal.setSigverify(true)
      }
    },
    sendTransaction: (params) => {
      const transaction = decodeTransaction(params)
      const signatures = Object.values(transaction.signatures)
      if (signatures.some((signature) => signature === null)) {
        throw new RpcError(-32003, "Transaction did not pass signature verification")
      }
      const result = svm.sendTransaction(transaction)
      if (result instanceof FailedTransactionMetadata) {
        const err = errorJson(result)
        if (JSON.stringify(err).includes("AlreadyProcessed") || JSON.stringify(err).includes("BlockhashNotFound")) {
          throw new RpcError(-32002, `Transaction simulation failed: ${JSON.stringify(err)}`)
        }
        const signature = signatureText.decode(result.meta().signature())
        statuses.set(signature, { slot: Number(svm.getClock().slot), err })
        return signature
      }
      const signature = signatureText.decode(result.signature())
      statuses.set(signature, { slot: Number(svm.getClock().slot), err: null })
      // Each landed transaction moves the chain on, as a validator's slots do.
      svm.warpToSlot(svm.getClock().slot + 1n)
      return signature
    },
    getSignatureStatuses: ([signatures]) =>
      lagging ? lag() : ({
        context: context(),
        value: (signatures as ReadonlyArray<string>).map((signature) => {
          const status = statuses.get(signature)
          return status === undefined
            ? null
            : {
              slot: status.slot,
              confirmations: null,
              err: status.err,
              status: status.err === null ? { Ok: null } : { Err: status.err },
              confirmationStatus: "finalized"
            }
        })
      }),
    getTransaction: ([signature]) => {
      const status = statuses.get(signature as string)
      return status === undefined
        ? null
        : { slot: status.slot, meta: { err: status.err, innerInstructions: [] }, transaction: null, blockTime: null }
    }
  }

  const answer = (request: RpcRequest) => {
    const method = methods[request.method]
    if (method === undefined)
      return { jsonrpc: "2.0", id: request.id, error: { code: -32601, message: `Method not found: ${request.method}` } }
    try {
      return { jsonrpc: "2.0", id: request.id, result: method(request.params ?? []) }
    } catch (error) {
      const code = error instanceof RpcError ? error.code : -32603
      return { jsonrpc: "2.0", id: request.id, error: { code, message: error instanceof Error ? error.message : String(error) } }
    }
  }

  const server = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      let body: unknown
      try {
        const parsed = JSON.parse(Buffer.concat(chunks).toString("utf8")) as RpcRequest | ReadonlyArray<RpcRequest>
        body = Array.isArray(parsed) ? parsed.map(answer) : answer(parsed as RpcRequest)
      } catch {
        body = { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }
      }
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify(body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port

  const rentExempt = (size: number) => lamports(svm.minimumBalanceForRentExemption(BigInt(size)))
  const ata = async (mint: string, owner: string): Promise<Address> =>
    (await findAssociatedTokenPda({ mint: toAddress(mint), owner: toAddress(owner), tokenProgram: TOKEN_PROGRAM_ADDRESS }))[0]

  return {
    url: `http://127.0.0.1:${port}`,
    svm,
    createMint: (mint, decimals) => {
      const data = Uint8Array.from(
        getMintEncoder().encode({
          mintAuthority: null,
          supply: 1_000_000_000_000_000n,
          decimals,
          isInitialized: true,
          freezeAuthority: null
        })
      )
      svm.setAccount({
        address: toAddress(mint),
        data,
        executable: false,
        lamports: rentExempt(data.length),
        programAddress: TOKEN_PROGRAM_ADDRESS,
        space: BigInt(data.length)
      })
    },
    fund: async (mint, owner, amount) => {
      const data = Uint8Array.from(
        getTokenEncoder().encode({
          mint: toAddress(mint),
          owner: toAddress(owner),
          amount,
          delegate: null,
          state: 1,
          isNative: null,
          delegatedAmount: 0n,
          closeAuthority: null
        })
      )
      svm.setAccount({
        address: await ata(mint, owner),
        data,
        executable: false,
        lamports: rentExempt(data.length),
        programAddress: TOKEN_PROGRAM_ADDRESS,
        space: BigInt(data.length)
      })
    },
    tokenBalance: async (mint, owner) => {
      const found = svm.getAccount(await ata(mint, owner))
      return found.exists ? getTokenDecoder().decode(found.data).amount : 0n
    },
    airdrop: (to, amount) => {
      svm.airdrop(toAddress(to), lamports(amount))
    },
    expireBlockhash: () => svm.expireBlockhash(),
    lagStatuses: (value) => {
      lagging = value
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
