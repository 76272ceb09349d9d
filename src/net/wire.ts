// Reading a request off a proxy connection exactly, and answering a refusal: shared by both proxies.
import type net from 'node:net'
import type { Duplex } from 'node:stream'
import type { ConnectionCode, RefusalCode } from './events.js'

/** How long a refusal may take to reach the client before its socket is destroyed anyway. */
const REFUSAL_FLUSH_MS = 5000

/** Exactly `n` bytes from a paused socket, or null when it ends first. Reads nothing beyond them. */
export function readExactly(socket: net.Socket, n: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const finish = (chunk: Buffer | null) => {
      socket.off('readable', attempt)
      socket.off('close', closed)
      resolve(chunk)
    }
    const closed = () => finish(null)
    function attempt() {
      const chunk = socket.read(n) as Buffer | null
      if (chunk) finish(chunk.length === n ? chunk : null)
      else if (socket.readableEnded || socket.destroyed) finish(null)
    }
    socket.on('readable', attempt)
    socket.once('close', closed)
    attempt()
  })
}

/** Send a refusal and stop reading: nothing more the client sends is looked at, and the socket goes. */
export function refuse(socket: Duplex, answer: string | Buffer): void {
  socket.removeAllListeners('readable')
  socket.removeAllListeners('data')
  socket.pause()
  socket.end(answer, () => socket.destroy())
  setTimeout(() => socket.destroy(), REFUSAL_FLUSH_MS).unref()
}

/** An HTTP answer that ends its connection, with `text` (one line) as its body. */
export function httpAnswer(status: number, title: string, text: string): string {
  const body = `${text}\n`
  return (
    `HTTP/1.1 ${status} ${title}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
    `connection: close\r\n\r\n${body}`
  )
}

/** What the proxy answers a refusal with on HTTP: the policy's 403, a malformed request's 400... */
export const HTTP_STATUS: Record<RefusalCode | Exclude<ConnectionCode, 'connected'>, [number, string]> = {
  'malformed-host': [403, 'Forbidden'],
  'malformed-request': [400, 'Bad Request'],
  unsupported: [400, 'Bad Request'],
  'not-allowed': [403, 'Forbidden'],
  denied: [403, 'Forbidden'],
  loopback: [403, 'Forbidden'],
  metadata: [403, 'Forbidden'],
  private: [403, 'Forbidden'],
  limit: [503, 'Service Unavailable'],
  timeout: [408, 'Request Timeout'],
  // Not the policy's: the name or the address it allowed failed.
  unresolvable: [502, 'Bad Gateway'],
  unreachable: [502, 'Bad Gateway'],
}

/** SOCKS5 reply codes (RFC 1928 6). */
export const SOCKS = {
  ok: 0,
  failure: 1,
  notAllowed: 2,
  networkUnreachable: 3,
  hostUnreachable: 4,
  refused: 5,
  commandUnsupported: 7,
  addressUnsupported: 8,
} as const

/** The SOCKS5 reply for a connection that could not be made (`code`: the error's, e.g. ECONNREFUSED). */
export function socksFailure(code: string | undefined): number {
  if (code === 'ECONNREFUSED') return SOCKS.refused
  if (code === 'ENETUNREACH') return SOCKS.networkUnreachable
  if (code === 'EHOSTUNREACH' || code === 'ETIMEDOUT' || code === 'EHOSTDOWN') return SOCKS.hostUnreachable
  return SOCKS.failure
}
