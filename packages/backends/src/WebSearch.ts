/**
 * Ready-made search capabilities an operator can plug into the `SearchProvider`: web search
 * through a SearXNG instance (its JSON API), and a scraper that fetches a page and reduces it to
 * text. The scraper fetches URLs that callers chose, so it refuses anything but http(s) on the
 * public internet: a host that is, or resolves to, a loopback, private, link-local or otherwise
 * internal address is refused before any request is made (tests and private deployments may opt
 * out). Bodies are capped in size and time.
 *
 * @since 0.1.0
 */
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { Effect } from "effect"
import * as Dns from "node:dns/promises"
import * as Net from "node:net"

/** @category options */
export interface ScrapeOptions {
  /** Allow hosts on loopback and private networks (never on a public server). */
  readonly allowPrivateHosts?: boolean
  readonly timeoutMs?: number
  readonly maxBytes?: number
}

const failed = (message: string) => new SearchProvider.SearchFailed({ message })

const PRIVATE_V4 = [/^0\./, /^10\./, /^127\./, /^169\.254\./, /^172\.(1[6-9]|2\d|3[01])\./, /^192\.168\./, /^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\./, /^22[4-9]\./, /^2[3-5]\d\./]

/**
 * Whether an IP address is internal (loopback, private, link-local, CGNAT, multicast, reserved).
 *
 * @category predicates
 */
export const isInternalAddress = (address: string): boolean => {
  const mapped = address.toLowerCase().startsWith("::ffff:") ? address.slice(7) : address
  if (Net.isIPv4(mapped)) return PRIVATE_V4.some((pattern) => pattern.test(mapped))
  const lower = mapped.toLowerCase()
  return lower === "::" || lower === "::1" || lower.startsWith("fc") || lower.startsWith("fd") || lower.startsWith("fe80") || lower.startsWith("ff")
}

const checkHost = (url: URL, allowPrivate: boolean) =>
  Effect.gen(function*() {
    if (url.protocol !== "http:" && url.protocol !== "https:") return yield* failed(`${url.href} is not an http(s) URL`)
    if (allowPrivate) return
    const host = url.hostname.replace(/^\[|\]$/g, "")
    const addresses = Net.isIP(host) !== 0
      ? [host]
      : yield* Effect.tryPromise({
        try: () => Dns.lookup(host, { all: true }).then((found) => found.map((entry) => entry.address)),
        catch: () => failed(`${url.hostname} does not resolve`)
      })
    if (host === "localhost" || addresses.some(isInternalAddress)) return yield* failed(`${url.hostname} is not a public host`)
  })

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
 * A scraper: fetches a page (following redirects only to public hosts) and returns its text.
 *
 * @category constructors
 */
export const scraper = (options: ScrapeOptions = {}): SearchProvider.Scrape => {
  const maxBytes = options.maxBytes ?? 2_000_000
  const allowPrivate = options.allowPrivateHosts === true
  const fetchPage = (href: string, redirects: number): Effect.Effect<SearchProvider.ScrapedPage, SearchProvider.SearchFailed> =>
    Effect.gen(function*() {
      const url = yield* Effect.try({ try: () => new URL(href), catch: () => failed(`${href} is not a URL`) })
      yield* checkHost(url, allowPrivate)
      const response = yield* Effect.tryPromise({
        try: (signal) => fetch(url, { redirect: "manual", signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)]) }),
        catch: () => failed(`${href} could not be fetched`)
      })
      const location = response.headers.get("location")
      if (response.status >= 300 && response.status < 400 && location !== null) {
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
export const searxng = (baseUrl: string, options: { readonly timeoutMs?: number; readonly maxResults?: number } = {}): SearchProvider.Search =>
(query) =>
  Effect.tryPromise({
    try: async (signal) => {
      const url = new URL("search", baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`)
      url.searchParams.set("q", query)
      url.searchParams.set("format", "json")
      const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)]) })
      if (!response.ok) throw new Error(`search answered ${response.status}`)
      const body = await response.json() as { results?: Array<{ title?: unknown; url?: unknown; content?: unknown; publishedDate?: unknown }> }
      return (body.results ?? []).slice(0, options.maxResults ?? 5).map((result) => ({
        title: String(result.title ?? ""),
        url: String(result.url ?? ""),
        content: String(result.content ?? ""),
        date: typeof result.publishedDate === "string" ? result.publishedDate : undefined
      }))
    },
    catch: (error) => failed(`web search failed: ${error instanceof Error ? error.message : String(error)}`)
  })
