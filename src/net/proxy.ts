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
import { markUnreachable, type ProxyEvent, type RefusalCode, rawHost } from './events.js'
import { type Decision, type Lookup, NetworkGate } from './gate.js'
import { type Host, parseUriHost } from './host.js'
import { Metered } from './metered.js'
import type { NetworkPolicy } from './policy.js'
import { serveSocks } from './socks.js'
import { requestLineAt, splitAbsolute, splitAuthority, type Target, targetOf } from './target.js'
import { HTTP_STATUS, httpAnswer, readExactly, refuse } from './wire.js'

/** The HTTP proxy's parser, loaded when an allowlist first starts one. */
const http = lazy<typeof import('node:http')>('node:http')
/** The token's source and check, loaded when an allowlist first starts a proxy. */
const crypto = lazy<typeof import('node:crypto')>('node:crypto')

/**
 * The longest reason an event keeps: more than any of cordon's own (a parsed host is at most 253, a rule
 * the caller's), so only a reason that quotes the sandbox's bytes unbounded is ever cut.
 */
const MAX_REASON = 1024
/** The longest scheme a refusal names (`chrome-extension` is 16). */
const MAX_SCHEME = 32

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
/**
 * Requests of one HTTP connection waiting for their turn (one is forwarded at a time): a client that
 * pipelines more is answered 503 in its turn and the connection closes after that.
 */
export const MAX_PIPELINED = 32
/** A plain http:// request, its body included, is read within this long. */
const REQUEST_MS = 300_000
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

/** A host as sent, the way the parser compares it: lower case, no brackets, no trailing dot. */
const plainHost = (raw: string) =>
  raw
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')

/** What a request that Node's HTTP parser refused is answered and recorded as. */
interface ParseError extends NodeJS.ErrnoException {
  rawPacket?: Buffer
  bytesParsed?: number
}

/** The decision for one request, and its event (null when past maxEvents: only counted). */
export interface Judged {
  decision: Decision
  event: ProxyEvent | null
}

