/**
 * The routes that document the API: `GET /api/v1/openapi.json` (the generated OpenAPI 3.1
 * document of every route, itself included), `GET /docs` (a browsable reference page, Scalar as
 * bundled by `effect/http-api`, reading that document) and the pages the 402 bodies link to
 * (`Pages`). Nothing they serve loads anything from outside the server: Scalar's default fonts (a
 * CDN) are turned off, and the introduction is also in the page itself for a browser without
 * JavaScript.
 *
 * @since 0.1.0
 */
import { PricingEngine, X402 } from "@tollgate/core"
import { Effect, Option, Schema } from "effect"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Url from "node:url"
import { HttpServerResponse } from "effect/http"
import * as OpenApi from "./OpenApi.ts"
import * as Pages from "./Pages.ts"
import * as Route from "./Route.ts"
import { ServiceInfo } from "./ServiceInfo.ts"

/** @category constants */
export const openApiPath = "/api/v1/openapi.json"

/**
 * Scalar's configuration: the document of this server, its fonts off (they come from a CDN; the
 * page falls back to the system's), no proxy, no telemetry.
 */
const scalarConfiguration = { url: openApiPath, withDefaultFonts: false, telemetry: false }

const page = (javascript: string) => `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>tollgate API reference</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <noscript>
      <h1>tollgate API reference</h1>
      <p>${OpenApi.description}</p>
      <p><a href="${openApiPath}">The OpenAPI document</a> · <a href="${Pages.apiKeysPath}">API keys</a> ·
        <a href="${Pages.authenticationPath}">Authentication</a> · <a href="${Pages.walletsPath}">Wallets</a></p>
    </noscript>
    <div id="api-reference"></div>
    <script>${javascript}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById("api-reference"), ${JSON.stringify(scalarConfiguration)})
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
  const openApi: Route.Route<ServiceInfo> = Route.make(
    "GET",
    openApiPath,
    Effect.gen(function*() {
      const info = yield* ServiceInfo
      const config = yield* Effect.serviceOption(X402.X402Config)
      const tables = yield* Effect.serviceOption(PricingEngine.PricingEngine)
      const x402 = Option.isSome(config) && Option.isSome(tables) ? { config: config.value, tables: tables.value } : undefined
      const document = OpenApi.make([...documented, ...all], { ...options, version: info.version, publicOrigin: info.publicOrigin, x402 })
      const body = new TextEncoder().encode(JSON.stringify(document))
      return Effect.sync(() => HttpServerResponse.uint8Array(body, { contentType: "application/json" }))
    }),
    {
      summary: "The OpenAPI 3.1 document of this API",
      tags: ["documentation"],
      security: "public",
      responses: { 200: { description: "OpenAPI document", schema: Schema.Record(Schema.String, Schema.Unknown) } }
    }
  )
  const reference: Route.Route<never> = Route.make(
    "GET",
    "/docs",
    Effect.promise(loadScalar).pipe(
      Effect.map((javascript) => {
        const html = page(javascript)
        return Effect.sync(() => HttpServerResponse.html(html))
      })
    ),
    {
      summary: "A browsable API reference",
      tags: ["documentation"],
      security: "public",
      responses: { 200: { description: "HTML page", contentType: "text/html", schema: Schema.String } }
    }
  )
  const all = [openApi, reference, ...Pages.routes]
  return all
}
