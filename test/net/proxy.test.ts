// The proxies on their own, host side: what a connection without the run's token gets, and the bounds a
// sandbox cannot push past (handshake deadline, connections, early data, events).
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'
import { NetworkProxy, type ProxyLimits, TOKEN_LINE_BYTES } from '../../src/net/proxy.js'
import { tempDir, waitFor } from '../helpers.js'

const policy = {
  allow: ['example.com'],
  deny: [],
  allowLoopback: false,
  allowPrivate: false,
  allowMetadata: false,
}

/** Connect to one of the proxy's sockets, send `data`, and collect what comes back until it closes. */
function exchange(proxy: NetworkProxy, name: string, data: Buffer | string, timeoutMs = 5000) {
  return new Promise<{ got: string; closed: boolean }>((resolve) => {
    const s = net.connect(path.join(proxy.dir, name))
    let got = ''
    s.on('data', (b: Buffer) => {
      got += b.toString('latin1')
    })
    s.on('error', () => {})
    s.write(data)
    const timer = setTimeout(() => {
      s.destroy()
      resolve({ got, closed: false })
    }, timeoutMs)
    s.on('close', () => {
      clearTimeout(timer)
      resolve({ got, closed: true })
    })
  })
}

const socksRequest = (name: string) =>
  Buffer.concat([Buffer.from([5, 1, 0, 5, 1, 0, 3, name.length]), Buffer.from(name), Buffer.from([0, 80])])

async function withProxy(limits: Partial<ProxyLimits>, body: (p: NetworkProxy) => Promise<void>) {
  const proxy = new NetworkProxy(policy, limits)
  try {
    await body(proxy)
  } finally {
    await proxy.close()
  }
}

