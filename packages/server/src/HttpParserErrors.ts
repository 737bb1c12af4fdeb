/**
 * Requests node's HTTP parser refuses before any handler sees them (headers over
 * `--max-http-header-size`, a malformed request line, a bad chunk) are answered like every other
 * error, with a StandardError JSON body and an `x-request-id`, instead of node's bare status line.
 * A version the parser does not know (`HTTP/1.2`, `HTTP/3.0`) is a 505, like one it lets through to
 * the application (`HTTP/2.0`, see `@tollgate/http` `App`).
 *
 * **Details**
 *
 * This is node's `clientError` event, where the socket is all there is: the response is written on
 * it, then the connection is closed, as node itself does.
 *
 * @since 0.1.0
 */
import * as Crypto from "node:crypto"
import type * as Net from "node:net"

const refusals: Readonly<Record<string, readonly [number, string, string]>> = {
  HPE_HEADER_OVERFLOW: [431, "Request Header Fields Too Large", "The request headers are too large"],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, "Payload Too Large", "The chunk extensions are too large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "Request Timeout", "The request was not received in time"],
  HPE_INVALID_VERSION: [505, "HTTP Version Not Supported", "The HTTP version is not supported; use HTTP/1.1"]
}
const badRequest = [400, "Bad Request", "The request is not valid HTTP"] as const

/**
 * The raw response of a parser error.
 *
 * @category rendering
 */
export const response = (code: string | undefined): string => {
  const [status, reason, message] = (code === undefined ? undefined : refusals[code]) ?? badRequest
  const body = JSON.stringify({ error: message })
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
    `x-request-id: ${Crypto.randomUUID()}\r\nconnection: close\r\n\r\n${body}`
}

/**
 * Answers a parser error on its socket, unless a response has already started on it or the socket
 * can no longer be written (node's own condition), in which case it is only closed.
 *
 * @category handlers
 */
export const answer = (error: NodeJS.ErrnoException, socket: Net.Socket): void => {
  const started = (socket as Net.Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true
  if (error.code === "ECONNRESET" || !socket.writable || started) {
    socket.destroy()
    return
  }
  socket.end(response(error.code))
}
