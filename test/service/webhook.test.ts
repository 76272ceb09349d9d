import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { ServiceError } from '../../src/service/types.js'
import {
  checkWebhookUrl,
  deliverWebhook,
  SIGNATURE_HEADER,
  signWebhook,
  verifyWebhook,
} from '../../src/service/webhook.js'

describe('signWebhook / verifyWebhook', () => {
  it('signs "<t>.<body>" with HMAC-SHA256, as t=…,v1=<hex>', () => {
    const header = signWebhook('whsec_x', '{"a":1}', 1_700_000_000)
    const hex = createHmac('sha256', 'whsec_x').update('1700000000.{"a":1}').digest('hex')
    assert.equal(header, `t=1700000000,v1=${hex}`)
  })

  it('verifies only the same secret, body and a recent time', () => {
    const t = 1_700_000_000
    const header = signWebhook('s', 'body', t)
    assert.ok(verifyWebhook('s', 'body', header, { now: t + 10 }))
    assert.ok(!verifyWebhook('other', 'body', header, { now: t }))
    assert.ok(!verifyWebhook('s', 'body!', header, { now: t }))
    assert.ok(!verifyWebhook('s', 'body', header, { now: t + 301 }))
    assert.ok(!verifyWebhook('s', 'body', header.replace(`t=${t}`, `t=${t + 1}`), { now: t }))
    assert.ok(!verifyWebhook('s', 'body', 'garbage', { now: t }))
    assert.ok(!verifyWebhook('s', 'body', `t=${t},v1=abc`, { now: t }))
    // A second signature (a rotated secret) may be the one that matches.
    assert.ok(verifyWebhook('s', 'body', `t=${t},v1=${'0'.repeat(64)},${header.split(',')[1]}`, { now: t }))
  })
})

describe('checkWebhookUrl', () => {
  const refused = (url: string) => {
    try {
      checkWebhookUrl(url)
    } catch (error) {
      assert.ok(error instanceof ServiceError)
      assert.equal(error.field, 'webhook.url')
      assert.equal(error.code, 'invalid')
      return true
    }
    return false
  }

  it('refuses the host itself and private networks in every spelling', () => {
    for (const url of [
      'http://127.0.0.1/',
      'http://127.1/',
      'http://127.0.0.1./',
      'http://2130706433/',
      'http://0x7f000001/',
      'http://0x7f.1/',
      'http://0177.0.0.1/',
      'http://017700000001/',
      'http://0/',
      'http://0.0.0.0:8080/',
      'http://[::1]/',
      'http://[0:0:0:0:0:0:0:1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:7f00:1]/',
      'http://[::]/',
      'http://localhost/',
      'http://LOCALHOST./',
      'http://api.localhost/',
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://172.16.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://0xa9fea9fe/',
      'http://[fd00:ec2::254]/',
      'http://[fe80::1]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://100.64.0.1/',
    ]) {
      assert.ok(refused(url), url)
    }
  })

  it('refuses what is not an http(s) URL, and credentials', () => {
    for (const url of ['not a url', 'ftp://example.com/', 'file:///etc/passwd', 'http://u:p@example.com/']) {
      assert.ok(refused(url), url)
    }
  })

  it('takes public addresses and names (a name is judged again when delivered)', () => {
    for (const url of ['https://example.com/hook', 'http://8.8.8.8/', 'https://[2606:4700::1111]/x']) {
      assert.ok(!refused(url), url)
    }
    assert.equal(checkWebhookUrl('http://127.0.0.1:9/', { allowPrivate: true }).port, '9')
  })

  it('never takes a cloud metadata address, even when private ones are allowed', () => {
    for (const url of [
      'http://169.254.169.254/latest/',
      'http://[fd00:ec2::254]/',
      'http://168.63.129.16/',
      'http://[::ffff:a9fe:a9fe]/',
    ]) {
      assert.throws(() => checkWebhookUrl(url, { allowPrivate: true }), /metadata/, url)
    }
  })
})

