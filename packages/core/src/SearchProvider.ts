/**
 * Web search, X search and web scraping for chat (`enable_web_search`, `enable_x_search`,
 * `enable_web_scraping`). Each capability is optional and configured by the operator: a request
 * that needs one the server does not have is refused with a 400 that says so, before anything is
 * held. `layerNone` offers nothing; `make` assembles a provider from whatever functions the
 * operator plugs in (a SearXNG instance, a hosted search API, a scraper), so the chat route never
 * knows which service answers.
 *
 * @since 0.1.0
 */
import { Context, Data, type Effect, Layer, Option } from "effect"
import { InvalidRequest } from "./Errors.ts"

/** @category models */
export interface SearchResult {
  readonly title: string
  readonly url: string
  readonly content: string
  readonly date?: string | undefined
}

/** @category models */
export interface ScrapedPage {
  readonly url: string
  readonly text: string
}

/**
 * A search or a fetch that did not work. A failed search leaves the reply without results; a
 * failed scrape is not billed.
 *
 * @category errors
 */
export class SearchFailed extends Data.TaggedError("SearchFailed")<{ readonly message: string }> {}

/** @category models */
export type Search = (query: string) => Effect.Effect<ReadonlyArray<SearchResult>, SearchFailed>

/** @category models */
export type Scrape = (url: string) => Effect.Effect<ScrapedPage, SearchFailed>

/** @category services */
export class SearchProvider extends Context.Service<SearchProvider, {
  readonly web: Option.Option<Search>
  readonly x: Option.Option<Search>
  readonly scrape: Option.Option<Scrape>
}>()("@tollgate/core/SearchProvider") {}

/** @category models */
export type Capability = "web" | "x" | "scrape"

const names: Record<Capability, string> = {
  web: "Web search (enable_web_search)",
  x: "X search (enable_x_search)",
  scrape: "Web scraping (enable_web_scraping)"
}

/**
 * The 400 for a request that needs a capability nobody configured.
 *
 * @category errors
 */
export const notConfigured = (capability: Capability): InvalidRequest =>
  new InvalidRequest({
    message: `${names[capability]} is not available: no search provider is configured on this server`,
    details: {
      _errors: [],
      service_parameters: { _errors: [`${names[capability]} is not available on this server`] }
    }
  })

/**
 * Whether the provider has a capability.
 *
 * @category predicates
 */
export const offers = (provider: SearchProvider["Service"], capability: Capability): boolean => Option.isSome<unknown>(provider[capability])

/** Scraping reads at most this many URLs of a user message, as the spec says. @category constants */
export const MAX_SCRAPED_URLS = 5

const URL_PATTERN = /https?:\/\/[^\s<>"'`)\]]+/g

/**
 * The distinct http(s) URLs of a text, in order, at most five; trailing punctuation is not part of
 * a URL.
 *
 * @category parsing
 */
export const urlsIn = (text: string): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const match of text.matchAll(URL_PATTERN)) {
    const url = match[0].replace(/[.,;:!?]+$/, "")
    if (!found.includes(url)) found.push(url)
    if (found.length === MAX_SCRAPED_URLS) break
  }
  return found
}

/**
 * A provider from the capabilities the operator plugs in.
 *
 * @category constructors
 */
export const make = (capabilities: {
  readonly web?: Search | undefined
  readonly x?: Search | undefined
  readonly scrape?: Scrape | undefined
}): SearchProvider["Service"] => ({
  web: Option.fromNullishOr(capabilities.web),
  x: Option.fromNullishOr(capabilities.x),
  scrape: Option.fromNullishOr(capabilities.scrape)
})

/** @category layers */
export const layer = (capabilities: Parameters<typeof make>[0]): Layer.Layer<SearchProvider> =>
  Layer.succeed(SearchProvider, make(capabilities))

/**
 * No search at all: every request that asks for search is a 400.
 *
 * @category layers
 */
export const layerNone: Layer.Layer<SearchProvider> = layer({})
