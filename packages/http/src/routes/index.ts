/**
 * Every route of the public API, in one list: `App.layer` registers them, answers 405 for their
 * paths, and the OpenAPI test checks each is documented.
 *
 * @since 0.1.0
 */
import * as Portal from "../portal/Portal.ts"
import type * as Route from "../Route.ts"
import * as ApiKeys from "./ApiKeys.ts"
import * as AudioQueue from "./AudioQueue.ts"
import * as AudioSpeech from "./AudioSpeech.ts"
import * as AudioTranscriptions from "./AudioTranscriptions.ts"
import * as AudioVoices from "./AudioVoices.ts"
import * as AuditLog from "./AuditLog.ts"
import * as Augment from "./Augment.ts"
import * as Billing from "./Billing.ts"
import * as Characters from "./Characters.ts"
import * as Chat from "./Chat.ts"
import * as Embeddings from "./Embeddings.ts"
import * as Generation from "./Generation.ts"
import * as Image from "./Image.ts"
import * as ImageGenerations from "./ImageGenerations.ts"
import * as ImageOperations from "./ImageOperations.ts"
import * as Messages from "./Messages.ts"
import * as Models from "./Models.ts"
import * as Networks from "./Networks.ts"
import * as RateLimits from "./RateLimits.ts"
import * as Responses from "./Responses.ts"
import * as Rpc from "./Rpc.ts"
import * as TextParser from "./TextParser.ts"
import * as Video from "./Video.ts"
import * as WalletTransactions from "./WalletTransactions.ts"
import * as Webhooks from "./Webhooks.ts"
import * as X402 from "./X402.ts"

const routes = [
  Networks.route,
  Rpc.route,
  ...Models.routes,
  Image.route,
  ImageGenerations.route,
  ...ImageOperations.routes,
  Chat.route,
  Responses.route,
  Generation.route,
  ...Messages.routes,
  ...Characters.routes,
  Embeddings.route,
  AudioSpeech.route,
  AudioTranscriptions.route,
  AudioVoices.route,
  ...AudioQueue.routes,
  ...Video.routes,
  TextParser.route,
  ...Augment.routes,
  X402.topUp,
  X402.topUpGuide,
  X402.balance,
  ...WalletTransactions.routes,
  ...Billing.routes,
  ...ApiKeys.routes,
  ...AuditLog.routes,
  ...RateLimits.routes,
  ...Portal.routes,
  ...Webhooks.routes
] as const

/** What a route needs, so that `all` needs the union of every route's services. */
type Requirements<R> = R extends Route.Route<infer S> ? S : never

/** @category routes */
export const all: ReadonlyArray<Route.Route<Requirements<(typeof routes)[number]>>> = routes
