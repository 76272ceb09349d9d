// Per-sandbox HTTP (CONNECT and absolute-URI) and SOCKS5 proxies on unix sockets. The sandbox has no
// route out; cordon's bridge inside it (native/bridge.c) forwards 127.0.0.1:3128/1080 to these sockets,
// and every connection is decided by the sandbox's own NetworkGate and recorded as an event.
//
// A proxy serves only its run: not as root every sandbox runs as cordon's own uid, so the socket's file
// mode cannot tell runs apart. Each connection presents this run's secret token first (the bridge got it
// on an inherited pipe); one without it is dropped and is no event of this run.
//
// Everything a sandbox can make the host hold is bounded: connections (MAX_CONNECTIONS), what is read
// before a decision (the token and a SOCKS5 request are read exactly, never more than a stream's
// high-water mark is buffered), silent clients (a handshake deadline), pipelined HTTP requests (one
// forwarded at a time, MAX_PIPELINED waiting, the parser fed only while there is room: metered.ts),
// name lookups (MAX_LOOKUPS), and the events kept (MAX_EVENTS, the rest counted in `dropped`).
import { chmodSync, chownSync, lstatSync, mkdtempSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { LAUNCHER_PATH } from '../host/native.js'
import { sweepStaleDirs } from '../host/scratch.js'
import { lazy } from '../lazy.js'
import { type Decision, type Lookup, type NetworkEvent, NetworkGate } from './gate.js'
import { type Host, ipFromBytes, parseHost, parseUriHost, showHost } from './host.js'
import { Metered } from './metered.js'
import type { NetworkPolicy } from './policy.js'

/** The HTTP proxy's parser, loaded when an allowlist first starts one. */
const http = lazy<typeof import('node:http')>('node:http')
/** The token's source and check, loaded when an allowlist first starts a proxy. */
const crypto = lazy<typeof import('node:crypto')>('node:crypto')

export const HTTP_PROXY_PORT = 3128
export const SOCKS_PROXY_PORT = 1080
/** The token line every connection starts with: 64 hex digits and a newline (native/bridge.c agrees). */
export const TOKEN_LINE_BYTES = 65
/** A proxy's socket directory under TMPDIR: `<prefix><owner pid>-XXXXXX`. */
export const PROXY_DIR_PREFIX = 'cordon-net-'
/** The empty file in a run's socket directory that the bridge binary is bound over (see bwrap.ts). */
export const BRIDGE_MOUNT_POINT = 'bridge'
const SOCKETS = { http: 'http.sock', socks: 'socks.sock' } as const

export interface ProxyLimits {
  /** Events kept in `events`; later ones are only counted (`dropped`). */
  maxEvents: number
  /** Connections of this run open at once (the bridge holds fewer; more is someone else with the token). */
  maxConnections: number
  /** From accept until the request is read (token, SOCKS5 handshake, HTTP headers). */
  handshakeMs: number
}

export const DEFAULT_PROXY_LIMITS: ProxyLimits = { maxEvents: 1000, maxConnections: 96, handshakeMs: 10_000 }
/**
 * Connections per socket in all, those still to show the token included (each of these holds at most a
 * stream's high-water mark, and goes at the handshake deadline).
 */
const MAX_UNAUTHENTICATED = 256
/** A SOCKS5 request is at most 262 bytes; more waiting beyond it before the reply is not a client. */
const SOCKS_EARLY_BYTES = 4096
/**
 * Requests of one HTTP connection waiting for their turn (one is forwarded at a time): a client that
 * pipelines more is answered 503 in its turn and the connection closes after that.
 */
export const MAX_PIPELINED = 32
/** How long a refusal may take to reach the client before its socket is destroyed anyway. */
const REFUSAL_FLUSH_MS = 5000

/** Exactly `n` bytes from a paused socket, or null when it ends first. Reads nothing beyond them. */
function readExactly(socket: net.Socket, n: number): Promise<Buffer | null> {
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
function refuse(socket: net.Socket, answer: string | Buffer): void {
  socket.removeAllListeners('readable')
  socket.removeAllListeners('data')
  socket.pause()
  socket.end(answer, () => socket.destroy())
  setTimeout(() => socket.destroy(), REFUSAL_FLUSH_MS).unref()
}

/** `host:port` of a CONNECT request (authority form; an IPv6 host in brackets). */
function splitTarget(target: string): { raw: string; port: number | null } {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(target)
  if (!m) return { raw: target, port: null }
  const port = m[2] === undefined ? 443 : Number(m[2])
  return { raw: m[1]!, port: port >= 1 && port <= 65535 ? port : null }
}

/**
 * Headers without those of one hop (RFC 9110 7.6.1): the upstream's `connection: close` must not end
 * the client's connection with its pipelined requests, nor the client's keep-alive the upstream's.
 * The body's framing (content-length, transfer-encoding) stays: Node checks it on both sides.
 */
function hopByHop<T extends Record<string, string | string[] | undefined>>(headers: T): T {
  const { connection: _c, 'keep-alive': _k, 'proxy-connection': _p, ...rest } = headers
  return rest as T
}

/** The connection a request came on: the HTTP server is only ever given Metered streams (serveHttp). */
const meteredOf = (req: IncomingMessage) => req.socket as unknown as Metered

export class NetworkProxy {
  readonly dir: string
  /** This run's token line, written to the bridge on TOKEN_FD; never in an argv, a file or an environment. */
  readonly token: Buffer
  readonly events: NetworkEvent[] = []
  /** Events not kept in `events` (past maxEvents). */
  dropped = 0
  private readonly gate: NetworkGate
  private readonly limits: ProxyLimits
  private readonly httpServer: Server
  private readonly servers: net.Server[] = []
  private readonly sockets = new Set<net.Socket>()
  private readonly deadlines = new WeakMap<net.Socket, NodeJS.Timeout>()
  /** Per HTTP connection: whether a request is being forwarded, and those waiting for their turn. */
  private readonly turns = new WeakMap<Metered, { busy: boolean; waiting: (() => void)[]; over: boolean }>()
  private open = 0
  /** The directory as made: close() touches it only while its name still leads there. */
  private readonly dirId: { dev: number; ino: number }

  /** `lookup`: how names are resolved (the system's resolver unless a test says otherwise). */
  constructor(policy: NetworkPolicy, limits: Partial<ProxyLimits> = {}, lookup?: Lookup) {
    this.gate = new NetworkGate(policy, lookup)
    this.limits = { ...DEFAULT_PROXY_LIMITS, ...limits }
    this.token = Buffer.from(`${crypto().randomBytes(32).toString('hex')}\n`)
    // As root the sockets go to the sandbox uid (`handTo`), so other sandbox uids cannot even connect.
    // Named after this process, so the next cordon removes it if this one dies mid-run.
    sweepStaleDirs(LAUNCHER_PATH, os.tmpdir(), PROXY_DIR_PREFIX)
    this.dir = mkdtempSync(path.join(os.tmpdir(), `${PROXY_DIR_PREFIX}${process.pid}-`))
    this.dirId = lstatSync(this.dir)
    writeFileSync(path.join(this.dir, BRIDGE_MOUNT_POINT), '', { mode: 0o444, flag: 'wx' })
    this.httpServer = http().createServer(
      { headersTimeout: this.limits.handshakeMs, requestTimeout: 300_000 },
      (req, res) => this.inTurn(req, res),
    )
    // A tunnel is the connection itself again, with what the parser had not consumed put back in front.
    this.httpServer.on('connect', (req: IncomingMessage, socket: Metered, head: Buffer) => {
      const client = socket.detach(head)
      this.tunnel(req, client).catch(() => client.destroy())
    })
    // Connections reach the HTTP server by hand (after their token), never by its own listen(); its
    // header and request timeouts are checked only once it has seen 'listening'.
    this.httpServer.emit('listening')
    for (const [name, serve] of [
      [SOCKETS.http, (s: net.Socket) => this.serveHttp(s)],
      [SOCKETS.socks, (s: net.Socket) => this.socks(s).catch(() => s.destroy())],
    ] as const) {
      const server = net.createServer({ pauseOnConnect: true }, (s) => {
        this.admit(s, serve).catch(() => s.destroy())
      })
      server.maxConnections = MAX_UNAUTHENTICATED
      // listen() on a path binds before it returns, so the socket exists before the sandbox starts.
      server.listen(path.join(this.dir, name))
      chmodSync(path.join(this.dir, name), 0o600)
      this.servers.push(server)
    }
  }

  /**
   * The sandbox's own uid, when it has one, owns the sockets (0600): no other uid can connect. The
   * directory stays root's (0711, searchable): a sandbox that can write its parent (`--writable /tmp`)
   * could otherwise move it away and put a link in its place, and root's unlinks in close() would follow.
   */
  handTo(uid: number, gid: number): void {
    chmodSync(this.dir, 0o711)
    for (const name of [SOCKETS.http, SOCKETS.socks]) chownSync(path.join(this.dir, name), uid, gid)
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => this.sockets.delete(socket))
  }

  private record(event: NetworkEvent): void {
    if (this.events.length < this.limits.maxEvents) this.events.push(event)
    else this.dropped++
  }

  private endHandshake(socket: net.Socket): void {
    clearTimeout(this.deadlines.get(socket))
  }

  /** The token first, compared in constant time; then the connection is this run's, within its cap. */
  private async admit(socket: net.Socket, serve: (s: net.Socket) => void): Promise<void> {
    this.track(socket)
    const deadline = setTimeout(() => socket.destroy(), this.limits.handshakeMs).unref()
    this.deadlines.set(socket, deadline)
    socket.once('close', () => clearTimeout(deadline))
    const line = await readExactly(socket, TOKEN_LINE_BYTES)
    if (!line || !crypto().timingSafeEqual(line, this.token)) return void socket.destroy()
    if (this.open >= this.limits.maxConnections) {
      this.record({
        host: '',
        port: 0,
        allowed: false,
        reason: `more than ${this.limits.maxConnections} connections at once`,
      })
      return void socket.destroy()
    }
    this.open++
    socket.once('close', () => this.open--)
    serve(socket)
  }

  /** The HTTP server reads the connection through a Metered stream: a request parsed only with room. */
  private serveHttp(raw: net.Socket): void {
    const metered: Metered = new Metered(raw, () => {
      const state = this.turns.get(metered)
      return !state || (!state.over && state.waiting.length < MAX_PIPELINED)
    })
    this.httpServer.emit('connection', metered)
  }

  /** Decide and record; a host that did not parse is refused here, shown as the sandbox sent it. */
  private async decide(host: Host | null, raw: string, port: number): Promise<Decision> {
    const decision: Decision = host
      ? await this.gate.decide(host, port)
      : { allowed: false, reason: 'not a host name or IP address' }
    this.record({
      host: host ? host.text : showHost(raw),
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
    // Gone while its host was decided: no connection out that nothing would ever close.
    if (client.destroyed) return
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

  private async tunnel(req: IncomingMessage, client: net.Socket): Promise<void> {
    this.endHandshake(client)
    const target = splitTarget(req.url ?? '')
    const decision =
      target.port === null
        ? await this.decide(null, req.url ?? '', 0)
        : await this.decide(parseUriHost(target.raw), target.raw, target.port)
    if (!decision.allowed) {
      refuse(client, `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\ncordon: ${decision.reason}\n`)
      return
    }
    this.connect(
      decision.address,
      target.port!,
      client,
      () => client.write('HTTP/1.1 200 Connection Established\r\n\r\n'),
      () => refuse(client, 'HTTP/1.1 502 Bad Gateway\r\n\r\n'),
    )
  }

  /**
   * Node's parser hands over every pipelined request it is given, each of which would hold its objects and
   * an upstream connection on the host: here they take turns and a few wait (the parser is given no more
   * while MAX_PIPELINED wait: see Metered). One piece can hold more: past the limit the connection ends
   * with a 503 in its turn, and what was parsed after it is dropped unanswered.
   */
  private inTurn(req: IncomingMessage, res: ServerResponse): void {
    const socket = meteredOf(req)
    const state = this.turns.get(socket) ?? { busy: false, waiting: [], over: false }
    this.turns.set(socket, state)
    // Parsed after the 503 (in the same piece; the parser gets no more): never started nor answered, it
    // goes with the connection, which closes after the 503.
    if (state.over) return
    const run = () => {
      state.busy = true
      let done = false
      const next = () => {
        if (done) return
        done = true
        state.busy = false
        if (socket.destroyed) state.waiting.length = 0
        else state.waiting.shift()?.()
        // One fewer waits: the parser may have another request.
        socket.feed()
      }
      res.once('finish', next)
      res.once('close', next)
      // A handler that throws ends its connection, never the host (an unhandled rejection would).
      this.forward(req, res).catch(() => res.destroy())
    }
    if (!state.busy) return void run()
    if (state.waiting.length < MAX_PIPELINED) return void state.waiting.push(run)
    state.over = true
    const reason = `more than ${MAX_PIPELINED} requests waiting on one connection`
    this.record({ host: '', port: 0, allowed: false, reason })
    res.setHeader('connection', 'close')
    res.writeHead(503, { 'content-type': 'text/plain' }).end(`cordon: ${reason}\n`)
  }

  /** Plain http:// requests through the proxy (absolute URI). */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.endHandshake(meteredOf(req).raw)
    // A refused request whose body is still coming closes the connection rather than read that body.
    const answer = (status: number, text: string) => {
      if (!req.complete) res.setHeader('connection', 'close')
      res.writeHead(status, { 'content-type': 'text/plain' }).end(text)
    }
    let url: URL
    try {
      url = new URL(req.url ?? '')
    } catch {
      return answer(400, 'cordon: the proxy needs an absolute URL\n')
    }
    if (url.protocol !== 'http:')
      return answer(400, 'cordon: only http:// is forwarded; use CONNECT for https\n')
    const port = url.port ? Number(url.port) : 80
    // The URL parser has canonicalised the host already (0x7f.1 is 127.0.0.1); it is parsed again all the same.
    const decision = await this.decide(parseUriHost(url.hostname), url.hostname, port)
    if (!decision.allowed) return answer(403, `cordon: ${decision.reason}\n`)
    if (req.socket.destroyed) return
    const upstream = http().request(
      {
        host: decision.address,
        port,
        method: req.method,
        path: url.pathname + url.search,
        // The Host header names the host that was allowed, not another one served at the same address.
        headers: { ...hopByHop(req.headers), host: url.host },
        // A connection of its own: never one pooled with another run's.
        agent: false,
      },
      (reply) => {
        res.writeHead(reply.statusCode ?? 502, hopByHop(reply.headers))
        reply.pipe(res)
      },
    )
    upstream.on('socket', (s) => this.track(s))
    upstream.on('error', () => (res.headersSent ? res.destroy() : answer(502, 'cordon: bad gateway\n')))
    res.once('close', () => upstream.destroy())
    req.pipe(upstream)
  }

  /** SOCKS5, no authentication, CONNECT only (RFC 1928). */
  private async socks(client: net.Socket): Promise<void> {
    const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0])
    const need = (n: number) => (n === 0 ? Promise.resolve(Buffer.alloc(0)) : readExactly(client, n))
    const greeting = await need(2)
    if (greeting?.[0] !== 5) return void client.destroy()
    const methods = await need(greeting[1]!)
    if (!methods) return void client.destroy()
    if (!methods.includes(0)) return refuse(client, Buffer.from([5, 0xff]))
    client.write(Buffer.from([5, 0]))
    const head = await need(4)
    if (head?.[0] !== 5) return void client.destroy()
    const [, command, , type] = head
    let host: Host | null = null
    let raw = ''
    if (type === 1 || type === 4) {
      const bytes = await need(type === 1 ? 4 : 16)
      if (!bytes) return void client.destroy()
      host = ipFromBytes(bytes)
      raw = host.text
    } else if (type === 3) {
      const length = await need(1)
      const name = length && (await need(length[0]!))
      if (!name) return void client.destroy()
      // Bytes, not text: a NUL or a byte above 0x7f stays what it is, and the parser refuses it.
      raw = name.toString('latin1')
      host = parseHost(raw)
    } else {
      this.record({
        host: '',
        port: 0,
        allowed: false,
        reason: `SOCKS5 address type ${type} is not supported`,
      })
      return refuse(client, reply(8))
    }
    const portBytes = await need(2)
    if (!portBytes) return void client.destroy()
    const port = portBytes.readUInt16BE(0)
    this.endHandshake(client)
    const shown = host ? host.text : showHost(raw)
    if (command !== 1) {
      this.record({
        host: shown,
        port,
        allowed: false,
        reason: `SOCKS5 command ${command} is not supported (CONNECT only)`,
      })
      return refuse(client, reply(7))
    }
    if (client.readableLength > SOCKS_EARLY_BYTES) {
      this.record({
        host: shown,
        port,
        allowed: false,
        reason: `sent more than ${SOCKS_EARLY_BYTES} bytes before the reply`,
      })
      return void client.destroy()
    }
    const decision = await this.decide(port === 0 ? null : host, raw, port)
    if (!decision.allowed) return refuse(client, reply(2))
    // What the client sent after its request (at most a stream's high-water mark) goes through the tunnel.
    this.connect(
      decision.address,
      port,
      client,
      () => client.write(reply(0)),
      () => refuse(client, reply(5)),
    )
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    this.httpServer.close()
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))))
    // By name, never recursively, and only while the name is still the directory made (not a link put in
    // its place by someone who can write its parent: the sandbox itself, when cordon is not root).
    const now = lstatSync(this.dir, { throwIfNoEntry: false })
    if (!now?.isDirectory() || now.dev !== this.dirId.dev || now.ino !== this.dirId.ino) return
    for (const name of [SOCKETS.http, SOCKETS.socks, BRIDGE_MOUNT_POINT]) {
      try {
        unlinkSync(path.join(this.dir, name))
      } catch {
        // already gone
      }
    }
    try {
      rmdirSync(this.dir)
    } catch {
      // not empty: something was put there; left rather than followed
    }
  }
}
