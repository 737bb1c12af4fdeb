/**
 * The routes that document the API: `GET /api/v1/openapi.json` (the generated OpenAPI 3.1 document
 * of every route, itself included), `GET /docs` (a browsable reference page, Scalar as bundled by
 * `effect/http-api`, with that document inline), `GET /` (links to both, as a page for a browser
 * and as JSON for everything else) and the pages the 402 bodies link to (`Pages`). Nothing they
 * serve loads anything from outside the server.
 *
 * **Details**
 *
 * Scalar's fonts (a CDN) are replaced by the system's, the favicon is an empty inline one, and the
 * introduction is also in the page itself for a browser without JavaScript.
 *
 * @since 0.1.0
 */
import { PricingEngine, X402 } from "@tollgate/core"
import { Effect, Option, Schema } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Url from "node:url"
import * as OpenApi from "./OpenApi.ts"
import * as Pages from "./Pages.ts"
import * as Route from "./Route.ts"
import { ServiceInfo } from "./ServiceInfo.ts"

/** @category constants */
export const openApiPath = "/api/v1/openapi.json"

/**
 * `GET /`: a client (or a person) that tries the server's root learns where the reference and the
 * API are, instead of a bare 404.
 */
const rootBody = {
  service: "tollgate",
  docs: "/docs",
  openapi: openApiPath,
  api: "/api/v1"
}

/** `GET /` for a person: the same links, and the portal's, as a page. */
const rootPage = Pages.render("tollgate", [
  "<p>A paid API for inference and blockchain RPC.</p>",
  "<ul>",
  `<li><a href="/docs">The API reference</a>: every endpoint, its request and its answers.</li>`,
  `<li><a href="${Pages.apiKeysPath}">The portal</a>: sign in with a wallet, add credit, create API keys.</li>`,
  `<li><a href="${openApiPath}">The OpenAPI document</a>, for clients and code generators.</li>`,
  `<li>The API itself is under <code>${rootBody.api}</code>.</li>`,
  "</ul>"
])

/** A browser asks for HTML; a client that asks for anything else, or nothing, gets JSON. */
const wantsHtml = (accept: string | undefined): boolean => accept !== undefined && accept.includes("text/html")

/**
 * Scalar's configuration: the document of this server inline (no second request before the page
 * shows anything), its fonts off (they come from a CDN), no proxy, no telemetry. Its list of the
 * document's schemas is hidden: Scalar titles it "Models", beside the API's own "Models" group,
 * and every schema is shown where an operation uses it.
 */
const scalarConfiguration = (document: OpenApi.Document) => ({
  content: document,
  withDefaultFonts: false,
  telemetry: false,
  hideModels: true
})

/** JSON inside a `<script>`: `<` escaped so no string in the document can close the element. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</gu, "\\u003c")

/**
 * The reference page. Scalar's theme still asks for its fonts from a CDN with the default fonts
 * off, so the page sets the font variables itself (unlayered, they win over the theme's layer).
 * The mount point is not `#api-reference`: the bundle mounts a second, empty reference there of
 * its own accord, whose loading placeholders filled the first screen.
 */
const page = (javascript: string, document: OpenApi.Document) =>
  `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>tollgate API reference</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="data:," />
    <style>
      body, body * { --scalar-font: system-ui, sans-serif; --scalar-font-code: ui-monospace, monospace; }
    </style>
  </head>
  <body>
    <noscript>
      <h1>tollgate API reference</h1>
      <p>${OpenApi.description}</p>
      <p><a href="${openApiPath}">The OpenAPI document</a> · <a href="${Pages.apiKeysPath}">API keys</a> ·
        <a href="${Pages.authenticationPath}">Authentication</a> · <a href="${Pages.walletsPath}">Wallets</a></p>
    </noscript>
    <div id="reference"></div>
    <script>${javascript}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById("reference"), ${scriptJson(scalarConfiguration(document))})
    </script>
  </body>
</html>`

/**
 * The Scalar bundle that ships inside `effect` (the one `HttpApiScalar` serves), read from the
 * package's files because `effect` does not export its internal modules.
 */
const loadScalar = async (): Promise<string> => {
  const effectPackage = Path.dirname(createRequire(import.meta.url).resolve("effect/package.json"))
  const bundle = Path.join(effectPackage, "dist", "http-api", "internal", "httpApiScalar.js")
  const module = await import(Url.pathToFileURL(bundle).href) as { readonly javascript: string }
  return module.javascript
}

/**
 * The documentation routes for a list of routes; the document covers the list and these routes.
 *
 * @category routes
 */
export const routes = <R>(
  documented: ReadonlyArray<Route.Route<R>>,
  options: { readonly paymentRequiredSchemas?: ReadonlyArray<Schema.Top> } = {}
): ReadonlyArray<Route.Route<R | ServiceInfo>> => {
  const openApiDocument = Effect.gen(function*() {
    const info = yield* ServiceInfo
    const config = yield* Effect.serviceOption(X402.X402Config)
    const tables = yield* Effect.serviceOption(PricingEngine.PricingEngine)
    const x402 = Option.isSome(config) && Option.isSome(tables) ? { config: config.value, tables: tables.value } : undefined
    return OpenApi.make([...documented, ...all], { ...options, version: info.version, publicOrigin: info.publicOrigin, x402 })
  })
  const openApi: Route.Route<ServiceInfo> = Route.make(
    "GET",
    openApiPath,
    Effect.map(openApiDocument, (document) => {
      const body = new TextEncoder().encode(JSON.stringify(document))
      return Effect.sync(() => HttpServerResponse.uint8Array(body, { contentType: "application/json" }))
    }),
    {
      summary: "The OpenAPI 3.1 document of this API",
      tags: ["Documentation"],
      security: "public",
      responses: { 200: { description: "OpenAPI document", schema: Schema.Record(Schema.String, Schema.Unknown) } }
    }
  )
  const reference: Route.Route<ServiceInfo> = Route.make(
    "GET",
    "/docs",
    Effect.all([Effect.promise(loadScalar), openApiDocument]).pipe(
      Effect.map(([javascript, document]) => {
        const html = page(javascript, document)
        return Effect.sync(() => HttpServerResponse.html(html))
      })
    ),
    {
      summary: "A browsable API reference",
      tags: ["Documentation"],
      security: "public",
      responses: { 200: { description: "HTML page", contentType: "text/html", schema: Schema.String } }
    }
  )
  const root: Route.Route<never> = Route.make(
    "GET",
    "/",
    Effect.succeed(Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
      wantsHtml(request.headers["accept"])
        ? HttpServerResponse.setHeader(HttpServerResponse.html(rootPage), "vary", "accept")
        : HttpServerResponse.jsonUnsafe(rootBody, { headers: { vary: "accept" } }))),
    {
      summary: "Where to start: the API reference, the OpenAPI document and the API root",
      description:
        "JSON, or an HTML page linking the reference, the portal and the OpenAPI document for a request that accepts `text/html`.",
      tags: ["Documentation"],
      security: "public",
      responses: {
        200: {
          description: "Links",
          schema: Schema.Struct({ service: Schema.String, docs: Schema.String, openapi: Schema.String, api: Schema.String })
        }
      }
    }
  )
  const all = [openApi, reference, root, ...Pages.routes]
  return all
}
