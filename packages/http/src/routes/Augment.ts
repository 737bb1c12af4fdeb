/**
 * `POST /augment/search` and `POST /augment/scrape`: the web search and the scraper chat uses
 * (`SearchProvider`), sold on their own, each at its flat price (`PricingEngine.operation`), under
 * the text kind's limits like the other augment operation, the text parser.
 *
 * The scraper is the one chat's `enable_web_scraping` uses, with its SSRF rules: it connects only
 * to public addresses, checked on the address it connects to, every redirect hop checked again
 * (see `WebSearch`). A URL it refuses (not http(s), a host that is or resolves to a private
 * address, a redirect to one) or cannot read is a 400 naming `url`, and the call's hold is
 * released: a page that is not scraped is never charged. A capability the operator did not
 * configure is a 400 that says so, before anything is held.
 *
 * @since 0.1.0
 */
import { Errors, PricingEngine } from "@tollgate/core"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { Effect, Option, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Endpoint from "../Endpoint.ts"
import * as RequestBody from "../RequestBody.ts"

/** @category schemas */
export const SearchRequest = Schema.Struct({
  query: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(400)),
  limit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 20 }))),
  /** Accepted for compatibility with the reference: the operator's configured provider answers. */
  search_provider: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "WebSearchRequest" })

/** @category schemas */
export const SearchResponse = Schema.Struct({
  query: Schema.String,
  results: Schema.Array(Schema.Struct({
    title: Schema.String,
    url: Schema.String,
    content: Schema.String,
    date: Schema.NullOr(Schema.String)
  }))
}).annotate({ identifier: "WebSearchResponse" })

/** @category schemas */
export const ScrapeRequest = Schema.Struct({
  url: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2048))
}).annotate({ identifier: "WebScrapeRequest" })

/** @category schemas */
export const ScrapeResponse = Schema.Struct({
  url: Schema.String,
  content: Schema.String,
  format: Schema.Literal("text")
}).annotate({ identifier: "WebScrapeResponse" })

/** The capability the operator configured, or a 400 saying it is not, before anything is held. */
const configured = <A>(capability: Option.Option<A>, what: string) =>
  Option.match(capability, {
    onNone: () => Effect.fail(new Errors.InvalidRequest({ message: `${what} is not configured on this server` })),
    onSome: Effect.succeed
  })

/** @category routes */
export const search = Endpoint.make({
  method: "POST",
  path: "/api/v1/augment/search",
  kind: "text",
  serve: Effect.gen(function*() {
    const provider = yield* SearchProvider.SearchProvider
    const quote = PricingEngine.operation(yield* PricingEngine.PricingEngine, "augment-search")
    return {
      decode: Effect.zip(RequestBody.schema(SearchRequest), configured(provider.web, "Web search")),
      quote: () => quote,
      execute: ([body, run]: readonly [typeof SearchRequest.Type, SearchProvider.Search]) =>
        run(body.query).pipe(
          Effect.mapError(() => new Errors.BadGateway({ message: "The web search failed; nothing was charged" })),
          Effect.map((results) =>
            Endpoint.flat(
              quote,
              HttpServerResponse.jsonUnsafe({
                query: body.query,
                results: results.slice(0, body.limit ?? 10).map((result) => ({ ...result, date: result.date ?? null }))
              }),
              `${results.length} results`
            )
          )
        )
    }
  }),
  docs: {
    summary: "Web search",
    description: "The results of a web search through the search provider chat uses (limit 1 to 20, default 10, at most " +
      "what the provider returns). Priced per search; a failed search is a 502 and is not charged.",
    tags: ["Augment"],
    request: { contentType: "application/json", schema: SearchRequest, example: { query: "x402 payment protocol", limit: 5 } },
    responses: { 200: { description: "The results", schema: SearchResponse } }
  }
})

/** @category routes */
export const scrape = Endpoint.make({
  method: "POST",
  path: "/api/v1/augment/scrape",
  kind: "text",
  serve: Effect.gen(function*() {
    const provider = yield* SearchProvider.SearchProvider
    const quote = PricingEngine.operation(yield* PricingEngine.PricingEngine, "augment-scrape")
    return {
      decode: Effect.zip(RequestBody.schema(ScrapeRequest), configured(provider.scrape, "Web scraping")),
      quote: () => quote,
      execute: ([body, run]: readonly [typeof ScrapeRequest.Type, SearchProvider.Scrape]) =>
        run(body.url).pipe(
          Effect.mapError((error) => Errors.invalidField("url", `Could not be scraped: ${error.message}`)),
          Effect.map((page) =>
            Endpoint.flat(quote, HttpServerResponse.jsonUnsafe({ url: page.url, content: page.text, format: "text" }), page.url)
          )
        )
    }
  }),
  docs: {
    summary: "Scrape a web page",
    description: "The text of a public web page, fetched by the scraper chat uses: only public addresses, every redirect " +
      "checked. Priced per URL scraped; a page that cannot be scraped (not public, not found, too slow) is a 400 naming " +
      "url and is not charged.",
    tags: ["Augment"],
    request: { contentType: "application/json", schema: ScrapeRequest, example: { url: "https://example.com/" } },
    responses: { 200: { description: "The page's text", schema: ScrapeResponse } }
  }
})

/** @category routes */
export const routes = [search, scrape] as const
