/**
 * Ready-made search capabilities an operator can plug into the `SearchProvider`: web search through
 * a SearXNG instance (its JSON API), and a scraper that fetches a page and reduces it to text. The
 * scraper fetches URLs that callers chose, so it connects only to public addresses, redirects
 * included; bodies are capped in size and time.
 *
 * **Details**
 *
 * The address check runs at connect time on the address the connection actually uses (a `lookup` of
 * its own on the scraper's undici `Agent` resolves the name, refuses it when any of its addresses
 * is not public and hands the checked address to the socket, so a second resolution cannot rebind
 * it), and an IP literal in the URL is checked before the request. Redirects are followed by hand,
 * each hop through the same checks.
 *
 * Which addresses are public is `ipaddr.js`'s range table (maintained, every special-purpose IPv4
 * and IPv6 block of the IANA registries), not a hand-written list: only its `unicast` range passes,
 * so loopback, private, carrier-grade NAT, link-local, unique-local, multicast, unspecified
 * (0.0.0.0, ::), broadcast, reserved, NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4, Teredo and the
 * other special blocks are refused. An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the
 * IPv4 address it is, and the deprecated IPv4-compatible form (::127.0.0.1) is refused.
 *
 * @since 0.1.0
 */
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { Effect } from "effect"
import ipaddr from "ipaddr.js"
import * as Dns from "node:dns"
import type * as Net from "node:net"
import { Agent, fetch } from "undici"

/** @category options */
export interface ScrapeOptions {
  /** Allow hosts on loopback and private networks (never on a public server). */
  readonly allowPrivateHosts?: boolean
  /**
   * Which addresses may be connected to; default `isPublicAddress`. No configuration reaches it
   * (the server builds `scraper()` with no options and its config has no such field): it exists
   * because a test cannot bind a public address, so the redirect test lets one loopback address
   * stand for a public host and shows the hops to the others refused.
   */
  readonly allowAddress?: (address: string) => boolean
  readonly timeoutMs?: number
  readonly maxBytes?: number
}

const failed = (message: string) => new SearchProvider.SearchFailed({ message })

/**
 * Whether an IP address is on the public internet: `ipaddr.js` puts it in the plain `unicast`
 * range (see the module comment). Anything that does not parse is not public.
 *
 * @category predicates
 */
export const isPublicAddress = (text: string): boolean => {
  if (!ipaddr.isValid(text)) return false
  let address = ipaddr.parse(text)
  if (address.kind() === "ipv6") {
    const v6 = address as ipaddr.IPv6
    if (v6.isIPv4MappedAddress()) address = v6.toIPv4Address()
    else if (v6.parts.slice(0, 6).every((part) => part === 0)) return false
  }
  return address.range() === "unicast"
}

/** Refused connections name the address, so a caller sees why the page was not fetched. */
class AddressRefused extends Error {
  readonly code = "EADDRREFUSED"
}

/**
 * A `lookup` for `net.connect` that resolves like the default one and refuses the name when any of
 * its addresses is not allowed, so the address the socket connects to is the one that was checked.
 */
const checkedLookup = (allow: (address: string) => boolean): Net.LookupFunction => (hostname, options, callback) => {
  Dns.lookup(hostname, { ...options, all: true }, (error, found) => {
    if (error !== null) return (callback as (error: Error) => void)(error)
    const refused = found.find((entry) => !allow(entry.address))
    if (refused !== undefined || found.length === 0) {
      return (callback as (error: Error) => void)(
        new AddressRefused(`${hostname} resolves to ${refused?.address ?? "nothing"}, which is not public`)
      )
    }
    if (options.all === true) return (callback as (error: null, addresses: Array<Dns.LookupAddress>) => void)(null, found)
    callback(null, found[0]!.address, found[0]!.family)
  })
}
/**
 * Text of an HTML page: scripts, styles and tags removed, common entities decoded, whitespace
 * collapsed. Plain text passes through.
 *
 * @category parsing
 */
