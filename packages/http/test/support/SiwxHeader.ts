/**
 * A `SIGN-IN-WITH-X` header as an x402 client sends it: viem's SIWE message on Base for the server
 * at `origin`, signed by the wallet's key. Each header is good for one request.
 */
import * as Crypto from "node:crypto"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"

export const of = async (origin: string, account: PrivateKeyAccount) => {
  const url = new URL(origin)
  const now = Date.now()
  const message = createSiweMessage({
    domain: url.host,
    address: account.address,
    uri: `${url.origin}/`,
    version: "1",
    chainId: 8453,
    nonce: Crypto.randomBytes(8).toString("hex"),
    // One instant for both: a lifetime a millisecond over the server's 10 minutes is refused.
    issuedAt: new Date(now),
    expirationTime: new Date(now + 300_000),
    statement: "Sign in to use your prepaid credits."
  })
  return Buffer.from(JSON.stringify({
    address: account.address,
    message,
    signature: await account.signMessage({ message }),
    timestamp: Date.now(),
    chainId: 8453
  })).toString("base64")
}

/** A new wallet's header, with its address and the account tollgate keeps for it. */
export const freshWallet = async (origin: string) => {
  const account = privateKeyToAccount(generatePrivateKey())
  return { address: account.address, accountId: `wallet:evm:${account.address.toLowerCase()}`, header: await of(origin, account) }
}
