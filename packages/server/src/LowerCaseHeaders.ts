/**
 * A `node:http` response whose header block names every header in lower case, as the spec writes
 * them. Node writes the headers it adds on its own (`Date`, `Connection`, `Keep-Alive`,
 * `Content-Length`, `Transfer-Encoding`) in title case; the routes' own headers are lower case
 * already. Pass it as the `ServerResponse` of `Http.createServer`.
 *
 * Details: node keeps the block it will send as one string, built by `writeHead` (which an implicit
 * header calls too) and written with the first chunk of the body. The block is rewritten there, by
 * name, rather than replacing node's headers with our own: node decides `Connection`,
 * `Keep-Alive` and the body's framing from the connection's state, which is its to know.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"

const nodeHeaders = /\r\n(Date|Connection|Keep-Alive|Content-Length|Transfer-Encoding):/gu

const lower = (_match: string, name: string) => `\r\n${name.toLowerCase()}:`

/**
 * @category constructors
 */
export class ServerResponse<Request extends Http.IncomingMessage = Http.IncomingMessage> extends Http.ServerResponse<Request> {
  override writeHead(
    statusCode: number,
    messageOrHeaders?: string | Http.OutgoingHttpHeaders | Array<Http.OutgoingHttpHeader>,
    headers?: Http.OutgoingHttpHeaders | Array<Http.OutgoingHttpHeader>
  ): this {
    super.writeHead(statusCode, messageOrHeaders as string, headers)
    const written = this as unknown as { _header: string | null }
    if (typeof written._header === "string") written._header = written._header.replace(nodeHeaders, lower)
    return this
  }
}
