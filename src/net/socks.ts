// The SOCKS5 proxy's side of a connection (RFC 1928: no authentication, CONNECT only). Every request is
// answered at once with its reply code and is an event: a refusal by the policy is 0x02 ("not allowed by
// ruleset"), a name the policy allows that does not resolve 0x04 ("host unreachable"), an address that
// does not answer 0x03-0x05 as the connect failed; a request that is not one it serves 0x07 or 0x08, and
// one that is not SOCKS5 at all is recorded and closed.
import type net from 'node:net'
import type { ProxyEvent, RefusalCode } from './events.js'
import type { Decision } from './gate.js'
import { formatIPv6, type Host, ipFromBytes, parseHost } from './host.js'
import { readExactly, refuse, SOCKS, socksFailure } from './wire.js'

/** What the SOCKS5 side needs of its proxy (NetworkProxy). */
export interface SocksProxy {
  endHandshake(socket: net.Socket): void
  refused(code: RefusalCode, reason: string, raw?: string, port?: number): void
  decide(
    host: Host | null,
    raw: string,
    port: number,
  ): Promise<{ decision: Decision; event: ProxyEvent | null }>
  connect(
    address: string,
    port: number,
    client: net.Socket,
    event: ProxyEvent | null,
    onOpen: () => void,
    onFail: (code: string | undefined) => void,
  ): void
}

/** A SOCKS5 request is at most 262 bytes; more waiting beyond it before the reply is not a client. */
export const SOCKS_EARLY_BYTES = 4096

const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0])

/** Serve one connection of this run (its token already read) on `proxy`. */
export async function serveSocks(proxy: SocksProxy, client: net.Socket): Promise<void> {
  const need = (n: number) => (n === 0 ? Promise.resolve(Buffer.alloc(0)) : readExactly(client, n))
  /** Refused before the request named a host: recorded, and closed with `answer` if there is one. */
  const early = (code: RefusalCode, reason: string, answer?: Buffer) => {
    proxy.endHandshake(client)
    proxy.refused(code, reason)
    if (answer) refuse(client, answer)
    else client.destroy()
  }
  const greeting = await need(2)
  if (!greeting) return void client.destroy()
  if (greeting[0] !== 5) return early('malformed-request', `not SOCKS5 (version byte ${greeting[0]})`)
  const methods = await need(greeting[1]!)
  if (!methods) return void client.destroy()
  if (!methods.includes(0))
    return early(
      'unsupported',
      'no SOCKS5 method cordon serves (only "no authentication")',
      Buffer.from([5, 0xff]),
    )
  client.write(Buffer.from([5, 0]))
  const head = await need(4)
  if (!head) return void client.destroy()
  if (head[0] !== 5) return early('malformed-request', `not a SOCKS5 request (version byte ${head[0]})`)
  const [, command, , type] = head
  let host: Host | null = null
  let raw = ''
  if (type === 1 || type === 4) {
    const bytes = await need(type === 1 ? 4 : 16)
    if (!bytes) return void client.destroy()
    host = ipFromBytes(bytes)
    // As sent: a v4-mapped address is shown as the IPv6 address it was (the event's reason reads it).
    raw = type === 1 ? host.text : formatIPv6(bytes)
  } else if (type === 3) {
    const length = await need(1)
    const name = length && (await need(length[0]!))
    if (!name) return void client.destroy()
    // Bytes, not text: a NUL or a byte above 0x7f stays what it is, and the parser refuses it.
    raw = name.toString('latin1')
    host = parseHost(raw)
  } else {
    return early(
      'unsupported',
      `SOCKS5 address type ${type} is not supported`,
      reply(SOCKS.addressUnsupported),
    )
  }
  const portBytes = await need(2)
  if (!portBytes) return void client.destroy()
  const port = portBytes.readUInt16BE(0)
  proxy.endHandshake(client)
  if (command !== 1) {
    proxy.refused('unsupported', `SOCKS5 command ${command} is not supported (CONNECT only)`, raw, port)
    return refuse(client, reply(SOCKS.commandUnsupported))
  }
  if (client.readableLength > SOCKS_EARLY_BYTES) {
    proxy.refused('limit', `sent more than ${SOCKS_EARLY_BYTES} bytes before the reply`, raw, port)
    return void client.destroy()
  }
  if (port === 0) {
    proxy.refused('malformed-request', 'port 0', raw, port)
    return refuse(client, reply(SOCKS.notAllowed))
  }
  const { decision, event } = await proxy.decide(host, raw, port)
  if (!decision.allowed) {
    const code = decision.code === 'unresolvable' ? SOCKS.hostUnreachable : SOCKS.notAllowed
    return refuse(client, reply(code))
  }
  // What the client sent after its request (at most a stream's high-water mark) goes through the tunnel.
  proxy.connect(
    decision.address,
    port,
    client,
    event,
    () => client.write(reply(SOCKS.ok)),
    (code) => refuse(client, reply(socksFailure(code))),
  )
}
