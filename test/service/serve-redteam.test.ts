// A red team's pass over `cordon serve`'s listener with raw sockets: request smuggling spellings, header
// floods, ambiguous credentials, pipelining, chunked bodies past the limit (on /v1 and /mcp), bodies sent
// slowly, and event streams opened and dropped in a storm. Each attack is a test; NEWS.md says what held.
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { mcpMount } from '../../src/mcp/http.js'
import { type Server, serve } from '../../src/service/serve.js'
import { createService } from '../../src/service/service.js'
import { noNamespace, tempDir } from '../helpers.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('serve red team', () => {
  let server: Server
  let key: string
  let hostname: string
  let port: number

  before(async () => {
    const dataDir = tempDir('cordon-serve-redteam-')
    const made = await createService({ dataDir })
    key = made.adminKey as string
    await made.service.close()
    server = await serve({ dataDir, port: 0, requestTimeoutMs: 1500, mounts: (s) => [mcpMount(s)] })
    ;({ hostname } = new URL(server.url))
    port = Number(new URL(server.url).port)
  })
  after(async () => {
    await server?.close()
  })

  /** Writes `text` on a fresh connection; what came back once it closed (or after `ms`). */
  const raw = (text: string | Buffer, ms = 3000) =>
    new Promise<string>((resolve) => {
      let out = ''
      const s = connect(port, hostname, () => s.write(text))
      s.on('data', (d) => {
        out += d.toString('latin1')
      })
      s.on('error', () => {})
      s.on('close', () => resolve(out))
      setTimeout(() => {
        s.destroy()
        resolve(out)
      }, ms)
    })
  // Status lines: a pipelined answer's follows the last one's body on the same line.
  const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))
  const healthy = async () => assert.equal((await fetch(`${server.url}/healthz`)).status, 200)
  const auth = () => `Authorization: Bearer ${key}\r\n`

  it('refuses every request-smuggling spelling (400), and stays up', async () => {
    const head = `POST /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\n${auth()}`
    const attacks = [
      `${head}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      `${head}Content-Length: 5\r\nContent-Length: 6\r\n\r\n{"a":1}`,
      `${head}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
      `${head}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      `${head}Content-Length: -1\r\n\r\n`,
      `${head}Content-Length: 1e3\r\n\r\n`,
      `GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\nX: a\u0000b\r\n\r\n`,
      `GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\n Folded: x\r\n\r\n`,
      `GET /healthz HTTP/1.1\nHost: ${hostname}\n\n`,
    ]
    for (const attack of attacks) {
      const got = statuses(await raw(attack))
      assert.ok(got.length <= 1, `one answer at most: ${got}`)
      assert.ok(
        got[0] === undefined || got[0] === 400,
        `${JSON.stringify(attack.slice(head.length))}: ${got}`,
      )
    }
    await healthy()
  })

  it('answers a header flood 431 (20 000 headers, one of 100 KB, a 20 KB query), and stays up', async () => {
    const base = `GET /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\n${auth()}`
    for (const attack of [
      `${base}${'a: b\r\n'.repeat(20_000)}\r\n`,
      `${base}X: ${'a'.repeat(100_000)}\r\n\r\n`,
      `GET /v1/runs?${'p=1&'.repeat(5000)} HTTP/1.1\r\nHost: ${hostname}\r\n${auth()}\r\n`,
    ])
      assert.deepEqual(statuses(await raw(attack)), [431])
    await healthy()
  })

  it('takes no credential from two Authorization headers, in either order', async () => {
    for (const [a, b] of [
      ['Bearer cordon_nope', `Bearer ${key}`],
      [`Bearer ${key}`, 'Bearer cordon_nope'],
      [`Bearer ${key}`, `Bearer ${key}`],
    ]) {
      const got = await raw(
        `GET /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${a}\r\nAuthorization: ${b}\r\nConnection: close\r\n\r\n`,
      )
      assert.deepEqual(statuses(got), [401], `${a} / ${b}`)
    }
  })

  it('answers 500 pipelined requests on one connection, in order, and stays up', async () => {
    const one = `GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`
    const got = await raw(
      `${one.repeat(499)}GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\n\r\n`,
      20_000,
    )
    assert.equal(statuses(got).length, 500)
    assert.ok(statuses(got).every((s) => s === 200))
    await healthy()
  })

  it('stops a chunked body past the limit (413) on /v1 and /mcp, and refuses one without a key before it is read', async () => {
    for (const path of ['/v1/runs', '/mcp']) {
      const result = await new Promise<{ status: number; sent: number }>((resolve) => {
        let out = ''
        let sent = 0
        const chunk = Buffer.alloc(1024 * 1024, 0x20)
        const s = connect(port, hostname, () => {
          s.write(
            `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${auth()}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n`,
          )
          const pump = () => {
            while (sent < 64 * 1024 * 1024 && !s.destroyed) {
              sent += chunk.length
              s.write(`${chunk.length.toString(16)}\r\n`)
              s.write(chunk)
              if (!s.write('\r\n')) return void s.once('drain', pump)
            }
          }
          pump()
        })
        s.on('data', (d) => {
          out += d.toString('latin1')
          const status = statuses(out)[0]
          if (status !== undefined) {
            s.destroy()
            resolve({ status, sent })
          }
        })
        s.on('error', () => {})
      })
      assert.equal(result.status, 413, path)
      assert.ok(result.sent < 32 * 1024 * 1024, `${path}: ${result.sent} bytes sent before the answer`)
    }
    // Without a key: 401 as soon as the head is read, whatever the body would be.
    const got = await raw(
      `POST /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n`,
      2000,
    )
    assert.deepEqual(statuses(got), [401])
    await healthy()
  })

  it('cuts off a body sent slowly at the request timeout (408)', async () => {
    const started = Date.now()
    const got = await new Promise<string>((resolve) => {
      let out = ''
      const s = connect(port, hostname, () =>
        s.write(`POST /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\n${auth()}Content-Length: 1000\r\n\r\n{`),
      )
      const drip = setInterval(() => s.writable && s.write(' '), 200)
      s.on('data', (d) => {
        out += d.toString('latin1')
      })
      s.on('error', () => {})
      s.on('close', () => {
        clearInterval(drip)
        resolve(out)
      })
      setTimeout(() => s.destroy(), 10_000)
    })
    assert.deepEqual(statuses(got), [408])
    assert.ok(Date.now() - started < 6000, `${Date.now() - started} ms`)
  })

  it('/mcp refuses a nesting bomb (-32700) without holding the thread', async () => {
    const n = 4 * 1024 * 1024 - 8
    const started = Date.now()
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '['.repeat(n) + ']'.repeat(n),
    })
    assert.equal(res.status, 400)
    const error = ((await res.json()) as { error: { code: number; message: string } }).error
    assert.equal(error.code, -32700)
    assert.match(error.message, /deeper than 64/)
    assert.ok(Date.now() - started < 3000, `${Date.now() - started} ms`)
  })

  it('leaks no event-stream slot to a storm of streams opened and dropped, HEAD included', {
    skip: noNamespace,
  }, async () => {
    const headers = { authorization: `Bearer ${key}` }
    const run = (await (
      await fetch(`${server.url}/v1/runs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ cmd: ['sleep', '30'] }),
      })
    ).json()) as { id: string }
    const url = `${server.url}/v1/runs/${run.id}/events`
    try {
      for (let round = 0; round < 20; round++) {
        await Promise.all(
          Array.from({ length: 10 }, async (_, i) => {
            const stop = new AbortController()
            const res = await fetch(url, {
              headers,
              signal: stop.signal,
              method: i % 5 === 0 ? 'HEAD' : 'GET',
            })
            if (res.status === 429) return
            if (i % 2 === 0) await res.body?.getReader().read()
            stop.abort()
          }).map((p) => p.catch(() => undefined)),
        )
      }
      await sleep(500)
      // The key's 8 streams are all free again: 8 open at once, and the 9th is 429.
      const held = await Promise.all(Array.from({ length: 8 }, () => fetch(url, { headers })))
      assert.deepEqual(
        held.map((r) => r.status),
        Array(8).fill(200),
      )
      const ninth = await fetch(url, { headers })
      assert.equal(ninth.status, 429)
      for (const r of held) await r.body?.cancel()
    } finally {
      await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: 'POST', headers })
    }
  })
})