export const htmlToText = (html: string): string =>
  html
    .replace(/<(script|style|noscript|template)[\s\S]*?<\/\1\s*>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<(br|\/p|\/div|\/li|\/h[1-6]|\/tr)\b[^>]*>/gi, "\n")
    .replace(/<[^>]+>/g, " ")
    .replace(/&nbsp;/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, "\"")
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/[ \t\f\v]+/g, " ")
    .replace(/\s*\n\s*/g, "\n")
    .trim()

/**
 * A scraper: fetches a page (following redirects, each hop checked) and returns its text.
 *
 * @category constructors
 */
export const scraper = (options: ScrapeOptions = {}): SearchProvider.Scrape => {
  const maxBytes = options.maxBytes ?? 2_000_000
  const allow = options.allowPrivateHosts === true ? () => true : options.allowAddress ?? isPublicAddress
  const dispatcher = new Agent({ connect: { lookup: checkedLookup(allow) } })
  const checkUrl = (url: URL) => {
    if (url.protocol !== "http:" && url.protocol !== "https:") return Effect.fail(failed(`${url.href} is not an http(s) URL`))
    // `net.connect` does not look an IP literal up, so the literal is checked here.
    const host = url.hostname.replace(/^\[|\]$/g, "")
    if (ipaddr.isValid(host) && !allow(host)) return Effect.fail(failed(`${url.hostname} is not a public host`))
    return Effect.void
  }
  const fetchPage = (href: string, redirects: number): Effect.Effect<SearchProvider.ScrapedPage, SearchProvider.SearchFailed> =>
    Effect.gen(function*() {
      const url = yield* Effect.try({ try: () => new URL(href), catch: () => failed(`${href} is not a URL`) })
      yield* checkUrl(url)
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          fetch(url, {
            dispatcher,
            redirect: "manual",
            signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)])
          }),
        catch: (error) =>
          failed(
            error instanceof Error && error.cause instanceof AddressRefused
              ? `${url.hostname} is not a public host`
              : `${href} could not be fetched`
          )
      })
      const location = response.headers.get("location")
      if (response.status >= 300 && response.status < 400 && location !== null) {
        yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
        if (redirects === 0) return yield* failed(`${href} redirects too often`)
        return yield* fetchPage(new URL(location, url).href, redirects - 1)
      }
      if (!response.ok) return yield* failed(`${href} answered ${response.status}`)
      const bytes = yield* Effect.tryPromise({
        try: async () => {
          const reader = response.body?.getReader()
          const parts: Array<Uint8Array> = []
          let size = 0
          while (reader !== undefined && size < maxBytes) {
            const { done, value } = await reader.read()
            if (done) break
            parts.push(value)
            size += value.byteLength
          }
          await reader?.cancel()
          return Buffer.concat(parts).subarray(0, maxBytes)
        },
        catch: () => failed(`${href} broke off`)
      })
      const text = bytes.toString("utf8")
      const type = response.headers.get("content-type") ?? ""
      return { url: href, text: type.includes("html") ? htmlToText(text) : text.trim() }
    })
  return (url) => fetchPage(url, 3)
}

/**
 * Web search through a SearXNG instance's JSON API (`format=json` must be enabled there).
 *
 * @category constructors
 */
export const searxng =
  (baseUrl: string, options: { readonly timeoutMs?: number; readonly maxResults?: number } = {}): SearchProvider.Search => (query) =>
    Effect.tryPromise({
      try: async (signal) => {
        const url = new URL("search", baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`)
        url.searchParams.set("q", query)
        url.searchParams.set("format", "json")
        const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)]) })
        if (!response.ok) throw new Error(`search answered ${response.status}`)
        const body = await response.json() as {
          results?: Array<{ title?: unknown; url?: unknown; content?: unknown; publishedDate?: unknown }>
        }
        return (body.results ?? []).slice(0, options.maxResults ?? 5).map((result) => ({
          title: String(result.title ?? ""),
          url: String(result.url ?? ""),
          content: String(result.content ?? ""),
          date: typeof result.publishedDate === "string" ? result.publishedDate : undefined
        }))
      },
      catch: (error) => failed(`web search failed: ${error instanceof Error ? error.message : String(error)}`)
    })