describe('deliverWebhook', () => {
  const received: { body: string; signature: string }[] = []
  let statuses: number[] = []
  let server: http.Server
  let port: number

  before(async () => {
    server = http.createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (d) => {
        body += d
      })
      req.on('end', () => {
        received.push({ body, signature: String(req.headers[SIGNATURE_HEADER.toLowerCase()]) })
        res.statusCode = statuses.shift() ?? 200
        res.end()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })
  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  const reset = (s: number[]) => {
    received.length = 0
    statuses = s
  }

  it('retries non-2xx answers, each attempt recorded, and signs every one', async () => {
    reset([500, 302])
    const body = JSON.stringify({ id: 'run_1', status: 'ok' })
    const attempts = await deliverWebhook(`http://127.0.0.1:${port}/hook`, body, 'sec', {
      allowPrivate: true,
      backoff: () => 5,
    })
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.status, a.error]),
      [
        [1, 500, null],
        [2, 302, null],
        [3, 200, null],
      ],
    )
    assert.equal(received.length, 3)
    for (const r of received) {
      assert.equal(r.body, body)
      assert.ok(verifyWebhook('sec', r.body, r.signature), r.signature)
    }
    for (const a of attempts) assert.ok(!Number.isNaN(Date.parse(a.at)) && a.durationMs >= 0)
  })

  it('gives up after `attempts`', async () => {
    reset([503, 503, 503])
    const attempts = await deliverWebhook(`http://127.0.0.1:${port}/`, '{}', 's', {
      allowPrivate: true,
      attempts: 2,
      backoff: () => 1,
    })
    assert.deepEqual(
      attempts.map((a) => a.status),
      [503, 503],
    )
  })

  it('retries network errors', async () => {
    // A port nothing listens on: bind one, then close it.
    const spare = http.createServer()
    await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve))
    const closed = (spare.address() as AddressInfo).port
    await new Promise<void>((resolve) => spare.close(() => resolve()))
    const attempts = await deliverWebhook(`http://127.0.0.1:${closed}/`, '{}', 's', {
      allowPrivate: true,
      attempts: 3,
      backoff: () => 1,
    })
    assert.equal(attempts.length, 3)
    for (const a of attempts) {
      assert.equal(a.status, null)
      assert.match(a.error ?? '', /ECONNREFUSED/)
    }
  })

  it('refuses a private target once, without retrying or connecting', async () => {
    reset([])
    const attempts = await deliverWebhook(`http://127.0.0.1:${port}/`, '{}', 's', { backoff: () => 1 })
    assert.equal(attempts.length, 1)
    assert.match(attempts[0]!.error ?? '', /loopback/)
    assert.equal(received.length, 0)
  })

  it('checks every address a name resolves to, and connects to exactly those', async () => {
    reset([])
    const resolve = async (name: string) =>
      name === 'hooks.example.test' ? ['93.184.216.34', '127.0.0.1'] : []
    const refused = await deliverWebhook(`http://hooks.example.test:${port}/`, '{}', 's', {
      resolve,
      backoff: () => 1,
    })
    assert.equal(refused.length, 1)
    assert.match(refused[0]!.error ?? '', /resolves to 127\.0\.0\.1/)
    assert.equal(received.length, 0)

    // Allowed, the connection goes to the resolved (checked) address: the loopback server answers.
    const toLoopback = async () => ['127.0.0.1']
    const ok = await deliverWebhook(`http://hooks.example.test:${port}/`, '{"x":1}', 's', {
      resolve: toLoopback,
      allowPrivate: true,
    })
    assert.deepEqual(
      ok.map((a) => a.status),
      [200],
    )
    assert.equal(received[0]?.body, '{"x":1}')
  })

  it('tells with each attempt what comes next, and resumes from a given attempt after a delay', async () => {
    reset([500, 500, 200])
    const told: [number, number | null][] = []
    const attempts = await deliverWebhook(`http://127.0.0.1:${port}/`, '{}', 's', {
      allowPrivate: true,
      backoff: () => 5,
      attempts: 3,
      onAttempt: (a, next) => told.push([a.attempt, next?.attempt ?? null]),
    })
    assert.deepEqual(
      attempts.map((a) => a.status),
      [500, 500, 200],
    )
    assert.deepEqual(told, [
      [1, 2],
      [2, 3],
      [3, null],
    ])
    reset([500])
    const out: [number, number | null][] = []
    const started = Date.now()
    const last = await deliverWebhook(`http://127.0.0.1:${port}/`, '{}', 's', {
      allowPrivate: true,
      attempts: 5,
      firstAttempt: 5,
      delayMs: 200,
      onAttempt: (a, next) => out.push([a.attempt, next?.attempt ?? null]),
    })
    assert.ok(Date.now() - started >= 190, 'waited for the retry to be due')
    assert.deepEqual(out, [[5, null]], 'the last attempt failed: over, nothing next')
    assert.equal(last[0]?.status, 500)
  })

  it('ends an attempt at its timeout however the receiver trickles, and holds no socket after', async () => {
    // A receiver that answers a byte at a time (headers, then a body that never ends) is never idle: a
    // socket idle timeout alone would let it hold the delivery, and a server's shutdown, for ever.
    const sockets = new Set<net.Socket>()
    const trickle = net.createServer((socket) => {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('close', () => sockets.delete(socket))
      const first = 'HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n'
      const headersFirst = socket.localPort === slowHeadersPort
      const text = headersFirst ? `HTTP/1.1 200 OK\r\nX-${'a'.repeat(400)}: 1\r\n\r\n` : first
      let i = 0
      const timer = setInterval(
        () => {
          if (socket.destroyed) return clearInterval(timer)
          socket.write(i < text.length ? text[i++]! : 'x')
        },
        headersFirst ? 20 : 1,
      )
      socket.on('close', () => clearInterval(timer))
    })
    const slowHeadersPort = await new Promise<number>((resolve) =>
      trickle.listen(0, '127.0.0.1', () => resolve((trickle.address() as AddressInfo).port)),
    )
    try {
      const started = Date.now()
      const attempts = await deliverWebhook(`http://127.0.0.1:${slowHeadersPort}/`, '{}', 's', {
        allowPrivate: true,
        attempts: 1,
        timeoutMs: 300,
      })
      assert.equal(attempts.length, 1)
      assert.equal(attempts[0]!.status, null)
      assert.match(attempts[0]!.error ?? '', /300ms/)
      assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`)
      await new Promise((r) => setTimeout(r, 100))
      assert.equal(sockets.size, 0, 'the receiver still holds a connection')
    } finally {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => trickle.close(() => resolve()))
    }
  })

  it('reads no body: a 2xx whose body never ends leaves no socket behind', async () => {
    const sockets = new Set<net.Socket>()
    const endless = net.createServer((socket) => {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('close', () => sockets.delete(socket))
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n')
      const timer = setInterval(() => socket.destroyed || socket.write('x'), 5)
      socket.on('close', () => clearInterval(timer))
    })
    const p = await new Promise<number>((resolve) =>
      endless.listen(0, '127.0.0.1', () => resolve((endless.address() as AddressInfo).port)),
    )
    try {
      const attempts = await deliverWebhook(`http://127.0.0.1:${p}/`, '{}', 's', {
        allowPrivate: true,
        attempts: 1,
      })
      assert.equal(attempts[0]!.status, 200)
      await new Promise((r) => setTimeout(r, 300))
      assert.equal(sockets.size, 0, 'the receiver still holds a connection')
    } finally {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => endless.close(() => resolve()))
    }
  })

  it('stops waiting for a retry when its signal aborts', async () => {
    reset([500, 500, 500])
    const controller = new AbortController()
    const started = Date.now()
    const pending = deliverWebhook(`http://127.0.0.1:${port}/`, '{}', 's', {
      allowPrivate: true,
      backoff: () => 60_000,
      signal: controller.signal,
    })
    setTimeout(() => controller.abort(), 50)
    const attempts = await pending
    assert.equal(attempts.length, 1)
    assert.ok(Date.now() - started < 5000)
  })
})
