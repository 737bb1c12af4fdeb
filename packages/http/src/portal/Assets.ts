/**
 * The portal's page and assets: hand-written HTML, CSS and JavaScript in `src/portal/`, served as
 * they are (no build step, nothing from another host) under a Content-Security-Policy that allows
 * only this server's own scripts and styles.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Fs from "node:fs"
import * as Pages from "../Pages.ts"
import * as Route from "../Route.ts"
import { ServiceInfo } from "../ServiceInfo.ts"

/**
 * What the page and its assets may do: scripts and styles of this server only, requests to it
 * only, no frames, no plugins, no inline anything.
 *
 * @category constants
 */
export const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const pageHeaders = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

/** The assets, from `src/portal/` (shipped in the package beside `dist/`, so both find it). */
const asset = (name: string) => Fs.readFileSync(new URL(`../../src/portal/${name}`, import.meta.url), "utf8")

const assetRoute = (name: string, contentType: string) =>
  Route.make(
    "GET",
    `/portal/${name}`,
    Effect.sync(() => {
      const body = asset(name)
      return Effect.sync(() => HttpServerResponse.text(body, { contentType, headers: pageHeaders }))
    }),
    {
      summary: `Portal asset ${name}`,
      tags: ["Portal"],
      security: "public",
      responses: { 200: { description: "The asset", contentType, schema: Schema.String } }
    }
  )

/**
 * `GET /api-keys`: the portal page, with this server's origin in its terminal example.
 *
 * @category routes
 */
export const page = Route.make(
  "GET",
  Pages.apiKeysPath,
  Effect.map(ServiceInfo, (info) => {
    const html = asset("index.html").replaceAll("{{origin}}", Pages.escape(info.publicOrigin))
    return Effect.sync(() => HttpServerResponse.html(html).pipe(HttpServerResponse.setHeaders(pageHeaders)))
  }),
  {
    summary: "Get an API key: the self-service portal",
    description: "Sign in with a wallet or an ADMIN key; see the balance, top up, make keys, watch usage.",
    tags: ["Portal"],
    security: "public",
    responses: { 200: { description: "HTML page", contentType: "text/html", schema: Schema.String } }
  }
)

/** @category routes */
export const script = assetRoute("portal.js", "text/javascript; charset=utf-8")

/** @category routes */
export const stylesheet = assetRoute("portal.css", "text/css; charset=utf-8")