export class NetworkProxy {
  readonly dir: string
  /** This run's token line, written to the bridge on TOKEN_FD; never in an argv, a file or an environment. */
  readonly token: Buffer
  /** Each connection's event, the host as received (events.ts's showEvents makes them a result's). */
  readonly events: ProxyEvent[] = []
  /** Events not kept in `events` (past maxEvents). */
  dropped = 0
  private readonly gate: NetworkGate
  private readonly limits: ProxyLimits
  private readonly httpServer: Server
  private readonly servers: net.Server[] = []
  private readonly sockets = new Set<net.Socket>()
  private readonly deadlines = new WeakMap<net.Socket, NodeJS.Timeout>()
  /** Connections that showed this run's token, and which proxy serves them. */
  private readonly admitted = new WeakMap<net.Socket, 'http' | 'socks'>()
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
      {
        headersTimeout: this.limits.handshakeMs,
        requestTimeout: REQUEST_MS,
        // Node checks those two timeouts on this interval (30 s by default): a client trickling a request
        // head on a kept-alive connection was answered 408 only up to 40 s later.
        connectionsCheckingInterval: Math.min(1000, this.limits.handshakeMs),
        // The host is the request target's, judged; a request without a Host header is no reason for a
        // 400 no event would tell of.
        requireHostHeader: false,
      },
      (req, res) => this.inTurn(req, res),
    )
    // A tunnel is the connection itself again, with what the parser had not consumed put back in front.
    this.httpServer.on('connect', (req: IncomingMessage, socket: Metered, head: Buffer) => {
      const client = socket.detach(head)
      this.tunnel(req, client).catch(() => client.destroy())
    })
    // What Node's parser refuses (a NUL or a space in the host, a head past 16 KiB, one that took too
    // long) is answered and recorded here; without this listener Node answered 400 and no event said so.
    this.httpServer.on('clientError', (error: ParseError, socket: Metered) => this.clientError(error, socket))
    // Connections reach the HTTP server by hand (after their token), never by its own listen(); its
    // header and request timeouts are checked only once it has seen 'listening'.
    this.httpServer.emit('listening')
    for (const [name, kind] of [
      [SOCKETS.http, 'http'],
      [SOCKETS.socks, 'socks'],
    ] as const) {
      const server = net.createServer({ pauseOnConnect: true }, (s) => {
        this.admit(s, kind).catch(() => s.destroy())
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

  /** Keep an event (or count it, past maxEvents); the event kept, which a failed connection updates. */
  record(event: ProxyEvent): ProxyEvent | null {
    if (this.events.length < this.limits.maxEvents) {
      // Held on the host and stored with the result: a reason that quotes the sandbox's bytes stays short.
      if (event.reason.length > MAX_REASON) event.reason = `${event.reason.slice(0, MAX_REASON)}…`
      this.events.push(event)
      return event
    }
    this.dropped++
    return null
  }

  /** A refusal with no host to judge: a request that does not parse, a bound, a deadline. */
  refused(code: RefusalCode, reason: string, raw = '', port = 0): void {
    this.record({ ...rawHost(raw), port, allowed: false, code, reason })
  }

  endHandshake(socket: net.Socket): void {
    clearTimeout(this.deadlines.get(socket))
  }

  /** The token first, compared in constant time; then the connection is this run's, within its cap. */
  private async admit(socket: net.Socket, kind: 'http' | 'socks'): Promise<void> {
    this.track(socket)
    const deadline = setTimeout(() => this.timedOut(socket), this.limits.handshakeMs).unref()
    this.deadlines.set(socket, deadline)
    socket.once('close', () => clearTimeout(deadline))
    const line = await readExactly(socket, TOKEN_LINE_BYTES)
    if (!line || !crypto().timingSafeEqual(line, this.token)) return void socket.destroy()
    if (this.open >= this.limits.maxConnections) {
      const reason = `more than ${this.limits.maxConnections} connections at once`
      this.refused('limit', reason)
      // HTTP can be answered before its request is read; SOCKS5 only after a greeting it would have to read.
      if (kind === 'socks') return void socket.destroy()
      return refuse(socket, httpAnswer(503, 'Service Unavailable', `cordon: ${reason}`))
    }
    this.open++
    socket.once('close', () => this.open--)
    this.admitted.set(socket, kind)
    if (kind === 'http') this.serveHttp(socket)
    else serveSocks(this, socket).catch(() => socket.destroy())
  }

  /**
   * The handshake deadline: a connection of this run that has not finished its request is refused as
   * a timeout (HTTP's 408); one that never showed the token is only dropped.
   */
  private timedOut(socket: net.Socket): void {
    const kind = this.admitted.get(socket)
    if (!kind || socket.destroyed) return void socket.destroy()
    const reason = `no complete request within ${this.limits.handshakeMs / 1000} s`
    this.refused('timeout', reason)
    if (kind === 'socks') return void socket.destroy()
    refuse(socket, httpAnswer(408, 'Request Timeout', `cordon: ${reason}`))
  }

  /** The HTTP server reads the connection through a Metered stream: a request parsed only with room. */
  private serveHttp(raw: net.Socket): void {
    const metered: Metered = new Metered(raw, () => {
      const state = this.turns.get(metered)
      return !state || (!state.over && state.waiting.length < MAX_PIPELINED)
    })
    this.httpServer.emit('connection', metered)
  }

  /**
   * A request Node's parser refused, or one that timed out: recorded, with the host its request line
   * names when there is one, and answered unless a response is already under way on the connection.
   */
  private clientError(error: ParseError, socket: Metered): void {
    this.endHandshake(socket.raw)
    const code = String(error.code ?? '')
    let event: [RefusalCode, string] | null = null
    let target: Target | null = null
    if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const head = this.limits.handshakeMs / 1000
      event = [
        'timeout',
        `no complete request in time (${head} s for its head, ${REQUEST_MS / 1000} s in all)`,
      ]
    } else if (code.startsWith('HPE_')) {
      const line = error.rawPacket ? requestLineAt(error.rawPacket, error.bytesParsed ?? 0) : null
      target = line && targetOf(line.method, line.target)
      if (code === 'HPE_HEADER_OVERFLOW') event = ['limit', 'a request head larger than 16 KiB']
      else if (target && !parseUriHost(target.raw))
        event = ['malformed-host', 'not a host name or IP address']
      else event = ['malformed-request', `not an HTTP request cordon reads (${code})`]
    }
    const state = this.turns.get(socket)
    if (!event) return void socket.destroy()
    this.refused(event[0], event[1], target?.raw ?? '', target?.port ?? 0)
    // A response under way would be cut by ours: the connection only goes.
    if (state?.busy || !socket.writable) return void socket.destroy()
    const [status, title] =
      code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large'] : HTTP_STATUS[event[0]]
    refuse(socket, httpAnswer(status, title, `cordon: ${event[1]}`))
  }

  /**
   * Decide and record. `raw`: the host as the sandbox sent it, which the event shows; `host`: it parsed,
   * or null (refused as malformed). A host read another way than it was written (`[::ffff:7f00:1]` is
   * 127.0.0.1) says so in the reason of a refusal by rule.
   */
  async decide(host: Host | null, raw: string, port: number): Promise<Judged> {
    const decision: Decision = host
      ? await this.gate.decide(host, port)
      : { allowed: false, code: 'malformed-host', reason: 'not a host name or IP address' }
    const readAs =
      host && !decision.allowed && (decision.code === 'not-allowed' || decision.code === 'denied')
        ? plainHost(raw) === host.text
          ? ''
          : ` (read as ${host.text})`
        : ''
    const event = this.record({
      ...rawHost(raw),
      port,
      allowed: decision.allowed || decision.code === 'unresolvable',
      code: decision.allowed ? 'connected' : decision.code,
      reason: decision.allowed ? `connected to ${decision.address}` : decision.reason + readAs,
    })
    return { decision, event }
  }

  /**
   * Connect to an allowed address and splice the two sockets together. A connection that cannot be made
   * turns its event (when kept) from `connected` into `unreachable`, with the error.
   */
  connect(
    address: string,
    port: number,
    client: net.Socket,
    event: ProxyEvent | null,
    onOpen: () => void,
    onFail: (code: string | undefined) => void,
  ): void {
    // Gone while its host was decided: no connection out that nothing would ever close.
    if (client.destroyed) return
    const upstream = net.connect({ host: address, port })
    this.track(upstream)
    let opened = false
    upstream.once('connect', () => {
      opened = true
      onOpen()
      upstream.pipe(client)
      client.pipe(upstream)
    })
    // By the time 'error' is emitted the socket is destroyed (its readyState no longer 'opening'): whether
    // it had connected is this flag's to say. A failed connect is answered; the client goes after that.
    upstream.once('error', (error: NodeJS.ErrnoException) => {
      if (opened) return void client.destroy()
      markUnreachable(event, address, error)
      onFail(error.code)
    })
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => {
      if (opened) client.destroy()
    })
  }

  private async tunnel(req: IncomingMessage, client: net.Socket): Promise<void> {
    this.endHandshake(client)
    const target = splitAuthority(req.url ?? '', 443)
    if (target.port === null) {
      this.refused('malformed-request', 'no valid port (1-65535)', target.raw)
      return refuse(client, httpAnswer(400, 'Bad Request', 'cordon: no valid port (1-65535)'))
    }
    const { decision, event } = await this.decide(parseUriHost(target.raw), target.raw, target.port)
    if (!decision.allowed) {
      const [status, title] = HTTP_STATUS[decision.code]
      return refuse(client, httpAnswer(status, title, `cordon: ${decision.reason}`))
    }
    this.connect(
      decision.address,
      target.port,
      client,
      event,
      () => client.write('HTTP/1.1 200 Connection Established\r\n\r\n'),
      (code) => refuse(client, httpAnswer(502, 'Bad Gateway', `cordon: cannot connect: ${code ?? 'error'}`)),
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
    this.refused('limit', reason)
    res.setHeader('connection', 'close')
    res.writeHead(503, { 'content-type': 'text/plain' }).end(`cordon: ${reason}\n`)
  }

  /**
   * Plain http:// requests through the proxy (absolute URI). The host is read from the request target as
   * sent, as CONNECT's is: a URL parser would percent-decode and IDNA-map it first (`ex%61mple.com`,
   * `0x7f.1`), so the two proxies would read one spelling two ways.
   */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.endHandshake(meteredOf(req).raw)
    // A refused request whose body is still coming closes the connection rather than read that body.
    const answer = (status: number, text: string) => {
      if (!req.complete) res.setHeader('connection', 'close')
      res.writeHead(status, { 'content-type': 'text/plain' }).end(text)
    }
    const uri = splitAbsolute(req.url ?? '')
    if (!uri) {
      const reason = 'the proxy needs an absolute URL'
      this.refused('malformed-request', reason)
      return answer(400, `cordon: ${reason}\n`)
    }
    const target = splitAuthority(uri.authority, 80)
    if (uri.scheme !== 'http') {
      // The scheme is the sandbox's text: named only when it is one a scheme would be.
      const named = uri.scheme.length <= MAX_SCHEME ? ` (use CONNECT for ${uri.scheme}://)` : ''
      const reason = `only http:// is forwarded${named}`
      this.refused('unsupported', reason, target.raw, target.port ?? 0)
      return answer(400, `cordon: ${reason}\n`)
    }
    if (target.port === null) {
      this.refused('malformed-request', 'no valid port (1-65535)', target.raw)
      return answer(400, 'cordon: no valid port (1-65535)\n')
    }
    const port = target.port
    const host = parseUriHost(target.raw)
    const { decision, event } = await this.decide(host, target.raw, port)
    if (!decision.allowed) return answer(HTTP_STATUS[decision.code][0], `cordon: ${decision.reason}\n`)
    if (req.socket.destroyed || !host) return
    // The Host header names the host that was judged, as it was judged: not another one served at the
    // same address, nor a spelling of it the upstream might read otherwise.
    const named = host.kind === 'ipv6' ? `[${host.text}]` : host.text
    const upstream = http().request(
      {
        host: decision.address,
        port,
        method: req.method,
        path: uri.path,
        headers: { ...hopByHop(req.headers), host: target.explicit ? `${named}:${port}` : named },
        // A connection of its own: never one pooled with another run's.
        agent: false,
      },
      (reply) => {
        res.writeHead(reply.statusCode ?? 502, hopByHop(reply.headers))
        reply.pipe(res)
      },
    )
    upstream.on('socket', (s) => this.track(s))
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      if (res.headersSent) return void res.destroy()
      markUnreachable(event, decision.address, error)
      answer(502, `cordon: cannot connect: ${error.code ?? 'error'}\n`)
    })
    res.once('close', () => upstream.destroy())
    req.pipe(upstream)
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
