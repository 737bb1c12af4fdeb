/**
 * A `SIGN-IN-WITH-X` header of a fresh wallet, as an x402 client sends it: viem's SIWE message on
 * Base for the server at `origin`, signed by a key made for the test.
 */
import * as Crypto from "node:crypto"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"

export const freshWallet = async (origin: string) => {
  const account = privateKeyToAccount(generatePrivateKey())
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
  const header = Buffer.from(JSON.stringify({
    address: account.address,
    message,
    signature: await account.signMessage({ message }),
    timestamp: Date.now(),
    chainId: 8453
  })).toString("base64")
  return { address: account.address, accountId: `wallet:evm:${account.address.toLowerCase()}`, header }
}
