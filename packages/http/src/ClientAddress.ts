/**
 * The client address of a request, as the abuse guard and the logs judge it. Without trusted
 * proxies it is the socket's peer address and `X-Forwarded-For`/`Forwarded` are ignored (anyone can
 * write them). With `trustedProxies` (CIDR ranges, or single addresses), a request whose peer is
 * one of them is attributed to the address that proxy forwarded.
 *
 * **Details**
 *
 * The forwarding chain is read from the right, skipping the trusted proxies, and the first address
 * outside them is the client. `X-Forwarded-For` is read when present, else `Forwarded` (RFC 7239);
 * a proxy in front of the service must append to (or overwrite) the header it uses. Addresses are
 * normalized, so an IPv4-mapped IPv6 peer (`::ffff:127.0.0.2` on a dual-stack socket) is its IPv4
 * address. The ranges are parsed by `ipaddr.js` (maintained, IPv4 and IPv6 CIDR matching), not by
 * hand.
 *
 * @since 0.1.0
 */
import ipaddr from "ipaddr.js"

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number]

/** @category models */
export interface TrustedProxies {
  readonly ranges: ReadonlyArray<Range>
}

/**
 * Parses a list of CIDR ranges or single addresses; the first bad entry is named in the error.
 *
 * @category constructors
 */
export const parseTrustedProxies = (entries: ReadonlyArray<string>): TrustedProxies | { readonly invalid: string } => {
  const ranges: Array<Range> = []
  for (const entry of entries) {
    const text = entry.trim()
    try {
      if (text.includes("/")) {
        const [address, bits] = ipaddr.parseCIDR(text)
        ranges.push([normalize(address), address.kind() === "ipv6" && normalize(address).kind() === "ipv4" ? bits - 96 : bits])
      } else {
        const address = normalize(ipaddr.parse(text))
        ranges.push([address, address.kind() === "ipv4" ? 32 : 128])
      }
    } catch {
      return { invalid: entry }
    }
  }
  return { ranges }
}

const normalize = (address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 =>
  address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address

const parse = (text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined => {
  // Forwarded writes IPv6 as "[::1]:port" and may quote it; X-Forwarded-For may carry a port on IPv4.
  const bare = text.trim().replace(/^"|"$/g, "")
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(bare)
  const candidate = bracketed !== null ? bracketed[1]! : /^[\d.]+:\d+$/.test(bare) ? bare.slice(0, bare.indexOf(":")) : bare
  return ipaddr.isValid(candidate) ? normalize(ipaddr.parse(candidate)) : undefined
}

const isTrusted = (trusted: TrustedProxies, address: ipaddr.IPv4 | ipaddr.IPv6) =>
  trusted.ranges.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits))

/** The `for=` values of a `Forwarded` header, in order. */
const forwardedFor = (header: string): Array<string> =>
  header.split(",").flatMap((element) =>
    element.split(";").flatMap((pair) => {
      const [name, value] = pair.split("=", 2)
      return name?.trim().toLowerCase() === "for" && value !== undefined ? [value] : []
    })
  )

/** Request headers, lower-cased names. @category models */
export type Headers = Readonly<Record<string, string | undefined>>

/**
 * The client address of a request from `peer` (the socket's remote address) with `headers`.
 *
 * @category resolving
 */
export const resolve = (peer: string, headers: Headers, trusted: TrustedProxies): string => {
  // The common case, on every request: no proxies to trust, only the mapped form to undo.
  if (trusted.ranges.length === 0) return peer.startsWith("::ffff:") && peer.includes(".") ? peer.slice(7) : peer
  const address = parse(peer)
  if (address === undefined) return peer
  if (!isTrusted(trusted, address)) return address.toString()
  const xff = headers["x-forwarded-for"]
  const forwarded = headers["forwarded"]
  const chain = xff !== undefined ? xff.split(",") : forwarded !== undefined ? forwardedFor(forwarded) : []
  let client = address
  for (let i = chain.length - 1; i >= 0; i--) {
    const hop = parse(chain[i]!)
    // A hop the proxy could not name (unknown, obfuscated) ends the chain: the last known proxy
    // is the best that can be said.
    if (hop === undefined) break
    client = hop
    if (!isTrusted(trusted, hop)) break
  }
  return client.toString()
}

/**
 * No trusted proxies: the peer address is the client.
 *
 * @category constants
 */
export const none: TrustedProxies = { ranges: [] }
