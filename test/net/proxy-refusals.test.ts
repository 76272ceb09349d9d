// Every request a sandbox makes of its proxies is answered at once and is an event, whatever its spelling
// and whatever part of it is wrong: a host that does not parse (through Node's HTTP parser too), a request
// the proxy does not serve, a client that does not finish its request. A refusal by the policy and a
// failure of what the policy allowed get different answers and codes.
import assert from 'node:assert/strict'
import net from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'
import { showEvents } from '../../src/net/events.js'
import { NetworkProxy, type ProxyLimits } from '../../src/net/proxy.js'

const policy = {
  allow: ['*.example.com', 'example.com', 'gone.test', 'closed.test'],
  deny: [],
  allowLoopback: false,
  allowPrivate: false,
  allowMetadata: false,
}

/** Names resolve to a public address, but for gone.test (no such name) and closed.test (a closed port). */
async function lookup(name: string): Promise<string> {
  if (name === 'gone.test') throw Object.assign(new Error('no such name'), { code: 'ENOTFOUND' })
  if (name === 'closed.test') return '127.0.0.1'
  return '93.184.216.34'
}

interface Answer {
  got: Buffer
  ms: number
  closed: boolean
}

/** Send `data` after the token; resolve once `done(got)` holds, the connection closes, or at `timeoutMs`. */
function ask(
  proxy: NetworkProxy,
  name: 'http.sock' | 'socks.sock',
  data: Buffer | string,
  done: (got: Buffer) => boolean,
  timeoutMs = 5000,
): Promise<Answer> {
  return new Promise((resolve) => {
    const started = Date.now()
    const s = net.connect(path.join(proxy.dir, name))
    let got = Buffer.alloc(0)
    let finished = false
    const finish = (closed: boolean) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      s.destroy()
      resolve({ got, ms: Date.now() - started, closed })
    }
    s.on('data', (b: Buffer) => {
      got = Buffer.concat([got, b])
      if (done(got)) finish(false)
    })
    s.on('error', () => {})
    s.on('close', () => finish(true))
    s.write(Buffer.concat([proxy.token, Buffer.from(data as string, 'latin1')]))
    const timer = setTimeout(() => finish(false), timeoutMs)
  })
}

const statusLine = (got: Buffer) => got.toString('latin1').split('\r\n')[0] ?? ''
const hasStatus = (got: Buffer) => got.includes('\r\n')
/** The greeting's answer and the request's reply: 12 bytes (or the 2 of a refused greeting). */
const socksReplied = (got: Buffer) => got.length >= 12
const socksReply = (got: Buffer) => (got.length >= 4 ? got[3]! : -1)

const socksName = (name: Buffer | string, port = 80, command = 1) => {
  const bytes = typeof name === 'string' ? Buffer.from(name, 'latin1') : name
  return Buffer.concat([
    Buffer.from([5, 1, 0, 5, command, 0, 3, bytes.length]),
    bytes,
    Buffer.from([port >> 8, port & 0xff]),
  ])
}
const socksAddress = (bytes: number[], port = 80) =>
  Buffer.concat([
    Buffer.from([5, 1, 0, 5, 1, 0, bytes.length === 4 ? 1 : 4]),
    Buffer.from(bytes),
    Buffer.from([port >> 8, port & 0xff]),
  ])

async function withProxy(limits: Partial<ProxyLimits>, body: (p: NetworkProxy) => Promise<void>) {
  const proxy = new NetworkProxy(policy, limits, lookup)
  try {
    await body(proxy)
  } finally {
    await proxy.close()
  }
}

/** Hosts no parser reads as a host, in every spelling tried. */
const MALFORMED = [
  'a\0b.example.com',
  'a\x01.example.com',
  'a\x7f.example.com',
  'a\xff.example.com',
  'a%00.example.com',
  'ex%61mple.com',
  'a..example.com',
  '-a.example.com',
  'a.example.com..',
  '0x7f.1',
  '0177.0.0.1',
  '127.1',
  '2130706433',
  '1.2.3.0x4',
  '[::1%25eth0]',
  '[fe80::1%eth0]',
  '[::1',
  '[127.0.0.1]',
  `${'a'.repeat(64)}.example.com`,
  `${'a.'.repeat(130)}example.com`,
  'allowed.example.com@evil.test',
  '',
]