describe('network proxy (host side)', () => {
  it('a connection without the token, or with a wrong one, gets nothing and is no event', async () => {
    await withProxy({}, async (proxy) => {
      assert.equal(proxy.token.length, TOKEN_LINE_BYTES)
      const get = 'GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n'
      const wrong = `${'0'.repeat(64)}\n`
      for (const [name, data] of [
        ['http.sock', get],
        ['http.sock', wrong + get],
        ['socks.sock', socksRequest('example.com')],
        ['socks.sock', Buffer.concat([Buffer.from(wrong), socksRequest('example.com')])],
        ['http.sock', proxy.token.subarray(0, 64)], // a token without its last byte, then silence
      ] as const) {
        const r = await exchange(proxy, name, data)
        assert.equal(r.got, '', `${name}: ${JSON.stringify(data).slice(0, 80)}`)
      }
      assert.deepEqual(proxy.events, [])
    })
  })

  it('with the token, the run is served: a refusal is an event', async () => {
    await withProxy({}, async (proxy) => {
      const r = await exchange(
        proxy,
        'http.sock',
        Buffer.concat([proxy.token, Buffer.from('CONNECT evil.test:443 HTTP/1.1\r\n\r\n')]),
      )
      assert.match(r.got, /^HTTP\/1\.1 403/)
      const s = await exchange(proxy, 'socks.sock', Buffer.concat([proxy.token, socksRequest('evil.test')]))
      assert.equal(s.got, '\x05\x00\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00')
      assert.deepEqual(
        proxy.events.map((e) => [e.raw, e.allowed, e.reason]),
        [
          ['evil.test', false, 'not on the allow list'],
          ['evil.test', false, 'not on the allow list'],
        ],
      )
    })
  })

  it('a client that goes silent is dropped at the handshake deadline, on both sockets', async () => {
    await withProxy({ handshakeMs: 200 }, async (proxy) => {
      for (const [name, data] of [
        ['http.sock', Buffer.concat([proxy.token, Buffer.from('GET http://example.com/ HTTP/1.1\r\n')])],
        ['socks.sock', Buffer.concat([proxy.token, Buffer.from([5, 1, 0, 5, 1, 0])])],
        ['socks.sock', Buffer.alloc(10)],
      ] as const) {
        const r = await exchange(proxy, name, data, 10_000)
        assert.equal(r.closed, true, `${name} closed`)
      }
    })
  })

  it('more than a SOCKS5 request before the reply is refused, not kept', async () => {
    await withProxy({}, async (proxy) => {
      const flood = Buffer.concat([proxy.token, socksRequest('example.com'), Buffer.alloc(8192, 0x78)])
      const r = await exchange(proxy, 'socks.sock', flood)
      assert.equal(r.closed, true)
      assert.match(proxy.events[0]?.reason ?? '', /^sent more than 4096 bytes before the reply/)
    })
  })

  it('connections past the cap are refused as events; events past the cap are counted', async () => {
    await withProxy({ maxConnections: 2, maxEvents: 3 }, async (proxy) => {
      const held = [0, 1].map(() => {
        const s = net.connect(path.join(proxy.dir, 'socks.sock'))
        s.on('error', () => {})
        s.write(proxy.token)
        return s
      })
      await new Promise((r) => setTimeout(r, 200))
      const third = await exchange(proxy, 'socks.sock', Buffer.concat([proxy.token, socksRequest('x.test')]))
      assert.equal(third.got, '')
      assert.equal(proxy.events[0]?.reason, 'more than 2 connections at once')
      assert.equal(proxy.events[0]?.code, 'limit')
      // HTTP is answered before its request is read.
      const http = await exchange(proxy, 'http.sock', proxy.token)
      assert.match(http.got, /^HTTP\/1\.1 503 /)
      proxy.events.pop()
      for (const s of held) s.destroy()
      await new Promise((r) => setTimeout(r, 200))
      for (let i = 0; i < 4; i++)
        await exchange(proxy, 'socks.sock', Buffer.concat([proxy.token, socksRequest(`n${i}.test`)]))
      assert.equal(proxy.events.length, 3)
      assert.equal(proxy.dropped, 2)
    })
  })

  it('a client gone while its host was decided leaves no connection out behind', async () => {
    // A server that keeps a half-closed connection open, as many do.
    const server = net.createServer({ allowHalfOpen: true }, (s) => s.on('error', () => {}))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as net.AddressInfo
    const slow = async () => {
      await new Promise((r) => setTimeout(r, 300))
      return '127.0.0.1'
    }
    const proxy = new NetworkProxy({ ...policy, allow: ['slow.test'], allowLoopback: true }, {}, slow)
    try {
      const s = net.connect(path.join(proxy.dir, 'http.sock'))
      s.on('error', () => {})
      s.write(Buffer.concat([proxy.token, Buffer.from(`CONNECT slow.test:${port} HTTP/1.1\r\n\r\n`)]))
      await new Promise((r) => setTimeout(r, 100))
      s.destroy()
      await new Promise((r) => setTimeout(r, 600))
      const open = await new Promise<number>((r) => server.getConnections((_, n) => r(n)))
      assert.equal(open, 0, 'the upstream connection of a client that left')
      assert.equal(proxy.events[0]?.allowed, true)
    } finally {
      await proxy.close()
      server.close()
    }
  })

  it('pipelined requests take turns: one upstream at a time, 32 may wait, then 503 and close', async () => {
    // An upstream that answers each request 20 ms late and counts the connections open at once.
    let open = 0
    let most = 0
    let served = 0
    const server = http.createServer((_req, res) => {
      setTimeout(() => {
        served++
        res.end('ok')
      }, 20)
    })
    server.on('connection', (c) => {
      most = Math.max(most, ++open)
      c.on('close', () => open--)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as net.AddressInfo
    const proxy = new NetworkProxy(
      { ...policy, allow: ['up.test'], allowLoopback: true },
      {},
      async () => '127.0.0.1',
    )
    try {
      const get = `GET http://up.test:${port}/ HTTP/1.1\r\nHost: up.test\r\n\r\n`
      const r = await exchange(
        proxy,
        'http.sock',
        Buffer.concat([proxy.token, Buffer.from(get.repeat(34))]),
        10_000,
      )
      assert.equal(r.closed, true, 'the connection closes after the 503')
      assert.equal(most, 1, 'one upstream connection at a time')
      assert.equal(served, 33, 'the first 33 were forwarded')
      const statuses = [...r.got.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1])
      assert.deepEqual(statuses, [...Array<string>(33).fill('200'), '503'])
      // A client that pipelines far past it gets the same: what it sent after the 503 is never forwarded.
      served = 0
      most = 0
      const flood = await exchange(
        proxy,
        'http.sock',
        Buffer.concat([proxy.token, Buffer.from(get.repeat(5000))]),
        10_000,
      )
      assert.equal(flood.closed, true)
      assert.equal(most, 1, 'one upstream connection at a time')
      assert.equal(served, 33)
      assert.deepEqual(
        [...flood.got.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1]),
        [...Array<string>(33).fill('200'), '503'],
      )
    } finally {
      await proxy.close()
      server.closeAllConnections()
      server.close()
    }
  })

  it('pipelined requests are parsed only as they get room: one read of them is not thousands of requests', async () => {
    // An upstream that never answers: the first request holds its turn for good.
    const server = net.createServer((c) => c.on('error', () => {}))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as net.AddressInfo
    const proxy = new NetworkProxy(
      { ...policy, allow: ['up.test'], allowLoopback: true },
      {},
      async () => '127.0.0.1',
    )
    let parsed = 0
    ;(proxy as unknown as { httpServer: http.Server }).httpServer.on('request', () => parsed++)
    try {
      const get = `GET http://up.test:${port}/ HTTP/1.1\r\nHost: a\r\n\r\n`
      const r = await exchange(
        proxy,
        'http.sock',
        Buffer.concat([proxy.token, Buffer.from(get.repeat(40_000))]),
        1000,
      )
      assert.equal(r.got, '', 'nothing answered yet: the first request still has its turn')
      assert.ok(parsed <= 33 + 100, `${parsed} requests parsed and held on the host`)
    } finally {
      await proxy.close()
      server.close()
    }
  })

  it('CONNECT: what the client sent after its request goes through the tunnel whole and in order', async () => {
    const echo = net.createServer((c) => {
      c.on('error', () => {})
      c.pipe(c)
    })
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r))
    const { port } = echo.address() as net.AddressInfo
    const proxy = new NetworkProxy(
      { ...policy, allow: ['echo.test'], allowLoopback: true },
      {},
      async () => '127.0.0.1',
    )
    try {
      // Bigger than a piece of the parser's and than a stream's buffer, sent with the request at once.
      const payload = Buffer.from(
        Array.from({ length: 50_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(''),
      )
      const s = net.connect(path.join(proxy.dir, 'http.sock'))
      s.on('error', () => {})
      let got = Buffer.alloc(0)
      s.on('data', (b: Buffer) => {
        got = Buffer.concat([got, b])
      })
      s.write(
        Buffer.concat([proxy.token, Buffer.from(`CONNECT echo.test:${port} HTTP/1.1\r\n\r\n`), payload]),
      )
      const head = 'HTTP/1.1 200 Connection Established\r\n\r\n'
      await waitFor(() => got.length >= head.length + payload.length, 5000)
      s.destroy()
      assert.equal(got.subarray(0, head.length).toString(), head)
      assert.ok(got.subarray(head.length).equals(payload), `${got.length - head.length} bytes came back`)
    } finally {
      await proxy.close()
      echo.close()
    }
  })

  it('close() removes the socket directory by its entries, never following what was planted there', async () => {
    const outside = tempDir('cordon-planted-')
    writeFileSync(path.join(outside, 'keep'), 'x')
    const proxy = new NetworkProxy(policy)
    symlinkSync(outside, path.join(proxy.dir, 'planted'))
    mkdirSync(path.join(proxy.dir, 'sub'))
    await proxy.close()
    assert.equal(existsSync(path.join(outside, 'keep')), true, 'the planted link was not followed')
    assert.equal(existsSync(path.join(proxy.dir, 'http.sock')), false)
    // What close() left (the planted entries and their directory) is the test's to remove.
    unlinkSync(path.join(proxy.dir, 'planted'))
    rmdirSync(path.join(proxy.dir, 'sub'))
    rmdirSync(proxy.dir)
    const clean = new NetworkProxy(policy)
    await clean.close()
    assert.equal(existsSync(clean.dir), false)
  })

  it('close() touches nothing when its directory was moved and a link put in its place', async () => {
    const victim = tempDir('cordon-victim-')
    writeFileSync(path.join(victim, 'bridge'), 'keep')
    const proxy = new NetworkProxy(policy)
    const moved = `${proxy.dir}-moved`
    renameSync(proxy.dir, moved)
    symlinkSync(victim, proxy.dir)
    await proxy.close()
    assert.equal(existsSync(path.join(victim, 'bridge')), true, 'the link was not followed')
    unlinkSync(proxy.dir)
    for (const name of ['http.sock', 'socks.sock', 'bridge']) unlinkSync(path.join(moved, name))
    rmdirSync(moved)
  })
})
