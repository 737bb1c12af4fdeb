/**
 * Document text extraction for the text-parser endpoint.
 *
 * @since 0.1.0
 */
export * as DocumentError from "./DocumentError.ts"
export * as DocumentExtractor from "./DocumentExtractor.ts"
export * as NumberFormat from "./NumberFormat.ts"
export * as Sniff from "./Sniff.ts"
export * as Text from "./Text.ts"
export * as Tokens from "./Tokens.ts"
export * as WorkerPool from "./WorkerPool.ts"
