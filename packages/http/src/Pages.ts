/**
 * The pages the 402 bodies link to: `GET /docs/authentication` (API keys and wallet sign-in) and
 * `GET /docs/wallets` (paying with a wallet over x402); `GET /api-keys`, where a caller gets a key,
 * is the portal (`routes/Portal.ts`). Short, self-contained HTML with no request outside the
 * server, so a client that follows a link from a 402 lands on something that explains the next
 * step.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Route from "./Route.ts"

/** @category constants */
export const apiKeysPath = "/api-keys" as const

/** @category constants */
export const authenticationPath = "/docs/authentication" as const

/** @category constants */
export const walletsPath = "/docs/wallets" as const

/**
 * Text as HTML text or a quoted attribute value.
 *
 * @category rendering
 */
export const escape = (text: string): string =>
  text.replace(/[&<>"]/gu, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" })[c]!)

/**
 * A page: the title, then paragraphs of trusted HTML (ours), with the links every page shares.
 *
 * @category rendering
 */
export const render = (title: string, body: ReadonlyArray<string>): string =>
  `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${escape(title)}</title>
    <style>
      body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; color: #1d1d1f; }
      code, pre { font-family: ui-monospace, monospace; background: #f3f3f5; border-radius: 4px; padding: 0 .2em; }
      pre { padding: .75em; overflow-x: auto; }
      nav a { margin-right: 1em; }
    </style>
  </head>
  <body>
    <nav><a href="/docs">API reference</a><a href="${apiKeysPath}">API keys</a><a href="${authenticationPath}">Authentication</a><a href="${walletsPath}">Wallets</a></nav>
    <h1>${escape(title)}</h1>
    ${body.join("\n    ")}
  </body>
</html>
`

const authentication = render("Authentication", [
  "<p>Every paid call needs one of two credentials:</p>",
  "<ul>",
  `<li><strong>An API key</strong>: <code>Authorization: Bearer &lt;key&gt;</code>. <a href="${apiKeysPath}">How to get one</a>.</li>`,
  `<li><strong>A wallet</strong>: <code>SIGN-IN-WITH-X: &lt;base64 JSON&gt;</code> (or <code>X-Sign-In-With-X</code>), a sign-in message signed by the wallet (EIP-4361 on EVM, SIWS on Solana) bound to this server's origin, with the nonce and time window of the challenge in the 402. The call is charged to the wallet's prepaid credit: see <a href="${walletsPath}">wallets</a>.</li>`,
  "</ul>",
  "<p>A paid call without credentials gets a 402 whose body lists both options (<code>authOptions</code>) and a fresh sign-in challenge (<code>extensions[\"sign-in-with-x\"]</code>). Bad credentials get a 401, a key without the right (an INFERENCE key on key management) a 403. Too many failed requests from one caller get a 429 with <code>Retry-After</code>.</p>"
])

const wallets = render("Paying with a wallet (x402)", [
  "<p>A wallet buys prepaid USDC credit with an <a href=\"/api/v1/openapi.json\">x402</a> payment, then signs in on each call; the call is charged to that credit.</p>",
  "<ol>",
  "<li><code>POST /api/v1/x402/top-up</code> (optionally <code>?amountUsd=12.5</code>) without a payment: a 402 whose <code>accepts</code> lists what to pay (USDC on Base, and on Solana when offered). An empty <code>accepts</code> means this server takes no wallet payments; the top-up then answers 503.</li>",
  "<li>Sign a payment for exactly one entry of <code>accepts</code> and send the same request again with it in the <code>PAYMENT-SIGNATURE</code> header. The answer has the new balance and a <code>PAYMENT-RESPONSE</code> header.</li>",
  "<li>Call the API with <code>SIGN-IN-WITH-X</code> (see <a href=\"" + authenticationPath +
  "\">authentication</a>). When the credit runs short the 402 says how much to top up.</li>",
  "</ol>",
  "<p><code>GET /api/v1/x402/balance/{walletAddress}</code> reads a wallet's credit. The official clients (<code>@x402/fetch</code>, <code>@x402/evm</code>, <code>@x402/extensions</code>) do all of this.</p>"
])

const page = (path: `/${string}`, summary: string, html: string): Route.Route<never> =>
  Route.make("GET", path, Effect.succeed(Effect.sync(() => HttpServerResponse.html(html))), {
    summary,
    tags: ["Documentation"],
    security: "public",
    responses: { 200: { description: "HTML page", contentType: "text/html", schema: Schema.String } }
  })

/**
 * The two pages as routes.
 *
 * @category routes
 */
export const routes: ReadonlyArray<Route.Route<never>> = [
  page(authenticationPath, "How to authenticate: API keys and wallet sign-in", authentication),
  page(walletsPath, "How to pay with a wallet (x402)", wallets)
]