describe('network proxy: every refusal answered at once and recorded', () => {
  it('HTTP CONNECT and absolute-URI requests whose host does not parse: 403 or 400, one event each', async () => {
    await withProxy({}, async (proxy) => {
      const cases: string[] = []
      for (const host of MALFORMED) {
        cases.push(`CONNECT ${host}:80 HTTP/1.1\r\nHost: x\r\n\r\n`)
        cases.push(`GET http://${host}:80/ HTTP/1.1\r\nHost: x\r\n\r\n`)
        cases.push(`GET http://${host}/ HTTP/1.1\r\n\r\n`)
      }
      for (const [i, request] of cases.entries()) {
        const before = proxy.events.length
        const a = await ask(proxy, 'http.sock', request, hasStatus)
        const event = proxy.events[before]
        assert.match(statusLine(a.got), /^HTTP\/1\.1 4\d\d /, `${i}: ${JSON.stringify(request)}`)
        assert.ok(a.ms < 3000, `${JSON.stringify(request)}: answered after ${a.ms} ms`)
        assert.equal(proxy.events.length, before + 1, `${JSON.stringify(request)}: one event`)
        assert.equal(event?.allowed, false)
        assert.match(event?.code ?? '', /^malformed-(host|request)$/, JSON.stringify({ request, event }))
      }
      // The host as received, NUL and all, is what the event keeps.
      assert.equal(proxy.events[0]?.raw, 'a\0b.example.com')
      assert.equal(proxy.events[0]?.code, 'malformed-host')
      assert.equal(proxy.events[0]?.port, 80)
      assert.equal(showEvents(proxy.events)[0]?.host, 'a\\u0000b.example.com')
    })
  })

  it('SOCKS5 names and addresses: reply 2 for a refusal, at once, one event each', async () => {
    await withProxy({}, async (proxy) => {
      const mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]
      const cases: [Buffer, string][] = [
        // A SOCKS5 name is at most 255 bytes.
        ...[...MALFORMED.filter((h) => h.length <= 255), '::1%25eth0', 'fe80::1%eth0'].map(
          (h): [Buffer, string] => [socksName(h), 'malformed-host'],
        ),
        [socksName('a'.repeat(255)), 'malformed-host'],
        [socksName('::ffff:7f00:1'), 'not-allowed'],
        [socksName('0:0:0:0:0:0:0:1'), 'not-allowed'],
        [socksAddress(mapped), 'not-allowed'],
        [socksAddress([127, 0, 0, 1]), 'not-allowed'],
        [socksName('EVIL.test.'), 'not-allowed'],
      ]
      for (const [request, code] of cases) {
        const before = proxy.events.length
        const a = await ask(proxy, 'socks.sock', request, socksReplied)
        assert.equal(
          socksReply(a.got),
          2,
          `${JSON.stringify(request.toString('latin1'))}: ${a.got.toString('hex')}`,
        )
        assert.ok(a.ms < 3000, `answered after ${a.ms} ms`)
        assert.equal(proxy.events.length, before + 1)
        assert.equal(proxy.events[before]?.code, code, JSON.stringify(proxy.events[before]))
      }
      // As sent: the v4-mapped address as the IPv6 address it was, read as 127.0.0.1 in the reason.
      const atyp4 = proxy.events.find((e) => e.raw === '::ffff:7f00:1' && e.reason.includes('read as'))
      assert.equal(atyp4?.reason, 'not on the allow list (read as 127.0.0.1)')
    })
  })

  it('SOCKS5 requests the proxy does not serve are answered and recorded too', async () => {
    await withProxy({}, async (proxy) => {
      const cases: [Buffer, (got: Buffer) => boolean, string][] = [
        [socksName('a.example.com', 80, 2), socksReplied, 'unsupported'], // BIND
        [Buffer.from([5, 1, 0, 5, 1, 0, 9, 0, 80]), socksReplied, 'unsupported'], // address type 9
        [Buffer.from([5, 1, 2]), (g) => g.length >= 2, 'unsupported'], // username/password only
        [Buffer.from([4, 1, 0, 80, 127, 0, 0, 1, 0]), () => false, 'malformed-request'], // SOCKS4
        [socksName('a.example.com', 0), socksReplied, 'malformed-request'], // port 0
      ]
      for (const [request, done, code] of cases) {
        const before = proxy.events.length
        const a = await ask(proxy, 'socks.sock', request, done)
        assert.ok(a.ms < 3000, `answered after ${a.ms} ms`)
        assert.equal(proxy.events[before]?.code, code, request.toString('hex'))
        assert.equal(proxy.events[before]?.allowed, false)
      }
      assert.deepEqual(
        proxy.events.map((e) => e.raw),
        ['a.example.com', '', '', '', 'a.example.com'],
      )
    })
  })

  it('HTTP requests the proxy does not serve: origin form, https://, a bad port, a head past 16 KiB', async () => {
    await withProxy({}, async (proxy) => {
      const cases: [string, RegExp, string][] = [
        ['GET /x HTTP/1.1\r\nHost: a.example.com\r\n\r\n', /^HTTP\/1\.1 400/, 'malformed-request'],
        ['GET https://a.example.com/ HTTP/1.1\r\n\r\n', /^HTTP\/1\.1 400/, 'unsupported'],
        ['CONNECT a.example.com:0 HTTP/1.1\r\n\r\n', /^HTTP\/1\.1 400/, 'malformed-request'],
        ['CONNECT a.example.com:99999 HTTP/1.1\r\n\r\n', /^HTTP\/1\.1 400/, 'malformed-request'],
        ['GET http://a.example.com:0/ HTTP/1.1\r\n\r\n', /^HTTP\/1\.1 400/, 'malformed-request'],
        [`CONNECT ${'a'.repeat(20_000)}.example.com:443 HTTP/1.1\r\n\r\n`, /^HTTP\/1\.1 431/, 'limit'],
        ['\x05\x01\x00', /^HTTP\/1\.1 400/, 'malformed-request'], // SOCKS5 on the HTTP port
        [`CONNECT ${'a'.repeat(2000)}.example.com:443 HTTP/1.1\r\n\r\n`, /^HTTP\/1\.1 403/, 'malformed-host'],
      ]
      for (const [request, status, code] of cases) {
        const before = proxy.events.length
        const a = await ask(proxy, 'http.sock', request, hasStatus)
        assert.match(statusLine(a.got), status, JSON.stringify(request.slice(0, 60)))
        assert.ok(a.ms < 3000, `answered after ${a.ms} ms`)
        assert.equal(proxy.events[before]?.code, code, JSON.stringify(proxy.events[before]))
      }
      assert.equal(proxy.events[1]?.raw, 'a.example.com')
      assert.equal(proxy.events[7]?.raw.length, 1024, 'a very long host is kept cut')
      assert.equal(proxy.events[7]?.cut, true)
    })
  })

  it('an allowed name that does not resolve is not a refusal: 502 and SOCKS5 reply 4, code unresolvable', async () => {
    await withProxy({}, async (proxy) => {
      const http = await ask(proxy, 'http.sock', 'CONNECT gone.test:443 HTTP/1.1\r\n\r\n', hasStatus)
      assert.match(statusLine(http.got), /^HTTP\/1\.1 502 /)
      const get = await ask(proxy, 'http.sock', 'GET http://gone.test/ HTTP/1.1\r\n\r\n', hasStatus)
      assert.match(statusLine(get.got), /^HTTP\/1\.1 502 /)
      const socks = await ask(proxy, 'socks.sock', socksName('gone.test'), socksReplied)
      assert.equal(socksReply(socks.got), 4)
      // A forbidden one is the policy's: 403, reply 2.
      const forbidden = await ask(proxy, 'http.sock', 'CONNECT evil.test:443 HTTP/1.1\r\n\r\n', hasStatus)
      assert.match(statusLine(forbidden.got), /^HTTP\/1\.1 403 /)
      const socksForbidden = await ask(proxy, 'socks.sock', socksName('evil.test'), socksReplied)
      assert.equal(socksReply(socksForbidden.got), 2)
      assert.deepEqual(
        proxy.events.map((e) => [e.raw, e.allowed, e.code, e.reason]),
        [
          ['gone.test', true, 'unresolvable', 'cannot resolve: ENOTFOUND'],
          ['gone.test', true, 'unresolvable', 'cannot resolve: ENOTFOUND'],
          ['gone.test', true, 'unresolvable', 'cannot resolve: ENOTFOUND'],
          ['evil.test', false, 'not-allowed', 'not on the allow list'],
          ['evil.test', false, 'not-allowed', 'not on the allow list'],
        ],
      )
    })
  })

  it('an allowed address that does not answer: 502 and SOCKS5 reply 5, code unreachable', async () => {
    // A port nothing listens on: bound, then closed.
    const server = net.createServer()
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as net.AddressInfo
    await new Promise((r) => server.close(r))
    const proxy = new NetworkProxy({ ...policy, allowLoopback: true }, {}, lookup)
    try {
      const http = await ask(proxy, 'http.sock', `CONNECT closed.test:${port} HTTP/1.1\r\n\r\n`, hasStatus)
      assert.match(statusLine(http.got), /^HTTP\/1\.1 502 /)
      const get = await ask(proxy, 'http.sock', `GET http://closed.test:${port}/ HTTP/1.1\r\n\r\n`, hasStatus)
      assert.match(statusLine(get.got), /^HTTP\/1\.1 502 /)
      const socks = await ask(proxy, 'socks.sock', socksName('closed.test', port), socksReplied)
      assert.equal(socksReply(socks.got), 5)
      assert.deepEqual(
        proxy.events.map((e) => [e.allowed, e.code, e.reason]),
        Array(3).fill([true, 'unreachable', 'cannot connect to 127.0.0.1: ECONNREFUSED']),
      )
    } finally {
      await proxy.close()
    }
  })

  it('a client that does not finish its request is refused at the deadline as a timeout, on both proxies', async () => {
    await withProxy({ handshakeMs: 300 }, async (proxy) => {
      const slow: ['http.sock' | 'socks.sock', string, (got: Buffer) => boolean][] = [
        ['http.sock', 'CONNECT a.example.com:443 HTTP/1.1\r\nHost: a', hasStatus],
        ['http.sock', 'GET http://a.exa', hasStatus],
        ['socks.sock', '\x05\x01\x00\x05\x01\x00\x03\x20a.exam', () => false],
        ['socks.sock', '\x05', () => false],
      ]
      for (const [name, data, done] of slow) {
        const before = proxy.events.length
        const a = await ask(proxy, name, data, done, 10_000)
        assert.ok(a.ms < 5000, `${JSON.stringify(data)}: ${a.ms} ms`)
        if (name === 'http.sock') assert.match(statusLine(a.got), /^HTTP\/1\.1 408 /)
        else assert.equal(a.closed, true)
        assert.equal(proxy.events[before]?.code, 'timeout', JSON.stringify(data))
      }
    })
  })

  it('a second request trickled on a kept-alive connection is refused as a timeout within seconds', async () => {
    await withProxy({ handshakeMs: 500 }, async (proxy) => {
      const first = 'GET http://evil.test/ HTTP/1.1\r\n\r\n'
      const a = await ask(
        proxy,
        'http.sock',
        `${first}GET http://a.exa`,
        (got) => (got.toString().match(/HTTP\/1\.1/g) ?? []).length >= 2,
        10_000,
      )
      const statuses = [...a.got.toString().matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1])
      assert.deepEqual(statuses, ['403', '408'])
      assert.ok(a.ms < 5000, `${a.ms} ms`)
      assert.deepEqual(
        proxy.events.map((e) => e.code),
        ['not-allowed', 'timeout'],
      )
    })
  })
})

// Red team: each event is bounded (MAX_RAW_HOST for the host), but the reason quoted the request's scheme
// whole: ~8 KB an event, a thousand events a run, held on the host and stored with the result.
describe('what a refusal event holds of the request', () => {
  it('its reason is bounded whatever the scheme the sandbox sent', async () => {
    await withProxy({}, async (proxy) => {
      const scheme = `x${'a'.repeat(8000)}`
      const got = await ask(
        proxy,
        'http.sock',
        `GET ${scheme}://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n`,
        hasStatus,
      )
      assert.match(statusLine(got.got), /^HTTP\/1\.1 400/)
      const [event] = showEvents(proxy.events)
      assert.equal(event?.code, 'unsupported')
      assert.ok(event!.reason.length <= 300, `a reason of ${event!.reason.length} characters`)
      assert.ok(got.got.length < 1024, `an answer of ${got.got.length} bytes`)
    })
  })
})
