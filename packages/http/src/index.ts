/**
 * @tollgate/http: the HTTP assembly of tollgate. Routes, global middleware, error rendering and
 * the embedding adapters.
 *
 * @since 0.1.0
 */
export * as App from "./App.ts"
export * as Authenticate from "./Authenticate.ts"
export * as ChannelClaims from "./ChannelClaims.ts"
export * as ClientAddress from "./ClientAddress.ts"
export * as Endpoint from "./Endpoint.ts"
export * as ErrorResponse from "./ErrorResponse.ts"
export * as Handlers from "./Handlers.ts"
export * as HoldSweeper from "./HoldSweeper.ts"
export * as Mcp from "./Mcp.ts"
export * as McpTools from "./McpTools.ts"
export * as Metered from "./Metered.ts"
export * as Observability from "./Observability.ts"
export * as OwnEndpoint from "./OwnEndpoint.ts"
export * as Pages from "./Pages.ts"
export * as PortalSession from "./portal/Session.ts"
export * as RequestBody from "./RequestBody.ts"
export * as RequestContext from "./RequestContext.ts"
export * as RequestLog from "./RequestLog.ts"
export * as RequestQuery from "./RequestQuery.ts"
export * as Route from "./Route.ts"
export * as ServiceInfo from "./ServiceInfo.ts"
export * as ToolPrice from "./ToolPrice.ts"
export * as UploadBudget from "./UploadBudget.ts"
