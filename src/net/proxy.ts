// Per-sandbox HTTP (CONNECT and absolute-URI) and SOCKS5 proxies on unix sockets. The sandbox has no
// route out; a bridge inside it forwards 127.0.0.1:3128/1080 to these sockets, and every connection is
// decided by the sandbox's own NetworkGate and recorded as an event.
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { type Decision, type NetworkEvent, NetworkGate, type NetworkPolicy } from './gate.js'

export const HTTP_PROXY_PORT = 3128
export const SOCKS_PROXY_PORT = 1080

function splitHostPort(target: string, defaultPort: number): { host: string; port: number } | null {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(target) ?? /^([^:]+)(?::(\d+))?$/.exec(target)
  if (!m) return null
  return { host: m[1]!, port: m[2] ? Number(m[2]) : defaultPort }
}

export class NetworkProxy {
  readonly dir: string
  readonly events: NetworkEvent[] = []
  private readonly gate: NetworkGate
  private readonly servers: net.Server[] = []
  private readonly sockets = new Set<net.Socket>()

  constructor(policy: NetworkPolicy) {
    this.gate = new NetworkGate(policy)
    // Only this run's sandbox may connect: the directory stays 0700 (mkdtemp's mode), and `handTo` gives
    // it to the sandbox uid when cordon runs as root.
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-net-'))
    const httpServer = http.createServer((req, res) => void this.forward(req, res))
    httpServer.on(
      'connect',
      (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void this.tunnel(req, socket, head),
    )
    const socksServer = net.createServer((socket) => void this.socks(socket))
    for (const [server, name] of [
      [httpServer, 'http.sock'],
      [socksServer, 'socks.sock'],
    ] as const) {
      server.on('connection', (s: net.Socket) => this.track(s))
      // listen() on a path binds before it returns, so the socket exists before the sandbox starts.
      server.listen(path.join(this.dir, name))
      chmodSync(path.join(this.dir, name), 0o600)
      this.servers.push(server)
    }
  }

  /** The sandbox's own uid, when it has one, owns the directory and its sockets: no other uid gets in. */
  handTo(uid: number, gid: number): void {
    for (const name of ['', 'http.sock', 'socks.sock']) chownSync(path.join(this.dir, name), uid, gid)
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => this.sockets.delete(socket))
  }

  private async decide(host: string, port: number): Promise<Decision> {
    const decision = await this.gate.decide(host, port)
    this.events.push({
      host,
      port,
      allowed: decision.allowed,
      reason: decision.allowed ? `connected to ${decision.address}` : decision.reason,
    })
    return decision
  }

  /** Connect to an allowed address and splice the two sockets together. */
  private connect(
    address: string,
    port: number,
    client: net.Socket,
    onOpen: () => void,
    onFail: () => void,
  ): void {
    const upstream = net.connect({ host: address, port })
    this.track(upstream)
    upstream.once('connect', () => {
      onOpen()
      upstream.pipe(client)
      client.pipe(upstream)
    })
    upstream.once('error', () => (upstream.readyState === 'opening' ? onFail() : client.destroy()))
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => client.destroy())
  }

  private async tunnel(req: http.IncomingMessage, client: net.Socket, head: Buffer): Promise<void> {
    const target = splitHostPort(req.url ?? '', 443)
    const decision = target ? await this.decide(target.host, target.port) : null
    if (!target || !decision?.allowed) {
      const reason = decision && !decision.allowed ? decision.reason : 'bad target'
      client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\ncordon: ${reason}\n`)
      return
    }
    this.connect(
      decision.address,
      target.port,
      client,
      () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
        if (head.length) client.unshift(head)
      },
      () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'),
    )
  }

  /** Plain http:// requests through the proxy (absolute URI). */
  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let url: URL
    try {
      url = new URL(req.url ?? '')
    } catch {
      res.writeHead(400).end('cordon: the proxy needs an absolute URL\n')
      return
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400).end('cordon: only http:// is forwarded; use CONNECT for https\n')
      return
    }
    const port = url.port ? Number(url.port) : 80
    const decision = await this.decide(url.hostname, port)
    if (!decision.allowed) {
      res.writeHead(403, { 'content-type': 'text/plain' }).end(`cordon: ${decision.reason}\n`)
      return
    }
    const upstream = http.request(
      {
        host: decision.address,
        port,
        method: req.method,
        path: url.pathname + url.search,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()))
    req.pipe(upstream)
  }

  /** SOCKS5, no authentication, CONNECT only (RFC 1928). */
  private async socks(client: net.Socket): Promise<void> {
    let buffer = Buffer.alloc(0)
    let wake: (() => void) | null = null
    let ended = false
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      wake?.()
    }
    client.on('data', onData)
    client.once('close', () => {
      ended = true
      wake?.()
    })
    const need = async (n: number): Promise<Buffer> => {
      while (buffer.length < n) {
        if (ended) throw new Error('closed')
        await new Promise<void>((resolve) => {
          wake = resolve
        })
      }
      const out = buffer.subarray(0, n)
      buffer = buffer.subarray(n)
      return out
    }
    const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0])
    try {
      const [version, methods = 0] = await need(2)
      if (version !== 5) return void client.destroy()
      await need(methods)
      client.write(Buffer.from([5, 0]))
      const [, command, , type] = await need(4)
      let host: string
      if (type === 1) host = [...(await need(4))].join('.')
      else if (type === 3) host = (await need((await need(1))[0]!)).toString('latin1')
      else if (type === 4) host = ((await need(16)).toString('hex').match(/.{4}/g) ?? []).join(':')
      else return void client.end(reply(8))
      const port = (await need(2)).readUInt16BE(0)
      if (command !== 1) return void client.end(reply(7))
      const decision = await this.decide(host, port)
      if (!decision.allowed) return void client.end(reply(2))
      client.off('data', onData)
      client.pause()
      // Bytes the client sent after its request belong to the tunnel.
      if (buffer.length) client.unshift(buffer)
      this.connect(
        decision.address,
        port,
        client,
        () => client.write(reply(0)),
        () => client.end(reply(5)),
      )
    } catch {
      client.destroy()
    }
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))))
    rmSync(this.dir, { recursive: true, force: true })
  }
}
