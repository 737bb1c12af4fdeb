/**
 * A TCP port nobody listens on right now, for servers that cannot pick their own.
 *
 * @since 0.1.0
 */
import * as Net from "node:net"

/** @category constructors */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
